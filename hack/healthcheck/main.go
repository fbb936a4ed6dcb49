// Command nodedisks-healthcheck runs GitOps health checks in the engines Argo CD and Flux use, so the
// tests judge our health.lua and healthCheckExprs exactly as those controllers would.
//
// It reads one JSON request on stdin:
//
//	{"argocd": {"healthLua": "...", "useOpenLibs": false},
//	 "flux":   {"healthCheckExprs": [{"apiVersion": "...", "kind": "...", "current": "...", ...}]},
//	 "objects": [{"name": "testdata/healthy.yaml", "yaml": "apiVersion: ..."}]}
//
// and writes {"results": [{"name", "argocd": {status, message, error}, "flux": {…}, "kstatus": {…}}]}
// (kstatus: the generic verdict of github.com/fluxcd/cli-utils, for tools with no custom check).
// An object that an engine cannot judge is a result (Argo CD's error, Flux's Unknown), not a failure of
// this command; a request it cannot read exits 1 with the reason on stderr.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

type request struct {
	ArgoCD  argoCDRequest `json:"argocd"`
	Flux    fluxRequest   `json:"flux"`
	Objects []struct {
		Name string `json:"name"`
		YAML string `json:"yaml"`
	} `json:"objects"`
}

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

type result struct {
	Name    string  `json:"name"`
	ArgoCD  verdict `json:"argocd"`
	Flux    verdict `json:"flux"`
	KStatus verdict `json:"kstatus"`
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: nodedisks-healthcheck < request.json (no arguments; see the comment in main.go)")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "nodedisks-healthcheck: %v\n", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	var req request
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("reading the request from stdin: %w", err)
	}
	if req.ArgoCD.HealthLua == "" {
		return fmt.Errorf("the request has no argocd.healthLua")
	}
	flux, err := newFluxReader(req.Flux)
	if err != nil {
		return err
	}
	results := make([]result, 0, len(req.Objects))
	for _, o := range req.Objects {
		obj, err := decodeObject(o.YAML)
		if err != nil {
			return fmt.Errorf("object %s: %w", o.Name, err)
		}
		results = append(results, result{
			Name:    o.Name,
			ArgoCD:  argoCDHealth(req.ArgoCD, obj),
			Flux:    flux.health(obj),
			KStatus: kstatusHealth(obj),
		})
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"results": results})
}

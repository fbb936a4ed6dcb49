package main

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type fluxRequest struct {
	HealthCheckExprs []kustomize.CustomHealthCheck `json:"healthCheckExprs"`
}

type fluxReader struct{ reader engine.StatusReader }

// newFluxReader builds the status reader kustomize-controller builds from spec.healthCheckExprs
// (github.com/fluxcd/pkg/runtime/cel). Expressions that do not parse fail here, as Flux rejects them.
func newFluxReader(req fluxRequest) (*fluxReader, error) {
	if len(req.HealthCheckExprs) == 0 {
		return nil, fmt.Errorf("the request has no flux.healthCheckExprs")
	}
	factory, err := fluxcel.NewStatusReader(req.HealthCheckExprs)
	if err != nil {
		return nil, fmt.Errorf("flux.healthCheckExprs: %w", err)
	}
	// The reader judges the object it is given: it needs no REST mapper and no cluster reader.
	return &fluxReader{reader: factory(nil)}, nil
}

// health is kstatus's verdict, as Flux's wait loop receives it: Current, InProgress, Failed, or
// Unknown when an expression cannot be evaluated (Flux then keeps waiting and reports the error).
func (f *fluxReader) health(obj *unstructured.Unstructured) verdict {
	rs, err := f.reader.ReadStatusForObject(context.Background(), nil, obj)
	if err != nil {
		return verdict{Status: "Unknown", Error: err.Error()}
	}
	v := verdict{Status: rs.Status.String(), Message: rs.Message}
	if rs.Error != nil {
		v.Error = rs.Error.Error()
	}
	return v
}

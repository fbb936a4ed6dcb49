// nodedisks-promql reads PromQL expressions, one JSON string per line on stdin, and parses each with
// Prometheus' own parser (github.com/prometheus/prometheus/promql/parser, what the server evaluates
// with). For each it prints one JSON line: the vector selectors the expression reads, each as PromQL
// text (name and matchers, without range or offset), or the parse error. The scrape test asks a real
// Prometheus for each selector's series, so a typo'd metric or label name is found without our own
// reading of PromQL.
package main

import (
	"bufio"
	"encoding/json"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
)

type result struct {
	Expr      string   `json:"expr"`
	Error     string   `json:"error,omitempty"`
	Selectors []string `json:"selectors"`
	// The label names the expression groups or matches by (by (…), on (…)): each must be on the series
	// it reads, or the grouping silently drops it.
	Labels []string `json:"labels"`
}

// The default options: the PromQL that a Prometheus server without feature flags accepts.
var promql = parser.NewParser(parser.Options{})

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false) // PromQL's > and < stay as they are
	for in.Scan() {
		var expr string
		res := result{Selectors: []string{}, Labels: []string{}}
		if err := json.Unmarshal(in.Bytes(), &expr); err != nil {
			res.Error = "not a JSON string: " + err.Error()
			_ = out.Encode(res)
			continue
		}
		res.Expr = expr
		ast, err := promql.ParseExpr(expr)
		if err != nil {
			res.Error = err.Error()
			_ = out.Encode(res)
			continue
		}
		seen := map[string]bool{}
		seenLabel := map[string]bool{}
		addLabels := func(names []string) {
			for _, l := range names {
				if !seenLabel[l] {
					seenLabel[l] = true
					res.Labels = append(res.Labels, l)
				}
			}
		}
		parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
			switch n := node.(type) {
			case *parser.VectorSelector:
				// Name and matchers only: an offset or @ would ask /api/v1/series about another time.
				s := (&parser.VectorSelector{Name: n.Name, LabelMatchers: n.LabelMatchers}).String()
				if !seen[s] {
					seen[s] = true
					res.Selectors = append(res.Selectors, s)
				}
			case *parser.AggregateExpr:
				if !n.Without {
					addLabels(n.Grouping)
				}
			case *parser.BinaryExpr:
				if n.VectorMatching != nil && n.VectorMatching.On {
					addLabels(n.VectorMatching.MatchingLabels)
				}
			}
			return nil
		})
		_ = out.Encode(res)
	}
	if err := in.Err(); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}

// nodedisks-promtext reads a /metrics text (Prometheus exposition format 0.0.4) on stdin and parses it
// with Prometheus' own parser (github.com/prometheus/common/expfmt, what the Prometheus server and
// client_golang's tools use), then lints it with client_golang's promlint. It prints JSON: the families
// as parsed, the lint problems, or the parse error. Our tests use it as the independent judge of the
// agent's and the controller's /metrics text.
package main

import (
	"encoding/json"
	"os"
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type bucket struct {
	Le    string `json:"le"`
	Count uint64 `json:"count"`
}

type metric struct {
	Labels map[string]string `json:"labels"`
	// Values as Go formats them ("NaN", "+Inf", "1e-07"): JSON has no NaN or infinity.
	Value   string   `json:"value,omitempty"`
	Buckets []bucket `json:"buckets,omitempty"`
	Sum     string   `json:"sum,omitempty"`
	Count   uint64   `json:"count,omitempty"`
}

type family struct {
	Name    string   `json:"name"`
	Help    string   `json:"help"`
	Type    string   `json:"type"`
	Metrics []metric `json:"metrics"`
}

type problem struct {
	Metric string `json:"metric"`
	Text   string `json:"text"`
}

type result struct {
	Error    string    `json:"error,omitempty"`
	Families []family  `json:"families"`
	Problems []problem `json:"problems"`
}

func f(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func main() {
	out := json.NewEncoder(os.Stdout)
	// Legacy validation: metric and label names as the 0.0.4 text format defines them (no UTF-8 quoting).
	parser := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := parser.TextToMetricFamilies(os.Stdin)
	if err != nil {
		_ = out.Encode(result{Error: err.Error(), Families: []family{}, Problems: []problem{}})
		return
	}
	names := make([]string, 0, len(parsed))
	for name := range parsed {
		names = append(names, name)
	}
	sort.Strings(names)
	res := result{Families: []family{}, Problems: []problem{}}
	mfs := make([]*dto.MetricFamily, 0, len(names))
	for _, name := range names {
		mf := parsed[name]
		mfs = append(mfs, mf)
		fam := family{Name: mf.GetName(), Help: mf.GetHelp(), Type: mf.GetType().String(), Metrics: []metric{}}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			x := metric{Labels: labels}
			switch {
			case m.Counter != nil:
				x.Value = f(m.GetCounter().GetValue())
			case m.Gauge != nil:
				x.Value = f(m.GetGauge().GetValue())
			case m.Untyped != nil:
				x.Value = f(m.GetUntyped().GetValue())
			case m.Histogram != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					x.Buckets = append(x.Buckets, bucket{Le: f(b.GetUpperBound()), Count: b.GetCumulativeCount()})
				}
				x.Sum = f(h.GetSampleSum())
				x.Count = h.GetSampleCount()
			}
			fam.Metrics = append(fam.Metrics, x)
		}
		res.Families = append(res.Families, fam)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		res.Error = "promlint: " + err.Error()
	}
	for _, p := range problems {
		res.Problems = append(res.Problems, problem{Metric: p.Metric, Text: p.Text})
	}
	_ = out.Encode(res)
}

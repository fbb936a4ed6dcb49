package main

import (
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kstatusHealth is kstatus's generic verdict (status.Compute), as tools without a custom health check
// for NodeDisks read it: status.observedGeneration against metadata.generation, then the Reconciling,
// Stalled and Ready conditions at status.conditions, else Current.
func kstatusHealth(obj *unstructured.Unstructured) verdict {
	res, err := status.Compute(obj)
	if err != nil {
		return verdict{Status: "Unknown", Error: err.Error()}
	}
	return verdict{Status: res.Status.String(), Message: res.Message}
}

package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// decodeObject turns a fixture into the object both controllers see: an unstructured object decoded
// from JSON the way client-go decodes API responses (whole numbers become int64, not float64).
func decodeObject(doc string) (*unstructured.Unstructured, error) {
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	return u, nil
}

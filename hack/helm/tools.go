//go:build tools

// Package tools pins helm, which the chart tests build (hack/helm/helm.ts).
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)

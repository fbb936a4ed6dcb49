//go:build tools

// Package tools pins krew and its manifest validator, which the krew tests build (hack/krew/krew.ts).
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)

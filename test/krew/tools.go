//go:build tools

// Package tools pins krew, which the krew installation test builds (test/krew/krew.ts).
package tools

import _ "sigs.k8s.io/krew/cmd/krew"

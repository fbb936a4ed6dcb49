//go:build tools

// Pins agnhost, the e2e framework's test image program (the subPath suite runs its mounttest), so
// `go mod tidy` keeps what it needs; e2e-test.ts builds it beside e2e.test.
package e2estorage

import _ "k8s.io/kubernetes/test/images/agnhost"

// Pins the Prometheus Operator module whose example/prometheus-operator-crd holds the CRDs
// (monitoring.coreos.com) that test/integration/monitoring.test.ts installs (hack/promop/crds.ts).
module nodedisks.test/promop

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0

// Package e2estorage is Kubernetes' e2e framework with only its external storage suites registered: the
// suites a CSI driver is held to, driven by a test-driver YAML (--storage.testdriver). It is the upstream
// test/e2e binary minus the other SIGs' specs, so `go test -c` compiles less and --list-tests shows only
// what npm run test:storage can select.
package e2estorage

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"

	// The feature gates' and features' names, frozen before any spec is defined.
	_ "k8s.io/kubernetes/test/e2e/feature"
	// The external driver: --storage.testdriver turns a YAML file into the storage suites' specs.
	_ "k8s.io/kubernetes/test/e2e/storage/external"
	// The framework's own hooks: dumps on failure, metrics grabbing, node readiness checks.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
)

func TestMain(m *testing.M) {
	showVersion := flag.Bool("version", false, "Print the Kubernetes version this binary was built from, then exit.")
	// --storage.testdriver lives in the framework's config flag set; the common and cluster flags
	// (--kubeconfig, --provider, --report-dir, ...) are registered by the framework itself.
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments %q: every option of e2e.test is a --flag\n", flag.Args())
		os.Exit(2)
	}
	// Manifests some suites load (CSI mock, data populators) are embedded; nothing is read from a checkout.
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestStorageSuites(t *testing.T) {
	e2e.RunE2ETests(t)
}

//go:build tools

// Keeps the two modules required: their .proto files are read, nothing is compiled.
package tools

import (
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

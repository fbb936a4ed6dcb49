// The CSI spec and the kubelet's plugin-registration API, whose .proto files hack/csiproto/generate.ts
// turns into the descriptors the CSI driver serves (nothing is built from this module). The spec is the
// version the kubelet speaks (Kubernetes' own go.mod), not the newest: docs/adr/0039-csi-driver.md.
module nodedisks.local/hack/csiproto

go 1.26

require (
	github.com/container-storage-interface/spec v1.9.0
	k8s.io/kubelet v0.35.4
)

require (
	github.com/golang/protobuf v1.5.4 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20251202230838-ff82c1b0f217 // indirect
	google.golang.org/grpc v1.79.3 // indirect
	google.golang.org/protobuf v1.36.10 // indirect
)

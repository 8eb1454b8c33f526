// The module scripts/node-parts builds the device plugin in: Arm's smarter-device-manager
// v1.20.11, unmodified, as the Go module proxy serves it (gitlab.com/arm-research/smarter/
// smarter-device-manager; the GitHub mirror's path is not served). That version has no go.mod of
// its own (its Dockerfile runs `go mod init && go mod tidy`, taking whatever is newest), so its
// imports are pinned here. k8s.io/kubelet is v0.32.5, the version Multus v4.2.3 builds with: its
// device plugin API (v1beta1, the same on the wire as kubelet v1.37.2 serves) is gogo-generated;
// v0.37.2's is protoc-gen-go-grpc code whose DevicePluginServer demands
// mustEmbedUnimplementedDevicePluginServer(), which this 2022 plugin does not have.
module railbench.invalid/node-parts/device-plugin

go 1.26.0

require (
	github.com/fsnotify/fsnotify v1.9.0
	github.com/golang/glog v1.2.5
	gitlab.com/arm-research/smarter/smarter-device-manager v1.20.11
	golang.org/x/net v0.59.0
	google.golang.org/grpc v1.83.2
	gopkg.in/yaml.v2 v2.4.0
	k8s.io/kubelet v0.32.5
)

// The module scripts/node-parts builds Multus's thin plugin in (cmd/multus of multus-cni
// v4.2.3, unmodified): a module of its own, so that the Go module proxy's exact version and its
// own requirements decide what is built.
module railbench.invalid/node-parts/multus

go 1.24

require gopkg.in/k8snetworkplumbingwg/multus-cni.v4 v4.2.3

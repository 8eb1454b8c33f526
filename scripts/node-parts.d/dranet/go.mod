// The module scripts/node-parts builds DRANET in: sigs.k8s.io/dranet v1.4.0, unmodified
// (cmd/dranet, as its Dockerfile builds it), its own requirements as they are.
module railbench.invalid/node-parts/dranet

go 1.26.0

require sigs.k8s.io/dranet v1.4.0

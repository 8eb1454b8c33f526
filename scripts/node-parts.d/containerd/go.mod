// The module scripts/node-parts builds containerd in: github.com/containerd/containerd/v2 v2.4.2,
// unmodified (cmd/containerd, cmd/containerd-shim-runc-v2, cmd/ctr), its own requirements as
// they are; the go line is containerd's own (go 1.26.6). containerd 2.x runs NRI by default,
// which DRANET's hooks need; Debian 12's containerd 1.6 has none that DRANET can use.
module railbench.invalid/node-parts/containerd

go 1.26.6

require github.com/containerd/containerd/v2 v2.4.2

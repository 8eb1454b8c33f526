// The module scripts/node-parts builds CRI-O in: github.com/cri-o/cri-o v1.34.0, unmodified
// (cmd/crio; pinns, C, from the same module's source tree), its own requirements as they are
// (its go.mod has no replace directives); the go line is CRI-O's own (go 1.24.1).
module railbench.invalid/node-parts/crio

go 1.24.1

require github.com/cri-o/cri-o v1.34.0

//! railsweep: rail-by-rail RDMA sweeps between Kubernetes pods.
#![forbid(unsafe_code)]
fn main() {}

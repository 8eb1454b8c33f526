//! rdmabw: RDMA WRITE bandwidth, a drop-in for ib_write_bw.
#![forbid(unsafe_code)]
fn main() {}

pub mod cluster;
pub mod fake;
pub mod fleet;
pub mod kube;
pub mod process;

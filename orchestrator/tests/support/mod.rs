pub mod fake;
pub mod fleet;
pub mod kube;
pub mod process;
pub mod testcluster;

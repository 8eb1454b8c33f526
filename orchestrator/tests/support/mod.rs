pub mod cluster;
pub mod fake;
pub mod kube;
pub mod process;

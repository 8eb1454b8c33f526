pub mod fake;
pub mod kube;
pub mod process;

pub mod fake;
pub mod kube;

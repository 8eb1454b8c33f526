//! The tests that need the real control plane (`scripts/cluster`, `RAILBENCH_TEST_KUBECONFIG`),
//! one test binary: each module was a binary of its own, and each compiled and linked kube-rs's
//! generic client anew (about 40 s apiece, most of the build's time for tests). Each test works
//! in a namespace of its own, so they share the process as they shared the cluster.
//! `fleet_verdicts.rs` stays a binary of its own: scripts/test runs it alone.

#[path = "../support/mod.rs"]
mod support;

mod deploy_cluster;
mod dra_cluster;
mod fleet_cluster;
mod kube_exec;
mod modes_cluster;
mod modes_run;
mod pod_guard_cluster;
mod sweep_cluster;

//! railsweep's pods are deleted on every path out of a command, against the real control
//! plane (`scripts/cluster`): a pod pair created and ready, then an error returned or a panic
//! before `finish` (what any bug between the pods' start and their deletion would do), leaves
//! no pod behind. `run`, `compare` and `fleet` hold their pods through the same guard
//! (`orchestrator::modes::guard::PodGuard`); here it is reached through `run`'s and
//! `compare`'s `managed::start_pair`.

use std::time::Duration;

use crate::support::testcluster::TestCluster;
use orchestrator::managed::{self, PairSpec};
use orchestrator::modes::cli::{NodePair, PodArgs};
use orchestrator::modes::Mode;
use orchestrator::runner::KubeRunner;

/// `railsweep run --mode hostnetwork --nodes node-a,node-b`'s pods in `ns`, ready (kept after
/// the pair goes with `keep_pods`, as `--keep-pods` does).
async fn ready_pair(c: &TestCluster, ns: &str, port: u16, keep_pods: bool) -> managed::ManagedPair {
    let runner = KubeRunner::from_client(c.client.clone(), ns, "test", None);
    let pods = PodArgs {
        pod_timeout: 60.0,
        keep_pods,
        ..PodArgs::default()
    };
    let nodes = NodePair {
        client: "node-a".into(),
        server: "node-b".into(),
    };
    let spec = PairSpec {
        pods: &pods,
        nodes: Some(&nodes),
        port,
        gpu: false,
    };
    let pair = managed::start_pair(&runner, &spec, Mode::HostNetwork)
        .await
        .expect("the pods start")
        .expect("not interrupted");
    assert_eq!(c.pods_left(ns).await.len(), 2, "both pods created");
    pair
}

/// Whether `ns` has no pod of railsweep's left (being deleted counts as gone) within 15 s.
async fn none_left(c: &TestCluster, ns: &str) -> Vec<String> {
    let mut left = c.pods_left(ns).await;
    for _ in 0..75 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        left = c.pods_left(ns).await;
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_after_the_pods_started_deletes_them() {
    let c = TestCluster::get().await;
    let ns = c.namespace("guard-error", &[]).await;
    // A command that fails between the pods' start and `finish`, returning its error with `?`.
    async fn command(c: &TestCluster, ns: &str) -> anyhow::Result<()> {
        let _pair = ready_pair(c, ns, 18791, false).await;
        anyhow::bail!("an error injected after the pods were created")
    }
    let e = command(&c, &ns).await.expect_err("the injected error");
    assert!(e.to_string().contains("injected"), "{e}");
    let left = none_left(&c, &ns).await;
    assert!(left.is_empty(), "pods left behind after an error: {left:?}");
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_after_the_pods_started_deletes_them() {
    let c = TestCluster::get().await;
    let ns = c.namespace("guard-panic", &[]).await;
    let pair = ready_pair(&c, &ns, 18792, false).await;
    let task = tokio::spawn(async move {
        let _pair = pair;
        panic!("a panic injected after the pods were created");
    });
    assert!(task.await.expect_err("the task panics").is_panic());
    let left = none_left(&c, &ns).await;
    assert!(left.is_empty(), "pods left behind after a panic: {left:?}");
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_pods_keeps_them_whatever_the_end() {
    let c = TestCluster::get().await;
    let ns = c.namespace("guard-keep", &[]).await;
    let pair = ready_pair(&c, &ns, 18793, true).await;
    drop(pair);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(c.pods_left(&ns).await.len(), 2, "--keep-pods keeps them");
    // The namespace's deletion takes them.
    c.delete_namespace(&ns).await;
}

/// On a single-threaded runtime the guard cannot block in `Drop`: it hands the deletes to the
/// runtime as a task, which runs at the runtime's next await.
#[tokio::test(flavor = "current_thread")]
async fn an_error_on_a_single_threaded_runtime_deletes_them_too() {
    let c = TestCluster::get().await;
    let ns = c.namespace("guard-single", &[]).await;
    async fn command(c: &TestCluster, ns: &str) -> anyhow::Result<()> {
        let _pair = ready_pair(c, ns, 18794, false).await;
        anyhow::bail!("an error injected after the pods were created")
    }
    let e = command(&c, &ns).await.expect_err("the injected error");
    assert!(e.to_string().contains("injected"), "{e}");
    let left = none_left(&c, &ns).await;
    assert!(
        left.is_empty(),
        "pods left behind on a single-threaded runtime: {left:?}"
    );
    c.delete_namespace(&ns).await;
}

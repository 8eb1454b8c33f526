//! `railsweep run --client-pod --server-pod --inject` end to end on the built binary, with a
//! fake rdmabw, through the Kubernetes runner and the real control plane that `scripts/cluster
//! up` starts (the local runner's cases are in `sweep_cli.rs`).

use std::path::Path;
use std::process::Stdio;

use crate::support::fake::{alive, Behave, Fake};
use crate::support::kube::railsweep;
use crate::support::process::text;
use crate::support::testcluster::TestCluster;
use results::{read_path, RailStatus};

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `railsweep run` from `client` to pod-b with kubeconfig `kc`, the fake `f` injected, tests of
/// one second, the CSV to `out`; then `extra`.
fn injected_run(kc: &Path, f: &Fake, client: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let (kc, fake, out) = (s(kc), s(&f.path()), s(out));
    [
        "run",
        "--kubeconfig",
        &kc,
        "--client-pod",
        client,
        "--server-pod",
        "pod-b",
        "--inject",
        "--inject-binary",
        &fake,
        "--window",
        "1",
        "--tclass",
        "41",
        "--output-file",
        &out,
    ]
    .iter()
    .chain(extra)
    .map(|a| (*a).to_string())
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_sweep_through_the_kubernetes_runner() {
    // Two pods of the real control plane (scripts/cluster): pod-a on node-a in a network
    // namespace of its own, pod-b on node-b; railsweep with deploy/rbac.yaml's grants only.
    let f = Fake::new(2);
    f.behave("net2", Behave::Crash);
    let c = TestCluster::get().await;
    let ns = c.namespace("sweep", &[]).await;
    c.pod(&ns, "pod-a", "node-a", false, "rdmabw").await;
    c.pod(&ns, "pod-b", "node-b", false, "rdmabw").await;
    let kc = c
        .railsweep_kubeconfig(&ns, None, &f.file("kubeconfig"))
        .await;
    let out = f.file("sweep.csv");
    let json = f.file("sweep.json");
    let r = railsweep(&injected_run(
        &kc,
        &f,
        "pod-a",
        &out,
        &["--out_json_file", &s(&json), "-o", "json"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    let rows = read_path(&out).expect("reads");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].status, RailStatus::Ok);
    assert_eq!(rows[0].client_pod.as_deref(), Some("pod-a"));
    assert_eq!(rows[0].client_node, "node-a");
    assert_eq!(rows[0].server_node, "node-b");
    assert_eq!(rows[0].cluster, "railbench-lab");
    assert!(rows[1]
        .error
        .as_deref()
        .unwrap_or("")
        .contains("connection refused"));
    // stdout is the results JSON; the snapshot file is the same rows.
    let printed = results::read_str(&text(&r.stdout), "stdout").expect("json on stdout");
    assert_eq!(printed, rows);
    assert_eq!(read_path(&json).expect("snapshot"), rows);
    // The injected copy ran (the client log is the fake's), and the daemon is gone.
    assert!(f.client_log().contains("-d mlx5_0"));
    let daemon = f.pid_in("server.pid").expect("pid");
    assert!(
        !alive(daemon),
        "daemon {daemon} ended through a second exec"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_pod_is_the_servers_words_not_a_debug_dump() {
    // Issue 33: this printed `ApiError: pods "gone" not found: NotFound (Status { status:
    // Some(Failure), ... })`, the message three times.
    let f = Fake::new(1);
    let c = TestCluster::get().await;
    let ns = c.namespace("missing", &[]).await;
    let kc = c
        .railsweep_kubeconfig(&ns, None, &f.file("kubeconfig"))
        .await;
    let r = tokio::process::Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args([
            "run",
            "--kubeconfig",
            &s(&kc),
            "--client-pod",
            "gone",
            "--server-pod",
            "gone",
            "--rdmabw",
            "/usr/bin/rdmabw",
            "--tclass",
            "41",
            "--output-file",
            &s(&f.file("none.csv")),
        ])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("railsweep runs");
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Error from server (NotFound): pods \"gone\" not found"),
        "{err}"
    );
    assert_eq!(err.matches("not found").count(), 1, "said once: {err}");
    assert!(
        !err.contains("Status {") && !err.contains("ApiError"),
        "{err}"
    );
    assert!(
        err.contains(", API server https://"),
        "the server is named: {err}"
    );
}

/// Issue 35: a rail's deadline (`-D` plus `--margin`) counts from its client's start, and the
/// start has a bound of its own of the same length, so that a node that starts execs late (a
/// fleet's round on a busy API server) does not eat into the test's time. Every exec in pod-a
/// starts 3 s late, a test takes 1 s, the deadline is 4 s: 3 + 1 s fit each bound, not their
/// sum. Then with 6 s of delay the client cannot start within the deadline, and the rows say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_exec_start_counts_against_the_start_not_the_test() {
    let f = Fake::new(2);
    f.behave("net1", Behave::Slow);
    f.behave("net2", Behave::Slow);
    let c = TestCluster::get().await;
    let ns = c.namespace("slowexec", &[]).await;
    c.pod_with_slow_execs(&ns, "pod-a", "node-a", "3s").await;
    c.pod_with_slow_execs(&ns, "pod-c", "node-a", "6s").await;
    c.pod(&ns, "pod-b", "node-b", false, "rdmabw").await;
    let kc = c
        .railsweep_kubeconfig(&ns, None, &f.file("kubeconfig"))
        .await;
    let sweep = |client: &str, out: &Path| {
        let args = injected_run(&kc, &f, client, out, &["--deadline-slack", "3"]);
        async move { railsweep(&args).await }
    };

    let out = f.file("late.csv");
    let r = sweep("pod-a", &out).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let rows = read_path(&out).expect("reads");
    assert_eq!(rows.len(), 2, "{stderr}");
    assert!(rows.iter().all(|r| r.status == RailStatus::Ok), "{stderr}");

    let out = f.file("too-late.csv");
    let r = sweep("pod-c", &out).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    let rows = read_path(&out).expect("reads");
    assert_eq!(rows.len(), 2, "{stderr}");
    for row in &rows {
        assert_eq!(row.status, RailStatus::Failed, "{stderr}");
        let e = row.error.as_deref().unwrap_or("");
        assert!(
            e.contains("could not start the client in pod pod-c within the rail's deadline of 4 s"),
            "{e}"
        );
    }
    c.delete_namespace(&ns).await;
}

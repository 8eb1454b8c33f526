//! The Kubernetes runner against the real control plane (`scripts/cluster`): kube-apiserver,
//! etcd, kube-scheduler and kube-controller-manager from Kubernetes' own modules, pods placed
//! by the scheduler and run by this project's node agent. Exec goes kube-rs (WebSocket) → the
//! API server (translated to SPDY) → the node agent's kubelet port. pod-a runs in a network
//! namespace node-a's agent made for it, pod-b on node-b's host network; both see this
//! machine's files.

use crate::support::testcluster::{rule, TestCluster};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::Api;
use orchestrator::runner::{Exit, KubeRunner, KubeTarget, Runner, Signal};

fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The cluster, a namespace of this test's own, and in it pod-a on node-a and pod-b on
/// node-b's host network with its container named `worker`.
async fn setup(prefix: &str) -> (TestCluster, String) {
    let c = TestCluster::get().await;
    let ns = c.namespace(prefix, &[]).await;
    c.pod(&ns, "pod-a", "node-a", false, "rdmabw").await;
    c.pod(&ns, "pod-b", "node-b", true, "worker").await;
    (c, ns)
}

fn runner(c: &TestCluster, ns: &str) -> KubeRunner {
    KubeRunner::from_client(c.client.clone(), ns, "test", None)
}

#[tokio::test]
async fn list_and_get_pods_with_ips_and_nodes() {
    let (c, ns) = setup("list").await;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    let list = pods.list(&ListParams::default()).await.expect("lists");
    let mut names: Vec<String> = list
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, vec!["pod-a", "pod-b"]);
    let b = pods.get("pod-b").await.expect("gets");
    let status = b.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(
        status.pod_ip, status.host_ip,
        "a host-network pod has its node's address"
    );
    let spec = b.spec.expect("spec");
    assert_eq!(
        spec.node_name.as_deref(),
        Some("node-b"),
        "the scheduler bound it"
    );
    assert_eq!(spec.host_network, Some(true));

    let err = pods.get("pod-z").await.expect_err("no such pod");
    match err {
        kube::Error::Api(s) => assert_eq!(s.code, 404, "{s:?}"),
        other => panic!("expected a 404 Status, got {other:?}"),
    }
    let other = c.namespace("list-other", &[]).await;
    let other_ns: Api<Pod> = Api::namespaced(c.client.clone(), &other);
    assert!(other_ns
        .list(&ListParams::default())
        .await
        .expect("lists")
        .items
        .is_empty());
}

#[tokio::test]
async fn exec_exit_code_comes_from_the_status_channel() {
    let (c, ns) = setup("exit").await;
    let r = runner(&c, &ns);
    let out = r
        .exec("pod-a", &argv(&["sh", "-c", "exit 3"]), None)
        .await
        .expect("execs");
    assert_eq!(out.exit, Exit::Code(3));
    let ok = r
        .exec("pod-a", &argv(&["true"]), None)
        .await
        .expect("execs");
    assert_eq!(ok.exit, Exit::Code(0));
}

#[tokio::test]
async fn exec_keeps_stdout_and_stderr_apart() {
    let (c, ns) = setup("streams").await;
    let out = runner(&c, &ns)
        .exec(
            "pod-a",
            &argv(&[
                "sh",
                "-c",
                "echo to-out; echo to-err >&2; printf 'x%.0s' $(seq 1 70000)",
            ]),
            None,
        )
        .await
        .expect("execs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("to-out\n"), "{:?}", &stdout[..20]);
    assert_eq!(
        stdout.len(),
        "to-out\n".len() + 70000,
        "every byte of a large stdout arrives"
    );
    assert_eq!(out.stderr, b"to-err\n");
    assert!(out.exit.success());
}

#[tokio::test]
async fn argv_is_not_parsed_by_a_shell() {
    let (c, ns) = setup("argv").await;
    let out = runner(&c, &ns)
        .exec(
            "pod-a",
            &argv(&["printf", "%s|", "a b", "$HOME", "; exit 9"]),
            None,
        )
        .await
        .expect("execs");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a b|$HOME|; exit 9|");
    assert!(out.exit.success());
}

#[tokio::test]
async fn stdin_reaches_the_process_and_closes() {
    let (c, ns) = setup("stdin").await;
    let r = runner(&c, &ns);
    let data = vec![b'z'; 200_000];
    // `wc -c` needs the end of stdin: v5's close signal carries it through the API server. If
    // the close is lost, `wc` waits for ever: a bounded wait fails the test instead.
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        r.exec("pod-a", &argv(&["wc", "-c"]), Some(data.clone())),
    )
    .await
    .expect("`wc -c` ended within 60 s: the close of stdin reached it")
    .expect("execs");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "200000");
    // `head -c N`, as --inject uses it, needs no end of file at all.
    let out = r
        .exec(
            "pod-a",
            &argv(&["sh", "-c", "head -c \"$1\" | wc -c", "x", "150000"]),
            Some(data),
        )
        .await
        .expect("execs");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "150000");
}

#[tokio::test]
async fn missing_program_is_a_failure_status() {
    let (c, ns) = setup("missing").await;
    let out = runner(&c, &ns)
        .exec("pod-a", &argv(&["/nonexistent/rdmabw", "--version"]), None)
        .await
        .expect("execs");
    match out.exit {
        Exit::Error(m) => assert!(m.contains("/nonexistent/rdmabw"), "{m}"),
        other => panic!("expected a failure status, got {other:?}"),
    }
}

#[tokio::test]
async fn describe_and_container_choice() {
    let (c, ns) = setup("describe").await;
    let r = runner(&c, &ns);
    let b = r.describe("pod-b").await.expect("describes");
    assert_eq!(b.node, "node-b");
    assert_eq!(b.host_network, Some(true));
    assert_eq!(b.container.as_deref(), Some("worker"));
    let err = r.describe("pod-z").await.expect_err("no pod");
    assert!(format!("{err:#}").contains("pod-z"), "{err:#}");

    let wrong = KubeRunner::from_client(c.client.clone(), &ns, "test", Some("nope".into()));
    let err = wrong
        .describe("pod-a")
        .await
        .expect_err("no such container");
    assert!(format!("{err:#}").contains("no container nope"), "{err:#}");
    // The API server's own refusal.
    let err = wrong
        .exec("pod-a", &argv(&["true"]), None)
        .await
        .expect_err("400");
    assert!(
        format!("{err:#}").contains("container nope is not valid for pod pod-a"),
        "{err:#}"
    );
}

#[tokio::test]
async fn spawned_process_outlives_its_stream_and_is_killed_by_pid() {
    let (c, ns) = setup("spawn").await;
    let r = runner(&c, &ns);
    let s = r
        .spawn("pod-a", &argv(&["sleep", "60"]), None)
        .await
        .expect("spawns");
    let alive = r
        .exec("pod-a", &argv(&["kill", "-0", &s.pid.to_string()]), None)
        .await
        .expect("execs");
    assert!(alive.exit.success(), "the spawned process runs");
    r.kill("pod-a", s.pid, Signal::Term).await.expect("kills");
    let out = s.done.await.expect("joins").expect("output");
    assert_eq!(out.exit, Exit::Code(128 + 15));

    // Dropping the exec (its stream) leaves the process running, as a kubelet does: only a
    // kill ends it.
    let s = r
        .spawn("pod-a", &argv(&["sleep", "60"]), None)
        .await
        .expect("spawns");
    let pid = s.pid;
    s.done.abort();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let alive = r
        .exec("pod-a", &argv(&["kill", "-0", &pid.to_string()]), None)
        .await
        .expect("execs");
    assert!(
        alive.exit.success(),
        "closing the stream did not end the process"
    );
    r.kill("pod-a", pid, Signal::Kill).await.expect("kills");
}

/// An exec whose stream was answered and then never ends (a node that stopped answering
/// mid-way: a hung lab node held railsweep for ever in its `kill`) is given up after the
/// runner's stream limit, with an error that names the command, the pod and the limit.
#[tokio::test]
async fn an_answered_exec_that_never_ends_is_given_up_at_the_stream_limit() {
    let (c, ns) = setup("stall").await;
    let limit = std::time::Duration::from_secs(2);
    let r = runner(&c, &ns).with_stream_limit(limit);
    // `sleep 20` would end the stream after 20 s: an error means the limit cut it.
    let t0 = std::time::Instant::now();
    let err = r
        .exec("pod-a", &argv(&["sleep", "20"]), None)
        .await
        .expect_err("cut at the limit");
    let took = t0.elapsed();
    let e = format!("{err:#}");
    assert!(
        e.contains("`sleep` in pod pod-a") && e.contains("no end within 2 s"),
        "{e}"
    );
    assert!(took >= limit, "cut after {took:?}, before the limit");
    // Within the limit, a command ends as before.
    let out = r
        .exec("pod-a", &argv(&["sh", "-c", "exit 4"]), None)
        .await
        .expect("execs");
    assert_eq!(out.exit, Exit::Code(4));
}

#[tokio::test]
async fn kubeconfig_with_token_resolves_like_kubectl() {
    let (c, ns) = setup("token").await;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("kubeconfig");
    c.token_kubeconfig(
        &ns,
        vec![
            rule(&["pods"], &["get", "list"]),
            rule(&["pods/exec"], &["create", "get"]),
        ],
        &path,
    )
    .await;
    let r = KubeRunner::connect(&KubeTarget {
        kubeconfig: Some(path.clone()),
        ..KubeTarget::default()
    })
    .await
    .expect("connects");
    assert_eq!(r.namespace(), ns, "the context's namespace");
    assert_eq!(r.cluster(), "railbench-lab");
    assert!(r
        .exec("pod-a", &argv(&["true"]), None)
        .await
        .expect("execs")
        .exit
        .success());

    // A wrong token is refused by the API server's authentication (401).
    c.write_token_kubeconfig(&ns, "wrong", &path);
    let r = KubeRunner::connect(&KubeTarget {
        kubeconfig: Some(path.clone()),
        ..KubeTarget::default()
    })
    .await
    .expect("connects");
    let err = r.describe("pod-a").await.expect_err("401");
    assert!(
        format!("{err:#}").contains("401") || format!("{err:#}").contains("Unauthorized"),
        "{err:#}"
    );

    // An unknown context is an error naming it.
    let err = KubeRunner::connect(&KubeTarget {
        kubeconfig: Some(path),
        context: Some("prod".into()),
        ..KubeTarget::default()
    })
    .await
    .expect_err("no such context");
    assert!(format!("{err:#}").contains("prod"), "{err:#}");
}

#[tokio::test]
async fn a_missing_permission_names_the_verb_and_resource() {
    let (c, ns) = setup("rbac").await;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("kubeconfig");
    // Every grant but pods/exec.
    c.token_kubeconfig(&ns, vec![rule(&["pods"], &["get", "list"])], &path)
        .await;
    let r = KubeRunner::connect(&KubeTarget {
        kubeconfig: Some(path),
        ..KubeTarget::default()
    })
    .await
    .expect("connects");
    let err = r
        .exec("pod-a", &argv(&["true"]), None)
        .await
        .expect_err("403");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("pods/exec") || (msg.contains("\"pods\"") && msg.contains("exec")),
        "the refusal names the resource: {msg}"
    );
    assert!(
        msg.contains("create") || msg.contains("get"),
        "and the verb: {msg}"
    );
}

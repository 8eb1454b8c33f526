//! The Kubernetes runner against the test API server, over real HTTP/1.1 and WebSocket on a
//! loopback socket: kube-rs's own client, not a mock. Pods here have no network namespace, so
//! their commands run on this machine.

#[path = "../examples/kube-testserver/apiserver.rs"]
#[allow(dead_code)]
mod apiserver;

use std::net::SocketAddr;

use apiserver::{ApiServer, TestPod};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client, Config};
use orchestrator::runner::{Exit, KubeRunner, KubeTarget, Runner, Signal};

fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

async fn server(token: Option<&str>) -> SocketAddr {
    let pods = vec![
        TestPod::parse("pod-a,netns=-,node=node-1,ip=10.99.0.1").expect("spec"),
        TestPod::parse("pod-b,netns=-,node=node-2,ip=10.99.0.2,hostnet,container=worker")
            .expect("spec"),
    ];
    apiserver::start(
        ApiServer {
            namespace: "lab".into(),
            pods,
            token: token.map(str::to_string),
            verbose: false,
        },
        SocketAddr::from(([127, 0, 0, 1], 0)),
    )
    .await
    .expect("binds")
}

async fn client(addr: SocketAddr) -> Client {
    let mut config = Config::new(format!("http://{addr}").parse().expect("uri"));
    config.default_namespace = "lab".into();
    Client::try_from(config).expect("client")
}

async fn runner(addr: SocketAddr) -> KubeRunner {
    KubeRunner::from_client(client(addr).await, "lab", "test", None)
}

#[tokio::test]
async fn list_and_get_pods_with_ips_and_nodes() {
    let addr = server(None).await;
    let pods: Api<Pod> = Api::namespaced(client(addr).await, "lab");
    let list = pods.list(&ListParams::default()).await.expect("lists");
    let names: Vec<String> = list
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, vec!["pod-a", "pod-b"]);
    let b = pods.get("pod-b").await.expect("gets");
    let status = b.status.expect("status");
    assert_eq!(status.pod_ip.as_deref(), Some("10.99.0.2"));
    assert_eq!(status.phase.as_deref(), Some("Running"));
    let spec = b.spec.expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("node-2"));
    assert_eq!(spec.host_network, Some(true));

    let err = pods.get("pod-z").await.expect_err("no such pod");
    match err {
        kube::Error::Api(s) => assert_eq!(s.code, 404, "{s:?}"),
        other => panic!("expected a 404 Status, got {other:?}"),
    }
    let other_ns: Api<Pod> = Api::namespaced(client(addr).await, "elsewhere");
    assert!(other_ns
        .list(&ListParams::default())
        .await
        .expect("lists")
        .items
        .is_empty());
}

#[tokio::test]
async fn exec_exit_code_comes_from_the_status_channel() {
    let r = runner(server(None).await).await;
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
    let r = runner(server(None).await).await;
    let out = r
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
    let r = runner(server(None).await).await;
    let out = r
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
    let r = runner(server(None).await).await;
    let data = vec![b'z'; 200_000];
    // `wc -c` needs the end of stdin: v5's close signal carries it.
    let out = r
        .exec("pod-a", &argv(&["wc", "-c"]), Some(data.clone()))
        .await
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
    let r = runner(server(None).await).await;
    let out = r
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
    let addr = server(None).await;
    let r = runner(addr).await;
    let b = r.describe("pod-b").await.expect("describes");
    assert_eq!(b.node, "node-2");
    assert_eq!(b.host_network, Some(true));
    assert_eq!(b.container.as_deref(), Some("worker"));
    let err = r.describe("pod-z").await.expect_err("no pod");
    assert!(format!("{err:#}").contains("pod-z"), "{err:#}");

    let wrong = KubeRunner::from_client(client(addr).await, "lab", "test", Some("nope".into()));
    let err = wrong
        .describe("pod-a")
        .await
        .expect_err("no such container");
    assert!(format!("{err:#}").contains("no container nope"), "{err:#}");
    let err = wrong
        .exec("pod-a", &argv(&["true"]), None)
        .await
        .expect_err("400");
    assert!(format!("{err:#}").contains("not valid for pod"), "{err:#}");
}

#[tokio::test]
async fn spawned_process_outlives_its_stream_and_is_killed_by_pid() {
    let r = runner(server(None).await).await;
    let s = r
        .spawn("pod-a", &argv(&["sleep", "60"]))
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
        .spawn("pod-a", &argv(&["sleep", "60"]))
        .await
        .expect("spawns");
    let pid = s.pid;
    s.done.abort();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
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

#[tokio::test]
async fn kubeconfig_with_token_resolves_like_kubectl() {
    let addr = server(Some("s3cret")).await;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        apiserver::kubeconfig(&format!("http://{addr}"), "lab", Some("s3cret")),
    )
    .expect("writes");
    let r = KubeRunner::connect(&KubeTarget {
        kubeconfig: Some(path.clone()),
        ..KubeTarget::default()
    })
    .await
    .expect("connects");
    assert_eq!(r.namespace(), "lab", "the context's namespace");
    assert_eq!(r.cluster(), "railbench-lab");
    assert!(r
        .exec("pod-a", &argv(&["true"]), None)
        .await
        .expect("execs")
        .exit
        .success());

    // A wrong token is refused with the API's 401.
    std::fs::write(
        &path,
        apiserver::kubeconfig(&format!("http://{addr}"), "lab", Some("wrong")),
    )
    .expect("writes");
    let r = KubeRunner::connect(&KubeTarget {
        kubeconfig: Some(path.clone()),
        namespace: Some("lab".into()),
        ..KubeTarget::default()
    })
    .await
    .expect("connects");
    assert!(r.describe("pod-a").await.is_err());

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

//! `railsweep run --mode M` and `railsweep compare` through the real control plane
//! (`scripts/cluster`), from pods created to pods deleted: the real API server admits them, the
//! real scheduler places them, the node agents of node-a and node-b start each in a network
//! namespace of its own and attach its networks with the real CNI plugins, reading the real
//! NetworkAttachmentDefinitions as Multus does; railsweep sweeps with a fake rdmabw through
//! exec. What fails in the sandbox (a missing NetworkAttachmentDefinition, an exhausted IP
//! pool) comes from the plugins, the Topology Manager's refusal from node-b's agent (4 NUMA
//! nodes), and both must come back as explanations. Ctrl-C deletes what railsweep created.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::fake::{ended_within, Behave, Fake};
use crate::support::kube::{railsweep, refused, sweep_args, MODE_OPTIONS};
use crate::support::process::{self, text};
use crate::support::testcluster::TestCluster;
use orchestrator::runner::{KubeRunner, Runner};
use results::{read_path, NetworkMode, RailStatus};

/// A namespace for one test with the rail networks in it (`pool`: see [`TestCluster::networks`]), and a
/// kubeconfig for it with only what deploy/rbac.yaml grants.
async fn setup(
    prefix: &str,
    labels: &[(&str, &str)],
    pool: Option<(&str, u8)>,
    f: &Fake,
) -> (TestCluster, String, PathBuf) {
    let c = TestCluster::get().await;
    let ns = c.namespace(prefix, labels).await;
    c.networks(&ns, pool).await;
    let kc = c
        .railsweep_kubeconfig(&ns, None, &f.file("kubeconfig"))
        .await;
    (c, ns, kc)
}

/// railsweep's arguments: `cmd` between node-a and node-b, CSV to `out`. `port` is the test's
/// own: tests share the nodes, and hostNetwork pods of two tests must not want one host port.
fn args(cmd: &str, kc: &Path, f: &Fake, out: &Path, port: u16, extra: &[&str]) -> Vec<String> {
    let port = port.to_string();
    let extra: Vec<&str> = ["--tclass", "41", "--port", &port]
        .iter()
        .chain(&MODE_OPTIONS)
        .chain(extra)
        .copied()
        .collect();
    sweep_args(cmd, kc, f, out, "node-a,node-b", &extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_creates_waits_sweeps_and_deletes() {
    let f = Fake::new(2);
    let (c, ns, kc) = setup("run-ipvlan", &[], None, &f).await;
    let out = f.file("ipvlan.csv");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        18701,
        &["--mode", "ipvlan", "--run-id", "t1"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("creating client pod railsweep-t1-ipvlan-client on node-a, server pod railsweep-t1-ipvlan-server on node-b"), "{stderr}");
    assert!(
        stderr.contains("mode ipvlan: pods ready ")
            && stderr.contains(" s after their creation: railsweep-t1-ipvlan-"),
        "{stderr}"
    );
    assert!(
        stderr.contains("deleted pods railsweep-t1-ipvlan-client, railsweep-t1-ipvlan-server"),
        "{stderr}"
    );
    let rows = read_path(&out).expect("rows");
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r.status == RailStatus::Ok && r.network_mode == NetworkMode::Ipvlan));
    // Rail 1 of the fake is net2 on mlx5_1; railsweep names the device (-d), not the interface.
    assert!(
        f.client_log().contains("-d mlx5_1 "),
        "the clients ran in the created client pod"
    );
    assert_eq!(
        rows[0].client_pod.as_deref(),
        Some("railsweep-t1-ipvlan-client")
    );
    assert_eq!(
        (rows[0].client_node.as_str(), rows[0].server_node.as_str()),
        ("node-a", "node-b")
    );
    assert!(c.pods_left(&ns).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_pods_have_their_networks_from_the_cni_plugins() {
    let f = Fake::new(1);
    let (c, ns, kc) = setup("keep", &[], None, &f).await;
    let out = f.file("keep.csv");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        18711,
        &["--mode", "ipvlan", "--run-id", "k", "--keep-pods"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("keeping pods") && stderr.contains(&format!("kubectl delete pods -n {ns}")),
        "{stderr}"
    );
    assert_eq!(
        c.pods_left(&ns).await,
        ["railsweep-k-ipvlan-client", "railsweep-k-ipvlan-server"]
    );
    // What macvlan, host-local, tuning and sbr did in the client pod's namespace.
    let runner = KubeRunner::from_client(c.client.clone(), &ns, "test", None);
    let ip = runner
        .exec(
            "railsweep-k-ipvlan-client",
            &["ip".to_string(), "-o".into(), "-4".into(), "addr".into()],
            None,
        )
        .await
        .expect("execs");
    let addrs = String::from_utf8_lossy(&ip.stdout).to_string();
    for i in 0..16 {
        assert!(
            addrs.contains(&format!("net{} ", i + 1)) && addrs.contains(&format!("10.56.{i}.")),
            "rail {i}'s network in the pod:\n{addrs}"
        );
    }
    let sysctl = runner
        .exec(
            "railsweep-k-ipvlan-client",
            &[
                "cat".to_string(),
                "/proc/sys/net/ipv4/conf/net3/arp_ignore".into(),
            ],
            None,
        )
        .await
        .expect("execs");
    assert_eq!(
        String::from_utf8_lossy(&sysctl.stdout).trim(),
        "1",
        "tuning's sysctl"
    );
    let rules = runner
        .exec(
            "railsweep-k-ipvlan-client",
            &["ip".to_string(), "rule".into()],
            None,
        )
        .await
        .expect("execs");
    assert!(
        String::from_utf8_lossy(&rules.stdout).contains("from 10.56.0."),
        "sbr's source rule: {}",
        String::from_utf8_lossy(&rules.stdout)
    );
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_runs_every_mode_into_one_file() {
    let f = Fake::new(2);
    let (c, ns, kc) = setup("compare", &[], None, &f).await;
    c.runtime_class("runc-nohostdev").await;
    let out = f.file("cmp.csv");
    let r = railsweep(&args(
        "compare",
        &kc,
        &f,
        &out,
        18721,
        &["--modes", "hostnetwork,hostnetwork-crio,ipvlan,sriov"],
    ))
    .await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let rows = read_path(&out).expect("one file with every mode");
    let mut modes: Vec<String> = rows.iter().map(|r| r.network_mode.to_string()).collect();
    modes.dedup();
    assert_eq!(
        modes,
        ["hostnetwork", "hostnetwork-crio", "ipvlan", "sriov"]
    );
    assert_eq!(rows.len(), 8);
    for m in ["hostnetwork", "hostnetwork-crio", "ipvlan", "sriov"] {
        assert!(
            stdout.contains(m),
            "the markdown comparison names {m}:\n{stdout}"
        );
    }
    let svg = std::fs::read_to_string(f.file("cmp.svg")).expect("chart");
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        &svg[..40.min(svg.len())]
    );
    // Each mode's table as it is measured, then the comparison, which is also in FILE.md.
    let md = std::fs::read_to_string(f.file("cmp.md")).expect("markdown");
    assert!(
        md.contains("| rail | hostnetwork | hostnetwork-crio | ipvlan | sriov |"),
        "{md}"
    );
    assert!(stdout.ends_with(&md), "{stdout}");
    assert_eq!(stderr.matches("deleted pods").count(), 4, "{stderr}");
    assert!(c.pods_left(&ns).await.is_empty());
}

/// Run one mode that must not start: exit 2, the explanation in words, no pod left behind.
async fn must_not_start(
    prefix: &str,
    pool: Option<(&str, u8)>,
    networks: bool,
    mode: &str,
    extra: &[&str],
    expect: &[&str],
) -> String {
    let f = Fake::new(1);
    let c = TestCluster::get().await;
    let ns = c.namespace(prefix, &[]).await;
    if networks {
        c.networks(&ns, pool).await;
    }
    let kc = c
        .railsweep_kubeconfig(&ns, None, &f.file("kubeconfig"))
        .await;
    let out = f.file("x.csv");
    let mut a = vec!["--mode", mode];
    a.extend_from_slice(extra);
    let a = args("run", &kc, &f, &out, 18731, &a);
    refused(&c, &ns, &a, &out, expect).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_affinity_error_is_explained() {
    // node-b's Topology Manager: 4 GPUs span 2 of its 4 NUMA nodes, 16 PFs all 4 (the IPvlan
    // report's refused job).
    must_not_start(
        "topology",
        None,
        true,
        "ipvlan",
        &["--resource", "nvidia.com/gpu=4"],
        &[
            "TopologyAffinityError",
            "Resources cannot be allocated with Topology locality",
            "NUMA",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipam_exhaustion_is_explained_from_host_local() {
    // The 16 networks share one pool of 8 addresses, as the report's share one NVIDIA IPAM
    // pool: the ninth attachment on a node finds none.
    let pool = format!("rdma-ipvlan-pool-{}", std::process::id());
    must_not_start(
        "ipam",
        Some((&pool, 8)),
        true,
        "ipvlan",
        &[],
        &[
            "no IP addresses available in range set: 10.58.0.1-10.58.0.8",
            &format!("error adding container to network \"{pool}\""),
            "has no free address on node node-",
            "perNodeBlockSize",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_network_attachment_is_explained_from_multus_words() {
    must_not_start(
        "no-nad",
        None,
        false,
        "sriov",
        &[],
        &[
            "cannot find a network-attachment-definition (sriov-rdma-rail-0)",
            "network-attachment-definitions.k8s.cni.cncf.io \"sriov-rdma-rail-0\" not found",
            "create sriov-rdma-rail-0 in",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipvlan_without_ipc_lock_passes_baseline() {
    // Pod Security admission of the real API server refuses IPC_LOCK at baseline
    // (modes_cluster.rs); without it IPvlan's pods are admitted and run.
    let f = Fake::new(1);
    let (_c, _ns, kc) = setup(
        "baseline",
        &[("pod-security.kubernetes.io/enforce", "baseline")],
        None,
        &f,
    )
    .await;
    let out = f.file("ok.csv");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        18741,
        &["--mode", "ipvlan", "--no-ipc-lock"],
    ))
    .await;
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
}

/// Ctrl-C while rail 1 hangs in a `mode` sweep: exit 130, the pods deleted, and the client and
/// the daemon that exec started in them ended by the node agents, as a container's cgroup ends.
async fn ctrl_c_during_the_sweep(mode: &str, port: u16) {
    let f = Fake::new(2);
    f.behave("net2", Behave::Hang);
    let (c, ns, kc) = setup(&format!("int-{mode}"), &[], None, &f).await;
    let out = f.file("int.csv");
    let child = process::start(&args("run", &kc, &f, &out, port, &["--mode", mode]));
    let t0 = Instant::now();
    while f.pid_in("hang-net2.pid").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "rail 1 never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        c.pods_left(&ns).await.len(),
        2,
        "both pods run during the sweep"
    );
    let (code, o) = process::interrupt_async(child, Duration::from_secs(30)).await;
    let stderr = text(&o.stderr);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("deleted pods"), "{stderr}");
    let pids = [
        f.pid_in("hang-net2.pid").expect("pid"),
        f.pid_in("server.pid").expect("pid"),
    ];
    assert!(
        ended_within(&pids, Duration::from_secs(15)).await,
        "the client and the daemon in the pods ended"
    );
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_an_sriov_sweep_deletes_the_pods_and_their_processes() {
    ctrl_c_during_the_sweep("sriov", 18751).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_hostnetwork_sweep_deletes_the_pods_and_their_processes() {
    ctrl_c_during_the_sweep("hostnetwork", 18611).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waits_for_the_host_port_of_a_pod_being_deleted() {
    // As after Ctrl-C (which does not wait for the pods to go) and a run started at once: the
    // last run's server pod, Terminating and still running for its 10 s of grace, holds the
    // host port on node-b. The scheduler places the new pod once it has ended, so railsweep
    // waits, rather than fail at once with "didn't have free ports" as it does for a pod that
    // stays (modes_cluster.rs).
    let f = Fake::new(1);
    let (c, ns, kc) = setup("port-wait", &[], None, &f).await;
    c.pod_with_host_port(&ns, "last-server", "node-b", 18771, Some(10))
        .await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(c.client.clone(), &ns);
    pods.delete("last-server", &Default::default())
        .await
        .expect("deletes");
    let t0 = Instant::now();
    let out = f.file("wait.csv");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        18771,
        &["--mode", "hostnetwork", "--run-id", "pw"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "pod railsweep-pw-hostnetwork-server waits for host port 18771 on node-b: pod \
             last-server, being deleted, still holds it"
        ),
        "{stderr}"
    );
    // It waited for the holder's grace period (less what passed before it looked).
    assert!(
        t0.elapsed() > Duration::from_secs(6),
        "{:?}: {stderr}",
        t0.elapsed()
    );
    let rows = read_path(&out).expect("rows");
    assert!(
        rows.len() == 1 && rows[0].status == RailStatus::Ok,
        "{rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_the_pods_start_deletes_them() {
    // The node agents take a minute to pull this image: the pods stay ContainerCreating.
    let f = Fake::new(1);
    let (c, ns, kc) = setup("int-start", &[], None, &f).await;
    let out = f.file("int.csv");
    let mut child = process::start(&args(
        "run",
        &kc,
        &f,
        &out,
        18761,
        &[
            "--mode",
            "hostnetwork",
            "--image",
            "registry.invalid/slow:1",
        ],
    ));
    let t0 = Instant::now();
    while c.pods_left(&ns).await.len() < 2 {
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!("pods never created: {}", text(&o.stderr));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (code, o) = process::interrupt_async(child, Duration::from_secs(30)).await;
    let stderr = text(&o.stderr);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted while the pods were starting")
            && stderr.contains("deleted pods"),
        "{stderr}"
    );
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
}

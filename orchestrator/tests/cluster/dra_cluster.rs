//! `railsweep run --mode dra` against the real control plane (`scripts/cluster`): the real
//! resourceclaim controller makes each pod's ResourceClaim from railsweep's template, the real
//! scheduler's DRA plugin allocates the rails from the ResourceSlices the node agents publish
//! as DRANET does (driver dra.net), and the agent of the node moves exactly the allocated
//! rails' interfaces into the pod's network namespace and back when the pod goes. What does
//! not fit comes back in the scheduler's words, with railsweep's reason worked out from the
//! node's devices. The nodes are the ones scripts/test starts: dra-a and dra-b publish 2
//! rails each; b48-a and b48-b publish 8 rails and 8 GPUs, 2 of each under each of 4 PCIe
//! roots (BM.GPU.B4.8). Tests that hold rails use their own nodes, so none waits for another.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::support::fake::Fake;
use crate::support::kube::{railsweep, refused, sweep_args};
use crate::support::process::text;
use crate::support::testcluster::TestCluster;
use orchestrator::runner::{KubeRunner, Runner};
use results::read_path;

/// A namespace, DRANET's and NVIDIA's DeviceClasses, and a kubeconfig with what
/// deploy/rbac.yaml grants (its ClusterRole too: ResourceSlices and DeviceClasses).
async fn setup(prefix: &str, f: &Fake) -> (TestCluster, String, PathBuf) {
    let c = TestCluster::get().await;
    c.device_class("dranet", "dra.net").await;
    c.device_class("gpu.nvidia.com", "gpu.nvidia.com").await;
    let ns = c.namespace(prefix, &[]).await;
    let kc = c
        .railsweep_kubeconfig_with_nodes(&ns, &f.file("kubeconfig"))
        .await;
    (c, ns, kc)
}

fn args(cmd: &str, kc: &Path, f: &Fake, out: &Path, nodes: &str, extra: &[&str]) -> Vec<String> {
    let extra: Vec<&str> = ["--no-gpu-toleration"]
        .iter()
        .chain(extra)
        .copied()
        .collect();
    sweep_args(cmd, kc, f, out, nodes, &extra)
}

/// The interfaces of this machine's own network namespace whose names start with `prefix`.
fn host_links(prefix: &str) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip runs");
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with(prefix) && !n.ends_with('p'))
        .collect();
    names.sort();
    names
}

/// The rail interfaces (`dra-…`) in pod `pod`'s network namespace, through exec.
async fn pod_rails(c: &TestCluster, ns: &str, pod: &str) -> Vec<String> {
    let runner = KubeRunner::from_client(c.client.clone(), ns, "test", None);
    let ip = runner
        .exec(pod, &["ip".to_string(), "-o".into(), "link".into()], None)
        .await
        .expect("execs");
    let mut names: Vec<String> = String::from_utf8_lossy(&ip.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .filter(|n| n.starts_with("dra-"))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_pods_get_exactly_their_allocated_rails_and_compare_takes_the_mode() {
    let f = Fake::new(2);
    let (c, ns, kc) = setup("dra-run", &f).await;
    assert_eq!(host_links("dra-dra-a-"), ["dra-dra-a-0", "dra-dra-a-1"]);

    // One rail each: the pod gets the allocated one, the other stays on the node.
    let out = f.file("one.csv");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        "dra-a,dra-b",
        &[
            "--mode",
            "dra",
            "--dra-rails",
            "1",
            "--run-id",
            "d1",
            "--keep-pods",
        ],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("pod railsweep-d1-dra-client on dra-a was allocated 1 rail(s):"),
        "{stderr}"
    );
    let client_rails = pod_rails(&c, &ns, "railsweep-d1-dra-client").await;
    assert_eq!(
        client_rails.len(),
        1,
        "exactly the allocated rail: {client_rails:?}"
    );
    assert!(
        stderr.contains(&format!("rails {} ({})", client_rails[0], client_rails[0])),
        "the rail railsweep reports is the one in the pod: {stderr}"
    );
    assert_eq!(
        host_links("dra-dra-a-").len(),
        1,
        "the allocated rail left the node's namespace"
    );
    assert_eq!(pod_rails(&c, &ns, "railsweep-d1-dra-server").await.len(), 1);
    let rows = read_path(&out).expect("rows");
    assert!(
        rows.iter().all(|r| r.network_mode.as_str() == "dra"),
        "{rows:?}"
    );
    assert_eq!(
        rows[0].client_pod.as_deref(),
        Some("railsweep-d1-dra-client")
    );
    assert!(
        rows.iter()
            .all(|r| r.client_gpu.is_none() && r.server_gpu.is_none()),
        "no GPU without --gpu-align: {rows:?}"
    );
    // Deleting the pods gives the rails back to the nodes.
    c.delete_namespace(&ns).await;
    let back = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while host_links("dra-dra-a-").len() < 2 || host_links("dra-dra-b-").len() < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    })
    .await;
    assert!(back.is_ok(), "rails not back: {:?}", host_links("dra-"));

    // Every rail of the node (no --dra-rails), and compare: hostnetwork and dra in one file.
    let (c, ns, kc) = setup("dra-cmp", &f).await;
    let out = f.file("cmp.csv");
    let r = railsweep(&args(
        "compare",
        &kc,
        &f,
        &out,
        "dra-a,dra-b",
        &["--modes", "hostnetwork,dra", "--port", "18741"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("pod railsweep-")
            && stderr.contains("-dra-client on dra-a was allocated 2 rail(s):"),
        "allocation mode All: both rails: {stderr}"
    );
    let rows = read_path(&out).expect("rows");
    let modes: Vec<&str> = rows.iter().map(|r| r.network_mode.as_str()).collect();
    assert_eq!(
        modes,
        ["hostnetwork", "hostnetwork", "dra", "dra"],
        "{rows:?}"
    );
    let md = std::fs::read_to_string(out.with_extension("md")).expect("markdown");
    assert!(md.contains("| rail | hostnetwork | dra |"), "{md}");
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
    c.delete_namespace(&ns).await;
}

/// A node's devices as its ResourceSlices publish them: (driver, device) -> (ifName, pcieRoot).
async fn published(
    c: &TestCluster,
    node: &str,
) -> BTreeMap<(String, String), (Option<String>, Option<String>)> {
    use k8s_openapi::api::resource::v1::ResourceSlice;
    let slices: kube::Api<ResourceSlice> = kube::Api::all(c.client.clone());
    let lp = kube::api::ListParams::default().fields(&format!("spec.nodeName={node}"));
    let mut out = BTreeMap::new();
    for s in slices.list(&lp).await.expect("lists ResourceSlices").items {
        for d in s.spec.devices.unwrap_or_default() {
            let attr = |name: &str| {
                d.attributes
                    .as_ref()
                    .and_then(|a| a.get(name))
                    .and_then(|v| v.string.clone())
            };
            out.insert(
                (s.spec.driver.clone(), d.name.clone()),
                (attr("ifName"), attr("resource.kubernetes.io/pcieRoot")),
            );
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_align_puts_every_rail_under_one_of_its_gpus_roots() {
    let f = Fake::new(2);
    // The fake reports the rails the node agent moved into each pod, by their interfaces.
    f.rails_from_links("dra-");
    let (c, ns, kc) = setup("dra-align", &f).await;
    let out = f.file("align.csv");
    let json = f.file("align.json");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        "b48-a,b48-b",
        &[
            "--mode",
            "dra",
            "--gpu-align",
            "--dra-rails",
            "4",
            "--run-id",
            "g",
            "--out_json_file",
            &json.display().to_string(),
        ],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    for pod in ["client on b48-a", "server on b48-b"] {
        assert!(
            stderr.contains(&format!(
                "pod railsweep-g-dra-{pod} was allocated 4 rail(s):"
            )),
            "{stderr}"
        );
    }
    // railsweep:   rail-0 dra-b48-a-0 (dra-b48-a-0) pcieRoot pci0000:0c, GPU gpu-1 pcieRoot pci0000:0c
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("railsweep:   rail-"))
        .collect();
    assert_eq!(lines.len(), 8, "4 rails in each pod: {stderr}");
    let mut gpus = std::collections::BTreeSet::new();
    for l in &lines {
        let roots: Vec<&str> = l
            .split("pcieRoot ")
            .skip(1)
            .map(|r| r.split([',', ' ']).next().unwrap_or(""))
            .collect();
        assert_eq!(roots.len(), 2, "a NIC root and a GPU root: {l}");
        assert_eq!(roots[0], roots[1], "the rail's GPU is under its root: {l}");
        let gpu = l.split("GPU ").nth(1).and_then(|g| g.split(' ').next());
        gpus.insert((l.contains("dra-b48-a-"), gpu.unwrap_or("").to_string()));
    }
    assert_eq!(gpus.len(), 8, "a GPU of its own for every rail: {lines:?}");

    // The rows say which GPU sits with each rail, on both sides, in the CSV and the JSON; each
    // GPU is under the PCIe root of its rail's NIC, as the nodes' ResourceSlices publish them.
    let rows = read_path(&out).expect("csv rows");
    assert_eq!(read_path(&json).expect("json rows"), rows);
    assert_eq!(rows.len(), 4, "{rows:?}");
    for (node, side) in [("b48-a", "client"), ("b48-b", "server")] {
        let devices = published(&c, node).await;
        let mut seen = std::collections::BTreeSet::new();
        for row in &rows {
            let (n, iface, gpu, root) = if side == "client" {
                (
                    &row.client_node,
                    &row.client_interface,
                    &row.client_gpu,
                    &row.client_gpu_pcie_root,
                )
            } else {
                (
                    &row.server_node,
                    &row.server_interface,
                    &row.server_gpu,
                    &row.server_gpu_pcie_root,
                )
            };
            assert_eq!(n, node);
            assert!(iface.starts_with(&format!("dra-{node}-")), "{row:?}");
            let gpu = gpu
                .as_deref()
                .unwrap_or_else(|| panic!("no {side} GPU: {row:?}"));
            let nic_root = devices
                .iter()
                .find(|((driver, _), (if_name, _))| {
                    driver == "dra.net" && if_name.as_deref() == Some(iface.as_str())
                })
                .and_then(|(_, (_, root))| root.clone())
                .unwrap_or_else(|| panic!("node {node} publishes no NIC {iface}"));
            let gpu_root = devices
                .get(&("gpu.nvidia.com".to_string(), gpu.to_string()))
                .and_then(|(_, root)| root.clone())
                .unwrap_or_else(|| panic!("node {node} publishes no GPU {gpu}"));
            assert_eq!(
                (root.as_deref(), gpu_root.as_str()),
                (Some(nic_root.as_str()), nic_root.as_str()),
                "rail {} {side} {iface}: its GPU {gpu} is under its NIC's root",
                row.rail
            );
            assert!(
                seen.insert(gpu.to_string()),
                "{gpu} twice on {node}: {rows:?}"
            );
        }
    }
    let stdout = text(&r.stdout);
    assert!(
        stdout.contains("client (iface dev GPU)")
            && stdout.contains(&format!(
                "{} mlx5_0 {}",
                rows[0].client_interface,
                rows[0].client_gpu.as_deref().unwrap_or("?")
            )),
        "the table shows each rail's GPU: {stdout}"
    );
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
    c.delete_namespace(&ns).await;
}

/// A `dra` run that must be refused: exit 2 at once, the scheduler's words and railsweep's
/// reason, no pod and no template left.
async fn must_not_fit(prefix: &str, nodes: &str, extra: &[&str], expect: &[&str]) {
    let f = Fake::new(1);
    let (c, ns, kc) = setup(prefix, &f).await;
    let out = f.file("x.csv");
    let mut a = vec!["--mode", "dra"];
    a.extend_from_slice(extra);
    refused(
        &c,
        &ns,
        &args("run", &kc, &f, &out, nodes, &a),
        &out,
        expect,
    )
    .await;
    let templates: kube::Api<k8s_openapi::api::resource::v1::ResourceClaimTemplate> =
        kube::Api::namespaced(c.client.clone(), &ns);
    let left = templates.list(&Default::default()).await.expect("lists");
    assert!(left.items.is_empty(), "templates left: {:?}", left.items);
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_rails_than_the_node_publishes_is_explained() {
    must_not_fit(
        "dra-many",
        "dra-a,dra-b",
        &["--dra-rails", "3"],
        &[
            "cannot allocate all claims",
            "publishes 2 that match",
            "the pod asks for 3 rails",
            "--dra-rails",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_that_matches_nothing_is_explained() {
    must_not_fit(
        "dra-sel",
        "dra-a,dra-b",
        &[
            "--device-selector",
            "device.attributes[\"dra.net\"].ifName == \"ib0\"",
        ],
        &[
            "cannot allocate all claims",
            "'s 2 devices of DeviceClass dranet",
            "--device-selector",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_device_class_and_an_impossible_alignment_are_explained() {
    must_not_fit(
        "dra-class",
        "dra-a,dra-b",
        &["--device-class", "mellanox-rdma"],
        &[
            "device class mellanox-rdma does not exist",
            "--device-class",
        ],
    )
    .await;
    // dra-a and dra-b publish no GPU: no rail can have one under its root.
    must_not_fit(
        "dra-align-no",
        "dra-a,dra-b",
        &["--gpu-align", "--dra-rails", "1"],
        &[
            "cannot allocate all claims",
            "the alignment constraint cannot be met: on node dra-",
            "only 0 rail(s) have a GPU of class gpu.nvidia.com",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_prints_the_template_before_the_pods() {
    let f = Fake::new(1);
    let r = railsweep(&[
        "run".to_string(),
        "--mode".into(),
        "dra".into(),
        "--nodes".into(),
        "a,b".into(),
        "--dry-run".into(),
        "--gpu-align".into(),
        "--dra-rails".into(),
        "2".into(),
        "--run-id".into(),
        "dr".into(),
        "--rdmabw".into(),
        f.path().display().to_string(),
    ])
    .await;
    let stdout = text(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let kinds: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("kind: "))
        .collect();
    assert_eq!(kinds, ["ResourceClaimTemplate", "Pod", "Pod"], "{stdout}");
    assert!(
        stdout.contains("resourceClaimTemplateName: railsweep-dr-dra-rails"),
        "{stdout}"
    );
    assert!(
        stdout.contains("matchAttribute: resource.kubernetes.io/pcieRoot"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("hostNetwork") && !stdout.contains("privileged: true"),
        "{stdout}"
    );
}

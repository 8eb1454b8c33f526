//! The pod pair of each network mode: how a pod gets its RDMA rails, as typed Kubernetes
//! objects (`k8s_openapi::api::core::v1::Pod`), with the settings the field reports show each
//! mode needs.
//!
//! | mode | what the pods get |
//! | --- | --- |
//! | `hostnetwork` | `hostNetwork: true`, `dnsPolicy: ClusterFirstWithHostNet`, privileged (every device of the node, so every uverbs device) |
//! | `hostnetwork-crio` | `hostNetwork: true` without privileged: a CRI-O runtime class that accepts the `io.kubernetes.cri-o.Devices` annotation, the annotation listing the node's uverbs devices and `rdma_cm` one by one, and IPC_LOCK (every other capability dropped, as in the modes below) |
//! | `ipvlan` | the Multus networks annotation (one IPvlan network per rail) and the RDMA device resource of the rails' PFs |
//! | `sriov` | the Multus networks annotation (SR-IOV networks) and the VF resource(s) |
//! | `dra` | a ResourceClaimTemplate: the scheduler allocates the rails' NICs (a DRA network driver's devices, as DRANET publishes them), with `--gpu-align` a GPU under each rail's PCIe root |
//!
//! The client pod goes to the first node and the server pod to the second (pinned by
//! `kubernetes.io/hostname`). Both run `sleep infinity`: railsweep runs rdmabw in them through
//! exec. Every pod carries the labels of [`selector`], so railsweep (or a person) can find and
//! delete what a run created.
//!
//! * [`pattern`]: rail patterns, resources, tolerations;
//! * [`security`]: the Pod Security level a pod needs;
//! * [`yaml`]: the `--dry-run -o yaml` printer;
//! * [`explain`]: why a pod does not start, in words a user can act on;
//! * [`lifecycle`]: create, wait for and delete the pods;
//! * [`guard`]: the one guard that deletes them at the end, on every path;
//! * [`cli`]: the command-line options that fill [`PodOptions`].

pub mod cli;
pub mod dra;
pub mod explain;
pub mod guard;
pub mod lifecycle;
pub mod pattern;
pub mod security;
pub mod yaml;

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, LocalObjectReference, Pod, PodResourceClaim, PodSpec,
    ResourceClaim, ResourceRequirements, SecurityContext, Toleration,
};
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use pattern::{ResourceSpec, TolerationSpec};
pub use security::Level;

/// How the pods get their RDMA rails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Mode {
    /// The node's network (`hostNetwork: true`), privileged.
    #[value(name = "hostnetwork")]
    HostNetwork,
    /// The node's network without privileged: CRI-O adds the RDMA devices (runtime class and
    /// device annotation), plus IPC_LOCK.
    #[value(name = "hostnetwork-crio")]
    HostNetworkCrio,
    /// An IPvlan interface per rail (Multus) and the rails' RDMA devices (device plugin).
    #[value(name = "ipvlan")]
    Ipvlan,
    /// An SR-IOV VF per rail (Multus and the SR-IOV device plugin).
    #[value(name = "sriov")]
    Sriov,
    /// The rails' NICs allocated by the scheduler through a ResourceClaimTemplate (Dynamic
    /// Resource Allocation; a DRA network driver such as DRANET moves them into the pod).
    #[value(name = "dra")]
    Dra,
}

impl Mode {
    /// Every mode, in comparison order.
    pub const ALL: [Mode; 5] = [
        Mode::HostNetwork,
        Mode::HostNetworkCrio,
        Mode::Ipvlan,
        Mode::Sriov,
        Mode::Dra,
    ];

    /// Every mode's name, for messages: `hostnetwork, hostnetwork-crio, ipvlan, sriov or dra`.
    pub fn names() -> String {
        let names: Vec<&str> = Mode::ALL.iter().map(|m| m.as_str()).collect();
        match names.split_last() {
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    /// The name on the command line, in pod names and in result rows.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::HostNetwork => "hostnetwork",
            Mode::HostNetworkCrio => "hostnetwork-crio",
            Mode::Ipvlan => "ipvlan",
            Mode::Sriov => "sriov",
            Mode::Dra => "dra",
        }
    }

    /// The network mode recorded in result rows.
    pub fn network_mode(self) -> results::NetworkMode {
        match self {
            Mode::HostNetwork => results::NetworkMode::HostNetwork,
            Mode::HostNetworkCrio => results::NetworkMode::HostNetworkCrio,
            Mode::Ipvlan => results::NetworkMode::Ipvlan,
            Mode::Sriov => results::NetworkMode::Sriov,
            Mode::Dra => results::NetworkMode::Other("dra".into()),
        }
    }

    /// Whether the pods share the node's network namespace.
    pub fn host_network(self) -> bool {
        matches!(self, Mode::HostNetwork | Mode::HostNetworkCrio)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = ModeError;

    fn from_str(s: &str) -> Result<Mode, ModeError> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ModeError::UnknownMode(s.to_string()))
    }
}

/// What can be wrong with the options of a mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// A pattern, list, resource or toleration that does not parse.
    #[error("`{pattern}`: {why}")]
    Pattern {
        /// The text as given.
        pattern: String,
        /// What is wrong with it.
        why: String,
    },
    /// A mode without an option it cannot do without.
    #[error("mode {mode} needs {option}: {hint}")]
    Missing {
        /// The mode.
        mode: Mode,
        /// The option, as on the command line.
        option: &'static str,
        /// What to give, with an example.
        hint: &'static str,
    },
    /// A mode name that is none of [`Mode::ALL`].
    #[error("unknown mode `{0}` (modes: {names})", names = Mode::names())]
    UnknownMode(String),
    /// A name that cannot become part of a pod name or label.
    #[error("`{0}` cannot be part of a pod name (lowercase letters, digits and `-`, at most 28)")]
    BadRunId(String),
}

/// Which end of the test a pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Runs `rdmabw server --daemon`; placed on the second node.
    Server,
    /// Runs `rdmabw client` per rail; placed on the first node.
    Client,
}

impl Role {
    /// `server` or `client`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
        }
    }
}

/// The secondary networks and device resources of an attachment mode (ipvlan, sriov).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attachment {
    /// NetworkAttachmentDefinition names (`NAME` or `NAMESPACE/NAME`), in rail order.
    pub networks: Vec<String>,
    /// The device resources that give the pod its RDMA devices.
    pub resources: Vec<ResourceSpec>,
}

/// Everything that shapes the pods, shared by every mode; the mode picks what applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodOptions {
    /// Namespace the pods are created in.
    pub namespace: String,
    /// Container image: one with rdmabw, or (with `--inject`) any with libibverbs, `sh`,
    /// `head` and `sleep`.
    pub image: String,
    /// The container's `imagePullPolicy`.
    pub pull_policy: PullPolicy,
    /// `imagePullSecrets`: Secrets in the pods' namespace with a private registry's credentials.
    pub pull_secrets: Vec<String>,
    /// Taints the pods tolerate.
    pub tolerations: Vec<TolerationSpec>,
    /// Extra resources for both pods (GPUs for GPUDirect runs).
    pub resources: Vec<ResourceSpec>,
    /// Add the IPC_LOCK capability (to lock registered memory) where the mode is not
    /// privileged anyway.
    pub ipc_lock: bool,
    /// The TCP port of the server daemon (declared on the server pod; on the host network
    /// as a host port, so that the scheduler keeps two runs apart).
    pub port: u16,
    /// `hostnetwork-crio`: the runtime class whose handler accepts the device annotation.
    pub runtime_class: String,
    /// `hostnetwork-crio`: the numbers of the node's `/dev/infiniband/uverbsN` devices.
    pub uverbs: Vec<u32>,
    /// `ipvlan`: networks and RDMA device resource.
    pub ipvlan: Attachment,
    /// `sriov`: networks and VF resource(s).
    pub sriov: Attachment,
    /// `dra`: the claim of the rails.
    pub dra: dra::DraOptions,
}

impl PodOptions {
    /// For GPUDirect runs: unless a `nvidia.com/gpu` resource is already asked for, ask for
    /// `count` GPUs (all of a node's, so that every rail's nearest GPU is in the pod). Returns
    /// whether it was added.
    pub fn ensure_gpus(&mut self, count: u32) -> bool {
        if self.resources.iter().any(|r| r.name == GPU_RESOURCE) {
            return false;
        }
        self.resources.push(ResourceSpec {
            name: GPU_RESOURCE.into(),
            quantity: count.to_string(),
        });
        true
    }
}

/// The NVIDIA device plugin's GPU resource.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The image of the pods railsweep creates when `--image` is not given: Docker Hub's busybox,
/// pinned by the digest of its multi-platform index (CRI resolves a `NAME:TAG@DIGEST` reference by
/// the digest alone; the tag is for readers). It has `sh`, `head` and `sleep` and no
/// rdma-core: railsweep copies its own rdmabw-portable into it ([`default_rdmabw`]). The digest was
/// read from public manifests that pin this tag; no test here pulled it (no registry is
/// reachable from the lab, docs/deploy.md).
pub const DEFAULT_IMAGE: &str = "docker.io/library/busybox:1.37.0@sha256:bdf57e528e45e4433820e045b29b4597825a1c9e38353532d90a01445013f82e";

/// The image built from `deploy/Containerfile`, rdmabw and railsweep inside (published nowhere:
/// import it into the nodes' runtime, or push it and name it with `--image`). The generated
/// `deploy/examples`, which run rdmabw by `kubectl exec`, name it and never pull it.
pub const PROJECT_IMAGE: &str = concat!("railbench/rdmabw:", env!("CARGO_PKG_VERSION"));

/// The environment variable that puts another image in the default's place (a mirror's copy of
/// it, or any image with `sh`, `head` and `sleep`): used as the default is, rdmabw-portable
/// copied in. `--image` is for images that have rdmabw.
pub const IMAGE_ENV: &str = "RAILSWEEP_IMAGE";

/// The image used when `--image` is not given: `$RAILSWEEP_IMAGE` if set, else [`DEFAULT_IMAGE`].
pub fn default_image() -> String {
    std::env::var(IMAGE_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_string())
}

/// The rdmabw railsweep copies into the default image: `rdmabw-portable` (scripts/build-portable:
/// rdmabw with its own loader, libc, libibverbs and providers) beside railsweep, or
/// `target/inject/rdmabw-portable` beside `target/release/railsweep`.
pub fn default_rdmabw() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        Some(dir.join("rdmabw-portable")),
        dir.parent()
            .map(|t| t.join("inject").join("rdmabw-portable")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_file())
}

/// A container's `imagePullPolicy` (`--image-pull-policy`, kubectl run's flag): spelled as in a
/// pod spec and for kubectl (`IfNotPresent`), or in lower case (`if-not-present`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PullPolicy {
    /// Pull at every pod start.
    #[value(name = "Always", alias = "always")]
    Always,
    /// Pull when the node does not have the image.
    #[value(name = "IfNotPresent", alias = "if-not-present")]
    IfNotPresent,
    /// Never pull: the image must be on the node already.
    #[value(name = "Never", alias = "never")]
    Never,
}

impl PullPolicy {
    /// The value in a pod spec.
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// The runtime class of the field report's CRI-O fix.
pub const DEFAULT_RUNTIME_CLASS: &str = "runc-nohostdev";

/// The CRI-O annotation that adds host devices to a container.
pub const CRIO_DEVICES_ANNOTATION: &str = "io.kubernetes.cri-o.Devices";

/// The Multus annotation that attaches secondary networks.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";

/// The container's name in every pod.
pub const CONTAINER: &str = "rdmabw";

/// Label keys on every pod railsweep creates.
pub mod labels {
    /// Always `railsweep`.
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    /// Always `rdmabw`.
    pub const NAME: &str = "app.kubernetes.io/name";
    /// The run: one value per `railsweep run` or `compare` invocation.
    pub const INSTANCE: &str = "app.kubernetes.io/instance";
    /// `server` or `client`.
    pub const COMPONENT: &str = "app.kubernetes.io/component";
    /// The mode.
    pub const MODE: &str = "railbench/mode";
}

impl Default for PodOptions {
    fn default() -> Self {
        PodOptions {
            namespace: "default".into(),
            image: DEFAULT_IMAGE.into(),
            pull_policy: PullPolicy::IfNotPresent,
            pull_secrets: vec![],
            tolerations: vec![TolerationSpec::gpu()],
            resources: vec![],
            ipc_lock: true,
            port: 18515,
            runtime_class: DEFAULT_RUNTIME_CLASS.into(),
            uverbs: vec![],
            ipvlan: Attachment::default(),
            sriov: Attachment::default(),
            dra: dra::DraOptions::default(),
        }
    }
}

/// Where the pair goes and what run it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The run id in pod names and the instance label: lowercase letters, digits, `-`.
    pub run: String,
    /// Node of the client pod (`kubernetes.io/hostname`); `None` lets the scheduler choose.
    pub client_node: Option<String>,
    /// Node of the server pod.
    pub server_node: Option<String>,
}

/// The two pods of one mode.
#[derive(Debug, Clone, PartialEq)]
pub struct PodPair {
    /// The mode they were built for.
    pub mode: Mode,
    /// The server pod (on the second node).
    pub server: Pod,
    /// The client pod (on the first node).
    pub client: Pod,
    /// The ResourceClaimTemplates the pods name (mode `dra`), created before them.
    pub templates: Vec<ResourceClaimTemplate>,
}

impl PodPair {
    /// Server first: it is created first and deleted last.
    pub fn pods(&self) -> [(Role, &Pod); 2] {
        [(Role::Server, &self.server), (Role::Client, &self.client)]
    }
}

/// A run id fit for pod names: a `railsweep run` id such as `20261129T101500Z`, lowercased.
pub fn run_label(run_id: &str) -> Result<String, ModeError> {
    let s = run_id.to_ascii_lowercase();
    let ok = !s.is_empty()
        && s.len() <= 28
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s)
    } else {
        Err(ModeError::BadRunId(run_id.to_string()))
    }
}

/// `railsweep-RUN-MODE-ROLE` (at most 63 characters for a 28-character run id).
pub fn pod_name(run: &str, mode: Mode, role: Role) -> String {
    format!("railsweep-{run}-{mode}-{}", role.as_str())
}

/// The label selector of every pod of a run (`None`: of every run).
pub fn selector(run: Option<&str>) -> String {
    match run {
        Some(r) => format!("{}=railsweep,{}={r}", labels::MANAGED_BY, labels::INSTANCE),
        None => format!("{}=railsweep", labels::MANAGED_BY),
    }
}

/// Check that `mode` has what it needs in `opts`.
pub fn check(mode: Mode, opts: &PodOptions) -> Result<(), ModeError> {
    match mode {
        Mode::HostNetwork => Ok(()),
        Mode::HostNetworkCrio if opts.uverbs.is_empty() => Err(ModeError::Missing {
            mode,
            option: "--uverbs",
            hint: "the numbers of the node's /dev/infiniband/uverbsN devices, as `ls /dev/infiniband` on the \
                   node lists them (e.g. --uverbs 0-17); CRI-O's allowed_devices must list the same devices",
        }),
        Mode::HostNetworkCrio => Ok(()),
        Mode::Dra if opts.dra.gpu_align && opts.dra.rails.is_none() => Err(ModeError::Missing {
            mode,
            option: "--dra-rails",
            hint: "how many rails (NIC and GPU pairs) each pod asks for with --gpu-align (e.g. --dra-rails 4)",
        }),
        Mode::Dra if opts.dra.rails == Some(0) => Err(ModeError::Pattern {
            pattern: "--dra-rails 0".into(),
            why: "a pod needs at least one rail".into(),
        }),
        Mode::Dra => Ok(()),
        Mode::Ipvlan | Mode::Sriov => {
            let a = attachment(mode, opts);
            if a.networks.is_empty() {
                return Err(ModeError::Missing {
                    mode,
                    option: "--networks",
                    hint: if mode == Mode::Ipvlan {
                        "the NetworkAttachmentDefinitions of the rails, in rail order (e.g. --networks \
                         'ipvlan:rdma-ipvlan-{0..15}')"
                    } else {
                        "the SR-IOV networks of the rails, in rail order (e.g. --networks 'sriov:sriov-rail-{0..15}')"
                    },
                });
            }
            if a.resources.is_empty() {
                return Err(ModeError::Missing {
                    mode,
                    option: "--rdma-resource",
                    hint: if mode == Mode::Ipvlan {
                        "the device plugin resource of the rails' RDMA devices (e.g. --rdma-resource \
                         'ipvlan:nvidia.com/hostdev=16')"
                    } else {
                        "the VF resource(s) (e.g. --rdma-resource 'sriov:nvidia.com/sriov_rdma_rail{0..15}=1')"
                    },
                });
            }
            Ok(())
        }
    }
}

fn attachment(mode: Mode, opts: &PodOptions) -> &Attachment {
    if mode == Mode::Sriov {
        &opts.sriov
    } else {
        &opts.ipvlan
    }
}

/// Build the server and client pods of `mode`.
pub fn pod_pair(mode: Mode, opts: &PodOptions, place: &Placement) -> Result<PodPair, ModeError> {
    check(mode, opts)?;
    let run = run_label(&place.run)?;
    Ok(PodPair {
        mode,
        server: build_pod(mode, Role::Server, opts, &run, place.server_node.as_deref()),
        client: build_pod(mode, Role::Client, opts, &run, place.client_node.as_deref()),
        templates: templates(mode, opts, &run),
    })
}

/// The ResourceClaimTemplates of `mode`'s pods for run `run` (a run label): one for `dra`,
/// labelled like the pods but for their role, none for the other modes.
pub fn templates(mode: Mode, opts: &PodOptions, run: &str) -> Vec<ResourceClaimTemplate> {
    if mode != Mode::Dra {
        return vec![];
    }
    let labels: BTreeMap<String, String> = [
        (labels::NAME, "rdmabw"),
        (labels::MANAGED_BY, "railsweep"),
        (labels::INSTANCE, run),
        (labels::MODE, mode.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    vec![dra::claim_template(&opts.dra, &opts.namespace, run, labels)]
}

/// The component label of a fleet pod (it serves in some pairs and is the client in others).
pub const FLEET_COMPONENT: &str = "fleet";

/// The name of the fleet pod on `node`: `railsweep-RUN-MODE-NODE` when the node name makes a
/// valid, short enough pod name (lowercase letters, digits, `-`, `.`; at most 63 characters
/// in all, so it is also a valid hostname), else `railsweep-RUN-MODE-I` (I: its place, from 0).
fn fleet_pod_name(run: &str, mode: Mode, node: &str, index: usize) -> String {
    let ok = !node.is_empty()
        && node
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && node.starts_with(|c: char| c.is_ascii_alphanumeric())
        && node.ends_with(|c: char| c.is_ascii_alphanumeric());
    let by_node = format!("railsweep-{run}-{mode}-{node}");
    if ok && by_node.len() <= 63 {
        by_node
    } else {
        format!("railsweep-{run}-{mode}-{index}")
    }
}

/// The pods of `railsweep fleet --nodes`: one per node, in node order, each built as the
/// server pod of `mode` is (so it declares the daemon's port: on the host network a host
/// port, which keeps two fleets off the same node and port) and pinned to its node, with the
/// component label [`FLEET_COMPONENT`].
pub fn fleet_pods(
    mode: Mode,
    opts: &PodOptions,
    run: &str,
    nodes: &[String],
) -> Result<Vec<Pod>, ModeError> {
    check(mode, opts)?;
    let run = run_label(run)?;
    let mut names: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| fleet_pod_name(&run, mode, n, i))
        .collect();
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    if unique.len() != names.len() {
        names = (0..nodes.len())
            .map(|i| format!("railsweep-{run}-{mode}-{i}"))
            .collect();
    }
    Ok(nodes
        .iter()
        .zip(names)
        .map(|(node, name)| {
            let mut pod = build_pod(mode, Role::Server, opts, &run, Some(node));
            pod.metadata.name = Some(name);
            if let Some(l) = pod.metadata.labels.as_mut() {
                l.insert(labels::COMPONENT.to_string(), FLEET_COMPONENT.to_string());
            }
            pod
        })
        .collect())
}

/// The device paths of the CRI-O annotation: each uverbs device, then `rdma_cm`. The
/// annotation takes device nodes only (a directory is refused: "not a device node").
pub fn crio_devices(uverbs: &[u32]) -> String {
    uverbs
        .iter()
        .map(|n| format!("/dev/infiniband/uverbs{n}"))
        .chain(std::iter::once("/dev/infiniband/rdma_cm".to_string()))
        .collect::<Vec<_>>()
        .join(",")
}

fn build_pod(mode: Mode, role: Role, opts: &PodOptions, run: &str, node: Option<&str>) -> Pod {
    let labels: BTreeMap<String, String> = [
        (labels::NAME, "rdmabw"),
        (labels::MANAGED_BY, "railsweep"),
        (labels::INSTANCE, run),
        (labels::COMPONENT, role.as_str()),
        (labels::MODE, mode.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "kubectl.kubernetes.io/default-container".to_string(),
        CONTAINER.to_string(),
    );

    let mut security = SecurityContext::default();
    let mut limits: BTreeMap<String, Quantity> = BTreeMap::new();
    let ipc_lock = opts.ipc_lock;
    let mut spec = PodSpec {
        restart_policy: Some("Never".into()),
        // `sleep` as PID 1 ignores SIGTERM: do not wait 30 s for it on delete.
        termination_grace_period_seconds: Some(2),
        automount_service_account_token: Some(false),
        image_pull_secrets: (!opts.pull_secrets.is_empty()).then(|| {
            opts.pull_secrets
                .iter()
                .map(|name| LocalObjectReference { name: name.clone() })
                .collect()
        }),
        ..PodSpec::default()
    };
    match mode {
        Mode::HostNetwork => {
            spec.host_network = Some(true);
            spec.dns_policy = Some("ClusterFirstWithHostNet".into());
            // Privileged brings every device of the node, so /dev/infiniband, and every
            // capability, IPC_LOCK included.
            security.privileged = Some(true);
        }
        Mode::HostNetworkCrio => {
            spec.host_network = Some(true);
            spec.dns_policy = Some("ClusterFirstWithHostNet".into());
            spec.runtime_class_name = Some(opts.runtime_class.clone());
            annotations.insert(
                CRIO_DEVICES_ANNOTATION.to_string(),
                crio_devices(&opts.uverbs),
            );
        }
        Mode::Ipvlan | Mode::Sriov => {
            let a = attachment(mode, opts);
            annotations.insert(NETWORKS_ANNOTATION.to_string(), a.networks.join(","));
            for r in &a.resources {
                limits.insert(r.name.clone(), Quantity(r.quantity.clone()));
            }
        }
        Mode::Dra => {
            spec.resource_claims = Some(vec![PodResourceClaim {
                name: dra::CLAIM.into(),
                resource_claim_template_name: Some(dra::template_name(run)),
                ..PodResourceClaim::default()
            }]);
        }
    }
    let claims = (mode == Mode::Dra).then(|| {
        vec![ResourceClaim {
            name: dra::CLAIM.into(),
            ..ResourceClaim::default()
        }]
    });
    if security.privileged != Some(true) {
        // Every mode but hostnetwork drops every capability the runtime would give and adds
        // back only IPC_LOCK (registered memory is locked memory; --no-ipc-lock leaves it out):
        // rdmabw binds an unprivileged port, opens the RDMA devices the pod was given, reads
        // sysfs and RDMA netlink, none of which needs a capability (docs/modes.md,
        // "Capabilities"). A privileged container has them all and cannot drop them.
        security.allow_privilege_escalation = Some(false);
        security.capabilities = Some(Capabilities {
            add: ipc_lock.then(|| vec!["IPC_LOCK".into()]),
            drop: Some(vec!["ALL".into()]),
        });
    }
    for r in &opts.resources {
        // With --gpu-align the claim brings the GPUs, each under its rail's PCIe root.
        if mode == Mode::Dra && opts.dra.gpu_align && r.name == GPU_RESOURCE {
            continue;
        }
        limits.insert(r.name.clone(), Quantity(r.quantity.clone()));
    }
    if let Some(n) = node {
        spec.node_selector = Some(BTreeMap::from([(
            "kubernetes.io/hostname".to_string(),
            n.to_string(),
        )]));
    }
    if !opts.tolerations.is_empty() {
        spec.tolerations = Some(
            opts.tolerations
                .iter()
                .map(|t| Toleration {
                    key: Some(t.key.clone()),
                    operator: Some(if t.value.is_some() { "Equal" } else { "Exists" }.into()),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                    ..Toleration::default()
                })
                .collect(),
        );
    }
    let ports = (role == Role::Server).then(|| {
        vec![ContainerPort {
            name: Some("rdmabw".into()),
            container_port: i32::from(opts.port),
            // On the node's network the port is the node's: declaring it lets the scheduler
            // refuse a second server on the same node and port instead of a bind failure.
            host_port: mode.host_network().then_some(i32::from(opts.port)),
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]
    });
    spec.containers = vec![Container {
        name: CONTAINER.into(),
        image: Some(opts.image.clone()),
        image_pull_policy: Some(opts.pull_policy.as_str().into()),
        command: Some(vec!["sleep".into(), "infinity".into()]),
        ports,
        resources: (!limits.is_empty() || claims.is_some()).then(|| ResourceRequirements {
            limits: (!limits.is_empty()).then_some(limits),
            claims,
            ..ResourceRequirements::default()
        }),
        security_context: (security != SecurityContext::default()).then_some(security),
        ..Container::default()
    }];
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(run, mode, role)),
            namespace: Some(opts.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
mod tests;

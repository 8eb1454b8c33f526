//! The command-line options of the pods railsweep creates (`railsweep run --nodes`,
//! `railsweep compare`), and how they become [`PodOptions`].
//!
//! `--networks` and `--rdma-resource` may start with `MODE:` to apply to one mode only, so
//! that `compare` can take the IPvlan and the SR-IOV settings in one command line:
//! `--networks 'ipvlan:rdma-ipvlan-{0..15}' --networks 'sriov:sriov-rail-{0..15}'`. Without a
//! prefix they apply to both.

use clap::Args;

use super::pattern::{expand_pattern, number_list};
use super::{Attachment, Mode, ModeError, PodOptions, ResourceSpec, TolerationSpec};

/// `--nodes NODE_A,NODE_B`: the client pod goes to the first, the server pod to the second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePair {
    /// Node of the client pod.
    pub client: String,
    /// Node of the server pod.
    pub server: String,
}

impl std::str::FromStr for NodePair {
    type Err = String;

    fn from_str(s: &str) -> Result<NodePair, String> {
        match s.split(',').map(str::trim).collect::<Vec<_>>().as_slice() {
            [a, b] if a == b => Err(format!(
                "`{}` names one node twice: the client and the server pods go on two \
                 different nodes (NODE_A,NODE_B), so that the rails are measured between them",
                s.escape_debug()
            )),
            [a, b] if !a.is_empty() && !b.is_empty() => Ok(NodePair {
                client: crate::names::subdomain("node", a)?,
                server: crate::names::subdomain("node", b)?,
            }),
            _ => Err(format!(
                "expected two node names, NODE_A,NODE_B (client on A, server on B), got `{}`",
                s.escape_debug()
            )),
        }
    }
}

/// `--dry-run[=client|none]`, kubectl's values: whether to print instead of create.
fn dry_run_strategy(s: &str) -> Result<bool, String> {
    match s {
        "client" => Ok(true),
        "none" => Ok(false),
        "server" => Err(
            "railsweep has no server-side dry run: --dry-run (or --dry-run=client) \
                         prints the pods without sending them"
                .into(),
        ),
        other => Err(format!(
            "{other:?}: --dry-run takes client or none, as kubectl's"
        )),
    }
}

/// Options of the pods railsweep creates (`railsweep run --nodes`, `compare`, `fleet --nodes`).
/// `--nodes` itself is each command's own: a pair for `run`, a selector for `fleet`.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = crate::config::heading::CREATED)]
pub struct PodArgs {
    /// Print the pods' manifests instead of creating them (`-o yaml`, the default, or `-o json`).
    /// As kubectl's: `--dry-run` and `--dry-run=client` print, `--dry-run=none` does not;
    /// `server` is refused (railsweep sends nothing to print).
    #[arg(
        long,
        value_name = "STRATEGY",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "client",
        default_value = "none",
        hide_default_value = true,
        value_parser = dry_run_strategy,
    )]
    pub dry_run: bool,
    /// Leave the pods in place at the end (also after Ctrl-C); delete them later with
    /// `kubectl delete pods -l app.kubernetes.io/managed-by=railsweep`.
    #[arg(long)]
    pub keep_pods: bool,
    /// Name the pods railsweep-RUN-MODE-ROLE (fleet: railsweep-RUN-MODE-NODE) and label them
    /// with this run id (lowercase letters, digits, `-`) [default: the run's timestamp].
    #[arg(long, value_name = "RUN")]
    pub run_id: Option<String>,
    /// Seconds to wait for the pods to be ready before giving up (image pulls can be slow).
    #[arg(long, value_name = "S", default_value_t = 300.0, value_parser = crate::config::seconds_positive)]
    pub pod_timeout: f64,
    /// Container image with rdmabw (built from deploy/Containerfile); with --inject, any image
    /// with libibverbs, sh, head and sleep [default: busybox pinned by digest, or
    /// $RAILSWEEP_IMAGE, with railsweep's rdmabw-portable copied in].
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// The container's imagePullPolicy [default: IfNotPresent].
    #[arg(long, value_enum, value_name = "POLICY")]
    pub image_pull_policy: Option<super::PullPolicy>,
    /// A Secret in the pods' namespace with the registry's credentials (repeatable), as the
    /// pods' imagePullSecrets.
    #[arg(long = "image-pull-secret", value_name = "NAME")]
    pub image_pull_secrets: Vec<String>,
    /// Tolerate this taint (repeatable); `nvidia.com/gpu:NoSchedule` is always tolerated unless
    /// --no-gpu-toleration.
    #[arg(long = "toleration", value_name = "KEY[=VALUE][:EFFECT]")]
    pub tolerations: Vec<TolerationSpec>,
    /// Do not tolerate the nvidia.com/gpu taint.
    #[arg(long)]
    pub no_gpu_toleration: bool,
    /// Extra resource for both pods (repeatable), e.g. GPUs for GPUDirect runs: nvidia.com/gpu=8.
    #[arg(long = "resource", value_name = "NAME=COUNT")]
    pub resources: Vec<String>,
    /// No IPC_LOCK capability. IPvlan and SR-IOV pods then pass the Baseline Pod Security level,
    /// but need nodes whose container runtime sets an unlimited memlock limit.
    #[arg(long)]
    pub no_ipc_lock: bool,
    /// hostnetwork-crio: the RuntimeClass whose CRI-O handler accepts the device annotation.
    #[arg(long, value_name = "NAME", default_value = super::DEFAULT_RUNTIME_CLASS)]
    pub runtime_class: String,
    /// hostnetwork-crio: the node's uverbs device numbers, as `ls /dev/infiniband` on the node
    /// shows them: 0-17 lists uverbs0..uverbs17 (rdma_cm is always added).
    #[arg(long, value_name = "LIST")]
    pub uverbs: Option<String>,
    /// ipvlan, sriov: NetworkAttachmentDefinitions in rail order (repeatable), with a rail
    /// pattern: `rdma-ipvlan-{0..15}`; `MODE:` first applies to one mode only.
    #[arg(long = "networks", value_name = "[MODE:]NAMES")]
    pub networks: Vec<String>,
    /// ipvlan, sriov: the device resource that gives the RDMA devices (repeatable):
    /// `nvidia.com/hostdev=16`, or per rail `nvidia.com/sriov_rdma_rail{0..15}=1`; `MODE:` first
    /// applies to one mode only.
    #[arg(long = "rdma-resource", value_name = "[MODE:]NAME=COUNT")]
    pub rdma_resources: Vec<String>,
    /// dra: the DeviceClass of the rails' NICs (DRANET's quick start names its class `dranet`).
    #[arg(long, value_name = "NAME", default_value = super::dra::DEFAULT_DEVICE_CLASS)]
    pub device_class: String,
    /// dra: the CEL selector of the rails' NICs on top of the class ('' for none).
    #[arg(long, value_name = "CEL", default_value = super::dra::DEFAULT_SELECTOR)]
    pub device_selector: String,
    /// dra: how many rails each pod asks for [default: every matching NIC of its node].
    /// (--rails picks which of the pod's rails to measure.)
    #[arg(long, value_name = "N")]
    pub dra_rails: Option<u32>,
    /// dra: a GPU per rail, allocated by the scheduler under the same
    /// resource.kubernetes.io/pcieRoot as the rail's NIC (needs --dra-rails).
    #[arg(long)]
    pub gpu_align: bool,
    /// dra, --gpu-align: the DeviceClass of the GPUs.
    #[arg(long, value_name = "NAME", default_value = super::dra::DEFAULT_GPU_CLASS)]
    pub gpu_class: String,
}

/// Split a `MODE:` prefix off `s`, if it names a mode.
fn mode_prefix(s: &str) -> (Option<Mode>, &str) {
    match s.split_once(':') {
        Some((m, rest)) => match m.parse::<Mode>() {
            Ok(mode) => (Some(mode), rest),
            Err(_) => (None, s),
        },
        None => (None, s),
    }
}

impl PodArgs {
    /// With the default image (no `--image`), railsweep copies its rdmabw-portable into the pods
    /// it creates, the image having no rdmabw: `sweep` gets `--inject` with that binary, unless
    /// `--inject-binary` names another, or `--rdmabw` says where rdmabw is in the pods (a
    /// `RAILSWEEP_IMAGE` that has it). Call it only where pods are made (not for `--dry-run`).
    pub fn default_injects(&self, sweep: &mut crate::config::SweepArgs) -> anyhow::Result<()> {
        if self.image.is_some() || (sweep.rdmabw.is_some() && !sweep.inject) {
            return Ok(());
        }
        sweep.inject = true;
        if sweep.inject_binary.is_none() {
            let found = super::default_rdmabw();
            sweep.inject_binary = Some(found.ok_or_else(|| {
                anyhow::anyhow!(
                    "the default image ({}) has no rdmabw, and there is no rdmabw-portable next to \
                     railsweep to copy into it: put the release's rdmabw-portable beside railsweep \
                     (or give it with --inject-binary), or pass --image with an image that has rdmabw",
                    super::default_image()
                )
            })?);
        }
        Ok(())
    }

    /// The pod options for a namespace and server port.
    pub fn pod_options(&self, namespace: &str, port: u16) -> Result<PodOptions, ModeError> {
        let image = self.image.clone().unwrap_or_else(super::default_image);
        let mut tolerations = Vec::new();
        if !self.no_gpu_toleration {
            tolerations.push(TolerationSpec::gpu());
        }
        for t in &self.tolerations {
            if !tolerations.contains(t) {
                tolerations.push(t.clone());
            }
        }
        let mut resources = Vec::new();
        for r in &self.resources {
            resources.extend(ResourceSpec::parse_many(r)?);
        }
        let mut ipvlan = Attachment::default();
        let mut sriov = Attachment::default();
        for n in &self.networks {
            let (mode, pattern) = mode_prefix(n);
            let names = expand_pattern(pattern)?;
            match mode {
                None => {
                    ipvlan.networks.extend(names.iter().cloned());
                    sriov.networks.extend(names);
                }
                Some(Mode::Ipvlan) => ipvlan.networks.extend(names),
                Some(Mode::Sriov) => sriov.networks.extend(names),
                Some(other) => return Err(not_for(other, "--networks", n)),
            }
        }
        for r in &self.rdma_resources {
            let (mode, spec) = mode_prefix(r);
            let specs = ResourceSpec::parse_many(spec)?;
            match mode {
                None => {
                    ipvlan.resources.extend(specs.iter().cloned());
                    sriov.resources.extend(specs);
                }
                Some(Mode::Ipvlan) => ipvlan.resources.extend(specs),
                Some(Mode::Sriov) => sriov.resources.extend(specs),
                Some(other) => return Err(not_for(other, "--rdma-resource", r)),
            }
        }
        Ok(PodOptions {
            namespace: namespace.to_string(),
            pull_policy: self
                .image_pull_policy
                .unwrap_or(super::PullPolicy::IfNotPresent),
            pull_secrets: self.image_pull_secrets.clone(),
            image,
            tolerations,
            resources,
            ipc_lock: !self.no_ipc_lock,
            port,
            runtime_class: self.runtime_class.clone(),
            uverbs: match &self.uverbs {
                Some(l) => number_list(l)?,
                None => vec![],
            },
            ipvlan,
            sriov,
            dra: super::dra::DraOptions {
                device_class: self.device_class.clone(),
                selector: self.device_selector.clone(),
                rails: self.dra_rails,
                gpu_align: self.gpu_align,
                gpu_class: self.gpu_class.clone(),
            },
        })
    }
}

fn not_for(mode: Mode, option: &str, value: &str) -> ModeError {
    ModeError::Pattern {
        pattern: value.to_string(),
        why: format!("{option} applies to ipvlan and sriov, not to {mode}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::DEFAULT_IMAGE;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[arg(long)]
        nodes: Option<NodePair>,
        #[command(flatten)]
        pods: PodArgs,
    }

    fn parse(args: &[&str]) -> PodOptions {
        let t =
            T::try_parse_from(std::iter::once("t").chain(args.iter().copied())).expect("parses");
        t.pods.pod_options("rdma", 18515).expect("options")
    }

    #[test]
    fn a_node_pair_is_two_different_nodes() {
        let p: NodePair = "a, b".parse().expect("two nodes");
        assert_eq!((p.client.as_str(), p.server.as_str()), ("a", "b"));
        // Issue 33: `--nodes A,A` was taken.
        let e = "a,a".parse::<NodePair>().expect_err("one node twice");
        assert!(e.starts_with("`a,a` names one node twice"), "{e}");
        assert!("a".parse::<NodePair>().is_err());
    }

    #[test]
    fn image_pull_policy_in_kubernetes_spelling_or_lower_case() {
        use super::super::PullPolicy;
        for (given, want) in [
            ("Never", PullPolicy::Never),
            ("never", PullPolicy::Never),
            ("IfNotPresent", PullPolicy::IfNotPresent),
            ("if-not-present", PullPolicy::IfNotPresent),
            ("Always", PullPolicy::Always),
        ] {
            let o = parse(&["--image", "x:1", "--image-pull-policy", given]);
            assert_eq!(o.pull_policy, want, "{given}");
        }
        let t = T::try_parse_from(["t", "--image-pull-policy", "Sometimes"]);
        let e = t.expect_err("not a policy").to_string();
        assert!(
            e.contains("[possible values: Always, IfNotPresent, Never]"),
            "{e}"
        );
    }

    #[test]
    fn mode_prefixes_keep_ipvlan_and_sriov_apart() {
        let o = parse(&[
            "--networks",
            "ipvlan:rdma-ipvlan-{0..15}",
            "--networks",
            "sriov:sriov-rail-{0..1}",
            "--rdma-resource",
            "ipvlan:nvidia.com/hostdev=16",
            "--rdma-resource",
            "sriov:nvidia.com/sriov_rdma_rail{0..1}=1",
        ]);
        assert_eq!(o.ipvlan.networks.len(), 16);
        assert_eq!(o.sriov.networks, ["sriov-rail-0", "sriov-rail-1"]);
        assert_eq!(o.ipvlan.resources.len(), 1);
        assert_eq!(o.sriov.resources.len(), 2);
        let both = parse(&["--networks", "ns/a,ns/b"]);
        assert_eq!(both.ipvlan.networks, both.sriov.networks);
    }

    #[test]
    fn defaults_and_switches() {
        let o = parse(&["--nodes", "a,b"]);
        assert_eq!(o.tolerations, [TolerationSpec::gpu()]);
        assert!(o.ipc_lock);
        assert_eq!(o.image, DEFAULT_IMAGE);
        let o = parse(&[
            "--no-gpu-toleration",
            "--no-ipc-lock",
            "--uverbs",
            "0-3",
            "--resource",
            "nvidia.com/gpu=8",
        ]);
        assert!(o.tolerations.is_empty());
        assert!(!o.ipc_lock);
        assert_eq!(o.uverbs, [0, 1, 2, 3]);
        assert_eq!(o.resources[0].name, "nvidia.com/gpu");
        assert!(T::try_parse_from(["t", "--nodes", "only-one"]).is_err());
        let t = T::try_parse_from(["t", "--networks", "hostnetwork:x"]).expect("parses");
        assert!(t.pods.pod_options("d", 1).is_err());
    }

    /// Issue 56: without --image, railsweep copies its rdmabw-portable into the default image (it
    /// has no rdmabw), or says where to get one; with --image, --inject stays the user's choice.
    #[test]
    fn the_default_image_gets_rdmabw_injected() {
        #[derive(Debug, Parser)]
        struct S {
            #[command(flatten)]
            sweep: crate::config::SweepArgs,
        }
        let sweep = |args: &[&str]| {
            S::try_parse_from(std::iter::once("s").chain(args.iter().copied()))
                .expect("parses")
                .sweep
        };
        let t = T::try_parse_from(["t"]).expect("parses");
        let mut s = sweep(&[]);
        let err = t
            .pods
            .default_injects(&mut s)
            .expect_err("no rdmabw-portable beside the test");
        assert!(
            err.to_string().contains("rdmabw-portable") && err.to_string().contains("--image"),
            "{err}"
        );
        let mut s = sweep(&["--inject", "--inject-binary", "/x/rdmabw-portable"]);
        t.pods.default_injects(&mut s).expect("a binary given");
        assert!(s.inject);
        let mut s = sweep(&["--rdmabw", "/opt/rdmabw"]);
        t.pods.default_injects(&mut s).expect("--rdmabw given");
        assert!(!s.inject, "--rdmabw: rdmabw is in the pods");
        let t = T::try_parse_from(["t", "--image", "mine/rdmabw:1"]).expect("parses");
        let mut s = sweep(&[]);
        t.pods.default_injects(&mut s).expect("an image given");
        assert!(!s.inject && s.inject_binary.is_none());
    }
}

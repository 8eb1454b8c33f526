//! `--dry-run -o yaml`: the pods as a multi-document YAML stream that `kubectl apply -f -`
//! takes, each pod headed by comments that say what it is for and which Pod Security level
//! its namespace must allow.

use k8s_openapi::api::core::v1::Pod;

use super::{security, Mode, PodPair, Role};

/// The YAML printer's only failure: a pod that does not serialize.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the pods as YAML: {0}")]
pub struct YamlError(#[from] serde_saphyr::ser::Error);

/// `value` as one YAML document, each string a plain or quoted scalar (no folded or literal
/// blocks: a long annotation stays one line, as kubectl writes it).
fn to_yaml<T: serde::Serialize>(value: &T) -> Result<String, YamlError> {
    let options = serde_saphyr::ser_options! { prefer_block_scalars: false };
    Ok(serde_saphyr::to_string_with_options(value, options)?)
}

/// One pod as a YAML document (`---` first), with its comment header.
pub fn pod_document(pod: &Pod, header: &[String]) -> Result<String, YamlError> {
    let mut out = String::from("---\n");
    for line in header {
        // A comment line stays one line whatever it quotes: a line break in it would end the
        // comment and start YAML of the quoted text's making.
        out.push_str("# ");
        out.extend(line.chars().map(|c| if c.is_control() { ' ' } else { c }));
        out.push('\n');
    }
    out.push_str(&to_yaml(pod)?);
    Ok(out)
}

/// The comment lines of one pod: role, node, and the Pod Security level it needs.
pub fn pod_header(pair: &PodPair, role: Role) -> Vec<String> {
    let pod = match role {
        Role::Server => &pair.server,
        Role::Client => &pair.client,
    };
    header_of(pod, &format!("{} {} pod", pair.mode, role.as_str()))
}

/// The pods of `railsweep fleet --nodes` as one YAML stream, in node order.
pub fn fleet_yaml(mode: Mode, pods: &[Pod]) -> Result<String, YamlError> {
    let mut out = String::new();
    for pod in pods {
        out.push_str(&pod_document(
            pod,
            &header_of(pod, &format!("{mode} fleet pod")),
        )?);
    }
    Ok(out)
}

fn header_of(pod: &Pod, what: &str) -> Vec<String> {
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.as_ref())
        .and_then(|s| s.get("kubernetes.io/hostname"))
        .map(|n| format!("on node {n}"))
        .unwrap_or_else(|| "on a node the scheduler picks".into());
    let (level, why) = security::required_level(pod);
    let mut lines = vec![format!("railsweep: {what}, {node}.")];
    if why.is_empty() {
        lines.push(format!(
            "Pod Security: the namespace may enforce up to {level}."
        ));
    } else {
        lines.push(format!(
            "Pod Security: the namespace must allow {level} (pod-security.kubernetes.io/enforce={level}), for:"
        ));
        lines.extend(why.into_iter().map(|w| format!("  {w}")));
    }
    lines
}

/// One ResourceClaimTemplate as a YAML document, headed by what it is for.
pub fn template_document(
    t: &k8s_openapi::api::resource::v1::ResourceClaimTemplate,
    mode: Mode,
) -> Result<String, YamlError> {
    let mut out = String::from("---\n");
    out.push_str(&format!(
        "# railsweep: the ResourceClaimTemplate of the {mode} pods: each pod gets a ResourceClaim of its own\n\
         # from it, which the scheduler allocates (resource.k8s.io/v1: Kubernetes 1.34 or later).\n"
    ));
    out.push_str(&to_yaml(t)?);
    Ok(out)
}

/// Every object of `pairs` as one YAML stream: a pair's ResourceClaimTemplates, then its
/// pods, server before client.
pub fn pairs_yaml(pairs: &[PodPair]) -> Result<String, YamlError> {
    let mut out = String::new();
    for pair in pairs {
        for t in &pair.templates {
            out.push_str(&template_document(t, pair.mode)?);
        }
        for (role, pod) in pair.pods() {
            out.push_str(&pod_document(pod, &pod_header(pair, role))?);
        }
    }
    Ok(out)
}

/// The options of the example manifests in `deploy/examples/` and of the snapshot tests: the
/// field reports' 16-rail nodes (18 uverbs devices with the two front-end NICs), IPvlan
/// networks `rdma-ipvlan-{0..15}` with `nvidia.com/hostdev=16`, and one SR-IOV network and VF
/// resource per rail.
pub fn example_options(namespace: &str) -> super::PodOptions {
    use super::pattern::expand_pattern;
    use super::{Attachment, PodOptions, PullPolicy, ResourceSpec, PROJECT_IMAGE};
    let expand = |p: &str| expand_pattern(p).unwrap_or_default();
    let resources = |r: &str| ResourceSpec::parse_many(r).unwrap_or_default();
    PodOptions {
        namespace: namespace.to_string(),
        image: PROJECT_IMAGE.into(),
        pull_policy: PullPolicy::Never,
        uverbs: (0..18).collect(),
        ipvlan: Attachment {
            networks: expand("rdma-ipvlan-{0..15}"),
            resources: resources("nvidia.com/hostdev=16"),
        },
        sriov: Attachment {
            networks: expand("sriov-rdma-rail-{0..15}"),
            resources: resources("nvidia.com/sriov_rdma_rail{0..15}=1"),
        },
        ..PodOptions::default()
    }
}

/// The RuntimeClass of the `hostnetwork-crio` mode, as the CRI-O field report defines it.
pub fn runtime_class(name: &str) -> k8s_openapi::api::node::v1::RuntimeClass {
    use k8s_openapi::api::node::v1::{RuntimeClass, Scheduling};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    RuntimeClass {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        handler: name.to_string(),
        scheduling: Some(Scheduling {
            node_selector: Some(
                [("nvidia.com/gpu.present".to_string(), "true".to_string())].into(),
            ),
            ..Scheduling::default()
        }),
        ..RuntimeClass::default()
    }
}

/// The CRI-O drop-in that goes with [`runtime_class`], for `uverbs` devices.
pub fn crio_dropin(handler: &str, uverbs: &[u32]) -> String {
    let devices: Vec<String> = super::crio_devices(uverbs)
        .split(',')
        .map(|d| format!("\"{d}\""))
        .collect();
    format!(
        "# /etc/crio/crio.conf.d/50-{handler}.conf on every RDMA node, then restart CRI-O.\n\
         [crio.runtime]\n\
         allowed_devices = [\"/dev/fuse\", \"/dev/net/tun\", {}]\n\
         \n\
         [crio.runtime.runtimes.{handler}]\n\
         runtime_path = \"/usr/bin/runc\"\n\
         runtime_root = \"/run/runc\"\n\
         monitor_path = \"/usr/bin/conmon\"\n\
         monitor_env = [\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"]\n\
         allowed_annotations = [\"io.kubernetes.cri-o.Devices\"]\n\
         privileged_without_host_devices = true\n",
        devices.join(", ")
    )
}

/// The namespace of `deploy/examples/`: deploy/namespace.yaml's, where deploy/rbac.yaml grants
/// railsweep's account what a sweep needs (the one namespace of every doc and example).
pub const EXAMPLE_NAMESPACE: &str = "railbench";

/// The files of `deploy/examples/`: name and content. Each is generated from the same typed
/// objects `railsweep run --nodes` creates, with `NODE_A` and `NODE_B` for the nodes.
pub fn examples() -> Result<Vec<(String, String)>, YamlError> {
    let opts = example_options(EXAMPLE_NAMESPACE);
    let place = super::Placement {
        run: "example".into(),
        client_node: Some("NODE_A".into()),
        server_node: Some("NODE_B".into()),
    };
    let mut files = Vec::new();
    let aligned = super::PodOptions {
        dra: super::dra::DraOptions {
            rails: Some(4),
            gpu_align: true,
            ..super::dra::DraOptions::default()
        },
        ..opts.clone()
    };
    let variants = super::Mode::ALL.into_iter().flat_map(|mode| {
        if mode == super::Mode::Dra {
            vec![
                (mode, "dra-rails".to_string(), &opts),
                (mode, "dra-gpu-align".to_string(), &aligned),
            ]
        } else {
            vec![(mode, mode.to_string(), &opts)]
        }
    });
    for (mode, file, opts) in variants {
        let pair = super::pod_pair(mode, opts, &place).map_err(|e| {
            YamlError(serde::ser::Error::custom(format!(
                "example options of {mode}: {e}"
            )))
        })?;
        let mut text = format!(
            "# The rdmabw pod pair of railsweep's `{mode}` mode, for `kubectl apply -f`.\n\
             # Generated from railsweep's typed pod objects (orchestrator/src/modes); do not edit by hand:\n\
             #   RAILBENCH_BLESS=1 cargo test --release -p orchestrator --test manifests\n\
             # rewrites it. Replace NODE_A (client) and NODE_B (server) with node names, the image with one\n\
             # your nodes can pull (deploy/Containerfile builds it), then sweep the pods with:\n\
             #   railsweep run -n {ns} --client-pod {} --server-pod {} --mode {mode} --tclass 41\n\
             # and delete them with: kubectl delete pods -n {ns} -l app.kubernetes.io/instance=example\n",
            pair.client.metadata.name.as_deref().unwrap_or_default(),
            pair.server.metadata.name.as_deref().unwrap_or_default(),
            ns = EXAMPLE_NAMESPACE,
        );
        if file == "dra-rails" {
            text.push_str(
                "# Each pod asks for every RDMA NIC of its node that the DRA network driver publishes\n\
                 # (DRANET: DeviceClass dranet, selector device.attributes[\"dra.net\"].rdma == true).\n",
            );
        }
        if file == "dra-gpu-align" {
            text.push_str(
                "# Each pod asks for 4 rails, each a NIC and a GPU (NVIDIA's DRA driver, DeviceClass gpu.nvidia.com)\n\
                 # under the same resource.kubernetes.io/pcieRoot: the scheduler aligns them.\n",
            );
        }
        if mode == super::Mode::HostNetworkCrio {
            text.push_str(
                "# Needs the RuntimeClass and CRI-O drop-in of runtimeclass-runc-nohostdev.yaml, and the\n\
                 # node's own uverbs device list in the annotation (ls /dev/infiniband on the node).\n",
            );
        }
        text.push_str(&pairs_yaml(std::slice::from_ref(&pair))?);
        files.push((format!("{file}.yaml"), text));
    }
    let mut rc = String::from(
        "# The RuntimeClass of railsweep's `hostnetwork-crio` mode: pods on it get the devices that their\n\
         # io.kubernetes.cri-o.Devices annotation lists, without privileged. It needs this CRI-O drop-in\n\
         # on each node (CRI-O only), listing the node's own uverbs devices:\n#\n",
    );
    for line in crio_dropin(super::DEFAULT_RUNTIME_CLASS, &opts.uverbs).lines() {
        rc.push_str(if line.is_empty() { "#" } else { "#   " });
        rc.push_str(line);
        rc.push('\n');
    }
    rc.push_str("---\n");
    rc.push_str(&to_yaml(&runtime_class(super::DEFAULT_RUNTIME_CLASS))?);
    files.push((
        format!("runtimeclass-{}.yaml", super::DEFAULT_RUNTIME_CLASS),
        rc,
    ));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_line_cannot_start_a_document_of_its_own() {
        let header =
            vec!["hostnetwork server pod on node a\n---\nkind: Pod\n\rmetadata:".to_string()];
        let doc = pod_document(&Pod::default(), &header).unwrap_or_default();
        let plain = pod_document(&Pod::default(), &[]).unwrap_or_default();
        // The header adds one comment line and nothing else.
        assert_eq!(doc.lines().count(), plain.lines().count() + 1, "{doc}");
        assert_eq!(
            doc.lines().filter(|l| l.trim() == "---").count(),
            1,
            "{doc}"
        );
        assert!(
            doc.lines()
                .nth(1)
                .is_some_and(|l| l.starts_with("# hostnetwork")),
            "{doc}"
        );
    }
}

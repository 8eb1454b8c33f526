//! Pods placed whose containers or sandbox do not start: image pulls, crashes, runtime handlers.
use k8s_openapi::api::core::v1::{Event, Pod};

use super::*;

pub(super) fn containers(pod: &Pod) -> Option<Diagnosis> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    for cs in statuses {
        let state = cs.state.as_ref();
        if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
            let reason = w.reason.as_deref().unwrap_or("");
            let message = w.message.as_deref().unwrap_or("");
            let quoted = if message.is_empty() {
                reason.to_string()
            } else {
                format!("{reason}: {message}")
            };
            match reason {
                "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
                    let image = image_of(pod).unwrap_or(&cs.image);
                    let todo = if image == DEFAULT_IMAGE || image == super::super::default_image() {
                        format!(
                            "{image} is railsweep's default image (Docker Hub's busybox, pinned by \
                             digest; railsweep copies its rdmabw into it), and {} cannot pull it: \
                             let the runtime pull it through a registry mirror (the digest stays the \
                             same), or put a copy in a registry the nodes reach and name it with \
                             RAILSWEEP_IMAGE=REF, or pass --image with an image that has rdmabw",
                            node_words(pod)
                        )
                    } else {
                        format!(
                            "check the name of {image} and that {} can pull from its registry (kubectl \
                             describe pod shows the pull error; private registries need --image-pull-secret NAME)",
                            node_words(pod)
                        )
                    };
                    return Some(make(
                        pod,
                        Problem::ImagePull,
                        format!("the image cannot be pulled: {quoted}"),
                        todo,
                    ));
                }
                "CreateContainerError"
                | "RunContainerError"
                | "CreateContainerConfigError"
                | "StartError" => {
                    if message.contains("not a valid device")
                        || message.contains("not a device node")
                    {
                        return Some(make(
                            pod,
                            Problem::DeviceAnnotation,
                            format!("CRI-O refused the io.kubernetes.cri-o.Devices annotation: {quoted}"),
                            format!(
                                "the annotation takes device nodes one by one, not directories: --uverbs must \
                                 list uverbs devices that exist on {} (ls /dev/infiniband there), and CRI-O's \
                                 allowed_devices must list each of them and /dev/infiniband/rdma_cm",
                                node_words(pod)
                            ),
                        ));
                    }
                    return Some(make(
                        pod,
                        Problem::Container,
                        format!("the container cannot start: {quoted}"),
                        "the pods run `sleep infinity` in the image: check that it has `sleep` and that the \
                         image's entry point is not required"
                            .into(),
                    ));
                }
                "CrashLoopBackOff" => {
                    return Some(make(
                        pod,
                        Problem::Container,
                        format!("the container keeps ending: {quoted}"),
                        format!(
                            "see `kubectl logs -n {} {} --previous`",
                            namespace(pod),
                            name(pod)
                        ),
                    ));
                }
                _ => {}
            }
        }
        if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
            return Some(make(
                pod,
                Problem::Container,
                format!(
                    "the container ended with exit code {}{}",
                    t.exit_code,
                    t.reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                "the pods run `sleep infinity`: the image needs a `sleep` that takes `infinity`"
                    .into(),
            ));
        }
    }
    None
}

/// Pull the name out of `pool "NAME"` (NVIDIA IPAM's words).
pub(super) fn quoted_after<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    let start = message.find(key)? + key.len();
    let rest = &message[start..];
    let end = rest.find('"')?;
    Some(&rest[..end])
}

/// The sandbox attempts after which a failure whose words name no lasting cause ends the wait.
/// The kubelet tries again after each (seconds apart), and a CNI plugin's passing failure (Multus
/// timing out reading its pod from a busy API server) is gone at the next attempt.
pub const SANDBOX_ATTEMPTS: i32 = 3;

pub(super) fn sandbox(pod: &Pod, events: &[Event]) -> Option<Diagnosis> {
    let failed = |e: &&Event| e.reason.as_deref() == Some("FailedCreatePodSandBox");
    let e = events.iter().rev().find(failed)?;
    let message = e.message.as_deref().unwrap_or("");
    let node = node_words(pod);
    if let Some(d) = runtime_handler(pod, message) {
        return Some(d);
    }
    let exhausted = [
        "no free addresses",
        "ResourceExhausted",
        "no IP addresses available",
        "Could not allocate IP",
    ];
    if exhausted.iter().any(|k| message.contains(k)) {
        // NVIDIA IPAM names its pool; host-local names the range set of the network.
        let pool = quoted_after(message, "pool \"")
            .map(|p| format!("the IP pool {p}"))
            .or_else(|| {
                let net = quoted_after(message, "error adding container to network \"")?;
                Some(match message.split_once("range set: ") {
                    Some((_, r)) => format!(
                        "the IP pool of network {net} ({})",
                        r.split([' ', ';', '"']).next().unwrap_or(r)
                    ),
                    None => format!("the IP pool of network {net}"),
                })
            })
            .unwrap_or_else(|| "the IP pool".into());
        let rails = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::super::NETWORKS_ANNOTATION))
            .map(|n| n.split(',').count())
            .unwrap_or(0);
        return Some(make(
            pod,
            Problem::IpamExhausted,
            format!("{pool} has no free address on {node} (CNI): {message}"),
            format!(
                "each pod takes one address on every rail network ({rails} for this pod), from the block its node \
                 got: delete pods that hold addresses on {node} (leftover railsweep pods: kubectl delete pods -A \
                 -l {}=railsweep), or give the pool a larger block per node (NVIDIA IPAM: perNodeBlockSize)",
                labels::MANAGED_BY
            ),
        ));
    }
    if message.contains("cannot find a network-attachment-definition")
        || message.contains("network-attachment-definitions.k8s.cni.cncf.io")
    {
        let nad = quoted_after(message, "network-attachment-definitions.k8s.cni.cncf.io \"")
            .map(str::to_string)
            .or_else(|| {
                message
                    .split_once("network-attachment-definition (")
                    .and_then(|(_, r)| r.split_once(')'))
                    .map(|(n, _)| n.to_string())
            })
            .unwrap_or_else(|| "a network".into());
        let ns = namespace(pod);
        return Some(make(
            pod,
            Problem::NetworkMissing,
            format!("Multus cannot find the NetworkAttachmentDefinition {nad} in namespace {ns}: {message}"),
            format!(
                "NetworkAttachmentDefinitions are namespaced: create {nad} in {ns}, or name it as NAMESPACE/{nad} in \
                 --networks (kubectl get network-attachment-definitions -A lists them)"
            ),
        ));
    }
    // The kubelet counts repeats of one message in the event; each attempt names its own
    // sandbox, so attempts are also events of their own.
    let attempts: i32 = events
        .iter()
        .filter(failed)
        .map(|e| e.count.unwrap_or(1).max(1))
        .sum();
    if attempts < SANDBOX_ATTEMPTS {
        return None;
    }
    Some(make(
        pod,
        Problem::Cni,
        format!("the pod's network could not be set up on {node} ({attempts} attempts): {message}"),
        format!(
            "the message names the network and CNI plugin that failed: check that network's \
             NetworkAttachmentDefinition and the CNI pods (Multus, IPAM) on {node}"
        ),
    ))
}

/// The runtime handler of a sandbox that failed for want of it: containerd says
/// `failed to get sandbox runtime: no runtime for "H" is configured`, CRI-O `failed to find
/// runtime handler H from runtime list map[...]`.
pub(super) fn missing_handler(message: &str) -> Option<(&str, &'static str)> {
    if let Some(h) = quoted_after(message, "no runtime for \"") {
        return Some((h, "containerd"));
    }
    let rest = message.split_once("failed to find runtime handler ")?.1;
    let h = rest.split_whitespace().next()?;
    Some((h, "CRI-O"))
}

/// A sandbox that the node's container runtime cannot make: the RuntimeClass's handler is
/// not one it has.
pub(super) fn runtime_handler(pod: &Pod, message: &str) -> Option<Diagnosis> {
    let (handler, runtime) = missing_handler(message)?;
    let node = node_words(pod);
    let class = pod
        .spec
        .as_ref()
        .and_then(|s| s.runtime_class_name.as_deref())
        .unwrap_or(handler);
    let config = if runtime == "containerd" {
        format!(
            "a [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{handler}] table in \
             /etc/containerd/config.toml (config version 2; version 3: plugins.\"io.containerd.cri.v1.runtime\"), \
             then restart containerd"
        )
    } else {
        format!(
            "a [crio.runtime.runtimes.{handler}] drop-in under /etc/crio/crio.conf.d \
             (deploy/examples/runtimeclass-runc-nohostdev.yaml has the one mode hostnetwork-crio needs), then \
             restart CRI-O"
        )
    };
    let mut todo = format!(
        "the RuntimeClass {class} names the handler {handler}, which {runtime} on {node} does not \
         have: give the node that runtime ({config}), or name a RuntimeClass whose handler every node has \
         with --runtime-class (kubectl get runtimeclasses shows each one's handler)"
    );
    if runtime == "containerd" && mode_of(pod) == Some(Mode::HostNetworkCrio) {
        todo.push_str(&format!(
            ". Mode hostnetwork-crio needs CRI-O: containerd ignores the {} annotation, so the pod \
             would get no RDMA device; on containerd nodes use --mode hostnetwork (privileged), ipvlan or dra",
            super::super::CRIO_DEVICES_ANNOTATION
        ));
    }
    Some(make(
        pod,
        Problem::RuntimeHandlerMissing,
        format!("{runtime} on {node} has no runtime handler {handler} (RuntimeClass {class}): {message}"),
        todo,
    ))
}

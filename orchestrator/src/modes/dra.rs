//! Mode `dra`: each pod asks for its rails through a ResourceClaimTemplate (Dynamic Resource
//! Allocation, `resource.k8s.io/v1`), and the scheduler allocates the devices while it picks
//! the node. The default asks for the RDMA-capable NICs that a DRA network driver publishes as
//! DRANET (kubernetes-sigs/dranet) does: DeviceClass [`DEFAULT_DEVICE_CLASS`], CEL selector
//! [`DEFAULT_SELECTOR`]. With `--gpu-align` each rail is a pair of requests, one NIC and one
//! GPU, constrained to the same `resource.kubernetes.io/pcieRoot`: NIC-GPU alignment decided at
//! scheduling, not by the Topology Manager after it.
//!
//! The scheduler says only "cannot allocate all claims" when a claim does not fit a node;
//! [`why_unallocatable`] works out why from the node's ResourceSlices: no device of the class,
//! a selector that matches none, not enough devices, or an alignment that cannot be met. It
//! evaluates the selectors railsweep writes (and simple ones a user writes: `&&` of `==`/`!=`
//! comparisons of `device.driver` and `device.attributes["DOMAIN"].NAME` with literals); for
//! another CEL expression it says that it cannot tell.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceAttribute, DeviceClaim, DeviceClass, DeviceConstraint, DeviceRequest,
    DeviceSelector, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
    ResourceClaimTemplateSpec, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The DeviceClass of DRANET's quick start: every device of driver `dra.net`.
pub const DEFAULT_DEVICE_CLASS: &str = "dranet";
/// RDMA-capable NICs, as DRANET marks them.
pub const DEFAULT_SELECTOR: &str = "device.attributes[\"dra.net\"].rdma == true";
/// The DeviceClass of NVIDIA's GPU DRA driver.
pub const DEFAULT_GPU_CLASS: &str = "gpu.nvidia.com";
/// The standard attribute of a device's PCIe root complex.
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
/// The pod's name for its claim (`spec.resourceClaims[].name`, `resources.claims[].name`).
pub const CLAIM: &str = "rails";
/// The request of the rails without `--gpu-align`.
pub const RAILS_REQUEST: &str = "rails";

/// The options of mode `dra`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraOptions {
    /// The DeviceClass of the rails' NICs (`--device-class`).
    pub device_class: String,
    /// A CEL selector on top of the class (`--device-selector`; empty: none).
    pub selector: String,
    /// How many rails each pod asks for (`--dra-rails`); `None`: every matching device of the
    /// node (allocation mode All).
    pub rails: Option<u32>,
    /// `--gpu-align`: a GPU per rail, under the rail's PCIe root.
    pub gpu_align: bool,
    /// The DeviceClass of the GPUs (`--gpu-class`).
    pub gpu_class: String,
}

impl Default for DraOptions {
    fn default() -> Self {
        DraOptions {
            device_class: DEFAULT_DEVICE_CLASS.into(),
            selector: DEFAULT_SELECTOR.into(),
            rails: None,
            gpu_align: false,
            gpu_class: DEFAULT_GPU_CLASS.into(),
        }
    }
}

/// The name of the NIC request of rail `i` with `--gpu-align`.
pub fn rail_request(i: u32) -> String {
    format!("rail-{i}")
}

/// The name of the GPU request of rail `i` with `--gpu-align`.
pub fn gpu_request(i: u32) -> String {
    format!("gpu-{i}")
}

/// `railsweep-RUN-dra-rails`: the template both pods of a run name.
pub fn template_name(run: &str) -> String {
    format!("railsweep-{run}-dra-{CLAIM}")
}

fn nic_request(name: String, o: &DraOptions, count: Option<u32>) -> DeviceRequest {
    DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: o.device_class.clone(),
            selectors: (!o.selector.is_empty()).then(|| {
                vec![DeviceSelector {
                    cel: Some(CELDeviceSelector {
                        expression: o.selector.clone(),
                    }),
                }]
            }),
            allocation_mode: Some(if count.is_some() { "ExactCount" } else { "All" }.into()),
            count: count.map(i64::from),
            ..ExactDeviceRequest::default()
        }),
        ..DeviceRequest::default()
    }
}

/// The claim spec of one pod: one request for the rails, or with `--gpu-align` a NIC and a
/// GPU request per rail and a constraint that puts each pair under one PCIe root.
pub fn claim_spec(o: &DraOptions) -> ResourceClaimSpec {
    let mut requests = Vec::new();
    let mut constraints = Vec::new();
    match (o.gpu_align, o.rails) {
        (true, Some(n)) => {
            for i in 0..n {
                requests.push(nic_request(rail_request(i), o, Some(1)));
                requests.push(DeviceRequest {
                    name: gpu_request(i),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: o.gpu_class.clone(),
                        allocation_mode: Some("ExactCount".into()),
                        count: Some(1),
                        ..ExactDeviceRequest::default()
                    }),
                    ..DeviceRequest::default()
                });
                constraints.push(DeviceConstraint {
                    requests: Some(vec![rail_request(i), gpu_request(i)]),
                    match_attribute: Some(PCIE_ROOT.into()),
                    ..DeviceConstraint::default()
                });
            }
        }
        _ => requests.push(nic_request(RAILS_REQUEST.into(), o, o.rails)),
    }
    ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(requests),
            constraints: (!constraints.is_empty()).then_some(constraints),
            ..DeviceClaim::default()
        }),
    }
}

/// The ResourceClaimTemplate of a run, labelled like its pods.
pub fn claim_template(
    o: &DraOptions,
    namespace: &str,
    run: &str,
    labels: BTreeMap<String, String>,
) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata: ObjectMeta {
            name: Some(template_name(run)),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(ResourceClaimTemplateSpec {
            metadata: None,
            spec: Some(claim_spec(o)),
        }),
    }
}

// --- The node's devices, and a small CEL evaluator for the selectors railsweep writes.

/// One device a node publishes.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDevice {
    /// The ResourceSlice's driver.
    pub driver: String,
    /// The pool (the node, for node-local drivers).
    pub pool: String,
    /// The device name.
    pub name: String,
    /// Its attributes, with fully qualified names (`DOMAIN/NAME`).
    pub attributes: BTreeMap<String, DeviceAttribute>,
}

impl NodeDevice {
    /// The attribute `name` (`DOMAIN/NAME`) as text.
    pub fn attr(&self, name: &str) -> Option<String> {
        self.attributes.get(name).map(attr_text)
    }
}

/// An attribute's value as text: `true`, `3`, `pci0000:0c`.
pub fn attr_text(a: &DeviceAttribute) -> String {
    if let Some(b) = a.bool {
        b.to_string()
    } else if let Some(i) = a.int {
        i.to_string()
    } else if let Some(s) = &a.string {
        s.clone()
    } else {
        a.version.clone().unwrap_or_default()
    }
}

/// The devices of node `node`'s ResourceSlices (those for every node too); attribute names
/// qualified with the slice's driver where they have no domain.
pub fn node_devices(slices: &[ResourceSlice], node: &str) -> Vec<NodeDevice> {
    let mut out = Vec::new();
    for s in slices {
        let spec = &s.spec;
        let here = spec.node_name.as_deref() == Some(node) || spec.all_nodes == Some(true);
        if !here {
            continue;
        }
        for d in spec.devices.iter().flatten() {
            let attributes = d
                .attributes
                .iter()
                .flatten()
                .map(|(k, v)| {
                    let k = if k.contains('/') {
                        k.clone()
                    } else {
                        format!("{}/{k}", spec.driver)
                    };
                    (k, v.clone())
                })
                .collect();
            out.push(NodeDevice {
                driver: spec.driver.clone(),
                pool: spec.pool.name.clone(),
                name: d.name.clone(),
                attributes,
            });
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Bool(bool),
    Int(i64),
    Str(String),
}

fn literal(s: &str) -> Option<Literal> {
    let s = s.trim();
    match s {
        "true" => return Some(Literal::Bool(true)),
        "false" => return Some(Literal::Bool(false)),
        _ => {}
    }
    if let Ok(i) = s.parse::<i64>() {
        return Some(Literal::Int(i));
    }
    let quoted =
        (s.starts_with('"') && s.ends_with('"')) || (s.starts_with('\'') && s.ends_with('\''));
    (quoted && s.len() >= 2).then(|| Literal::Str(s[1..s.len() - 1].to_string()))
}

/// The attribute a CEL operand names: `device.driver` gives `None` with `driver` set;
/// `device.attributes["D"].N` and `device.attributes["D"]["N"]` give `D/N`.
fn operand(s: &str) -> Option<Result<String, ()>> {
    let s = s.trim();
    if s == "device.driver" {
        return Some(Err(()));
    }
    let rest = s.strip_prefix("device.attributes[")?;
    let (domain, rest) = rest.split_once(']')?;
    let domain = domain.trim().trim_matches(|c| c == '"' || c == '\'');
    let name = if let Some(n) = rest.strip_prefix('.') {
        n.to_string()
    } else {
        rest.strip_prefix('[')?
            .strip_suffix(']')?
            .trim_matches(|c| c == '"' || c == '\'')
            .to_string()
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    Some(Ok(format!("{domain}/{name}")))
}

/// Whether `device` matches the CEL `expr`, when `expr` is one this evaluator reads (`None`
/// otherwise).
pub fn cel_matches(expr: &str, device: &NodeDevice) -> Option<bool> {
    let mut all = true;
    for term in expr.split("&&") {
        let term = term.trim().trim_start_matches('(').trim_end_matches(')');
        let (lhs, rhs, eq) = if let Some((l, r)) = term.split_once("==") {
            (l, r, true)
        } else if let Some((l, r)) = term.split_once("!=") {
            (l, r, false)
        } else {
            (term, "true", true)
        };
        let value = match operand(lhs)? {
            Err(()) => Some(Literal::Str(device.driver.clone())),
            Ok(name) => device.attributes.get(&name).map(|a| {
                if let Some(b) = a.bool {
                    Literal::Bool(b)
                } else if let Some(i) = a.int {
                    Literal::Int(i)
                } else {
                    Literal::Str(attr_text(a))
                }
            }),
        };
        let want = literal(rhs)?;
        // CEL fails the selector on a missing attribute: the device does not match.
        let hit = match value {
            None => false,
            Some(v) => (v == want) == eq,
        };
        all &= hit;
    }
    Some(all)
}

/// The devices of `devices` in class `class` (its selectors, when the DeviceClass could be
/// read; else those of driver `dra.net` for the default class) that match `selector`. `None`
/// when a selector is beyond [`cel_matches`].
fn matching<'a>(
    devices: &'a [NodeDevice],
    class: Option<&DeviceClass>,
    class_name: &str,
    selector: &str,
) -> Option<(Vec<&'a NodeDevice>, Vec<&'a NodeDevice>)> {
    let class_selectors: Vec<String> = match class {
        Some(c) => c
            .spec
            .iter()
            .flat_map(|s| s.selectors.iter().flatten())
            .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
            .collect(),
        None if class_name == DEFAULT_DEVICE_CLASS => {
            vec!["device.driver == \"dra.net\"".to_string()]
        }
        None if class_name == DEFAULT_GPU_CLASS => {
            vec!["device.driver == \"gpu.nvidia.com\"".to_string()]
        }
        None => return None,
    };
    let mut in_class = Vec::new();
    for d in devices {
        let mut ok = true;
        for s in &class_selectors {
            ok &= cel_matches(s, d)?;
        }
        if ok {
            in_class.push(d);
        }
    }
    let mut selected = Vec::new();
    for d in &in_class {
        if selector.is_empty() || cel_matches(selector, d)? {
            selected.push(*d);
        }
    }
    Some((in_class, selected))
}

/// Why a pod's claim of `o` cannot be allocated on `node`, from the node's devices: each
/// reason in words, with what to do. `classes` are the DeviceClasses railsweep could read (by
/// name).
pub fn why_unallocatable(
    o: &DraOptions,
    node: &str,
    devices: &[NodeDevice],
    classes: &BTreeMap<String, DeviceClass>,
) -> Vec<String> {
    let Some((in_class, nics)) = matching(
        devices,
        classes.get(&o.device_class),
        &o.device_class,
        &o.selector,
    ) else {
        return vec![format!(
            "railsweep cannot evaluate DeviceClass {} or the selector `{}`: see `kubectl get resourceslices \
             --field-selector spec.nodeName={node} -o yaml` for node {node}'s devices",
            o.device_class, o.selector
        )];
    };
    let names = |ds: &[&NodeDevice]| -> String {
        ds.iter()
            .map(|d| {
                d.attr("dra.net/ifName")
                    .map(|i| format!("{} ({i})", d.name))
                    .unwrap_or_else(|| d.name.clone())
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let want = o.rails.map(|n| n as usize);
    if in_class.is_empty() {
        let drivers: std::collections::BTreeSet<&str> =
            devices.iter().map(|d| d.driver.as_str()).collect();
        return vec![format!(
            "node {node} publishes no device of DeviceClass {} (its ResourceSlices: {}): install the DRA \
             driver on it (for DRANET's NICs, its DaemonSet) or name the class of its NICs with --device-class",
            o.device_class,
            if drivers.is_empty() {
                "none".to_string()
            } else {
                format!("drivers {}", drivers.into_iter().collect::<Vec<_>>().join(", "))
            }
        )];
    }
    if nics.is_empty() {
        return vec![format!(
            "the selector `{}` matched none of node {node}'s {} devices of DeviceClass {} ({}): fix it with \
             --device-selector (their attributes: kubectl get resourceslices --field-selector \
             spec.nodeName={node} -o yaml)",
            o.selector,
            in_class.len(),
            o.device_class,
            names(&in_class)
        )];
    }
    if let Some(w) = want {
        if nics.len() < w {
            return vec![format!(
                "not enough devices: node {node} publishes {} that match ({}), the pod asks for {w} rails: ask \
                 for at most {} with --dra-rails",
                nics.len(),
                names(&nics),
                nics.len()
            )];
        }
    }
    if o.gpu_align {
        let gpus = match matching(devices, classes.get(&o.gpu_class), &o.gpu_class, "") {
            Some((g, _)) => g,
            None => {
                return vec![format!(
                    "railsweep cannot evaluate DeviceClass {}: see node {node}'s ResourceSlices",
                    o.gpu_class
                )]
            }
        };
        let mut per_root: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for d in &nics {
            if let Some(r) = d.attr(PCIE_ROOT) {
                per_root.entry(r).or_default().0 += 1;
            }
        }
        for g in &gpus {
            if let Some(r) = g.attr(PCIE_ROOT) {
                per_root.entry(r).or_default().1 += 1;
            }
        }
        let pairs: usize = per_root.values().map(|(n, g)| n.min(g)).sum();
        if pairs < want.unwrap_or(nics.len()) {
            let roots: Vec<String> = per_root
                .iter()
                .map(|(r, (n, g))| format!("{r}: {n} NIC(s), {g} GPU(s)"))
                .collect();
            return vec![format!(
                "the alignment constraint cannot be met: on node {node} only {pairs} rail(s) have a GPU of class {} \
                 under the same {PCIE_ROOT} ({}), the pod asks for {}: ask for at most {pairs} with --dra-rails, \
                 or leave out --gpu-align",
                o.gpu_class,
                if roots.is_empty() { "no device has the attribute".to_string() } else { roots.join("; ") },
                want.unwrap_or(nics.len())
            )];
        }
    }
    vec![format!(
        "node {node} publishes enough matching devices ({}): other claims may hold them (kubectl get \
         resourceclaims -A), or the DeviceClass itself selects fewer",
        names(&nics)
    )]
}

/// A GPU allocated with a rail (`--gpu-align`): its DRA device and PCIe root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedGpu {
    /// The device name (`gpu-3`).
    pub device: String,
    /// Its PCIe root, when its ResourceSlice publishes one (and railsweep may list them).
    pub pcie_root: Option<String>,
}

/// One rail a pod was allocated: the request, the NIC and (with `--gpu-align`) its GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedRail {
    /// The rail's request (`rails`, or `rail-I`).
    pub request: String,
    /// The NIC device.
    pub nic: String,
    /// Its interface (`dra.net/ifName`), when published.
    pub interface: Option<String>,
    /// Its PCIe root, when published.
    pub pcie_root: Option<String>,
    /// The GPU of the rail (`gpu-I`).
    pub gpu: Option<AllocatedGpu>,
}

impl std::fmt::Display for AllocatedRail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.request, self.nic)?;
        if let Some(i) = &self.interface {
            write!(f, " ({i})")?;
        }
        if let Some(r) = &self.pcie_root {
            write!(f, " pcieRoot {r}")?;
        }
        if let Some(g) = &self.gpu {
            write!(f, ", GPU {}", g.device)?;
            if let Some(r) = &g.pcie_root {
                write!(f, " pcieRoot {r}")?;
            }
        }
        Ok(())
    }
}

/// The rails of an allocated claim, in request order, each with the GPU allocated for the
/// same rail; device attributes from `devices` (the node's).
pub fn allocated_rails(claim: &ResourceClaim, devices: &[NodeDevice]) -> Vec<AllocatedRail> {
    let results: Vec<_> = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.clone())
        .unwrap_or_default();
    let find = |driver: &str, pool: &str, name: &str| {
        devices
            .iter()
            .find(|d| d.driver == driver && d.pool == pool && d.name == name)
    };
    let mut rails = Vec::new();
    for r in &results {
        if r.request.starts_with("gpu-") {
            continue;
        }
        let dev = find(&r.driver, &r.pool, &r.device);
        let gpu = r.request.strip_prefix("rail-").and_then(|i| {
            results
                .iter()
                .find(|g| g.request == format!("gpu-{i}"))
                .map(|g| AllocatedGpu {
                    device: g.device.clone(),
                    pcie_root: find(&g.driver, &g.pool, &g.device).and_then(|d| d.attr(PCIE_ROOT)),
                })
        });
        rails.push(AllocatedRail {
            request: r.request.clone(),
            nic: r.device.clone(),
            interface: dev.and_then(|d| d.attr("dra.net/ifName")),
            pcie_root: dev.and_then(|d| d.attr(PCIE_ROOT)),
            gpu,
        });
    }
    rails
}

/// The GPU allocated with each rail of one pod, by the rail's interface: the interface keeps
/// its `dra.net/ifName` in the pod (as DRANET moves a netdev without a name in the claim's
/// config), so the rows' `client_interface`/`server_interface` find it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpusByInterface(BTreeMap<String, AllocatedGpu>);

impl GpusByInterface {
    /// The GPUs of `rails`; rails without a GPU or without a known interface are left out.
    pub fn of(rails: &[AllocatedRail]) -> GpusByInterface {
        GpusByInterface(
            rails
                .iter()
                .filter_map(|r| Some((r.interface.clone()?, r.gpu.clone()?)))
                .collect(),
        )
    }

    /// The GPU allocated with the rail on `interface`.
    pub fn get(&self, interface: &str) -> Option<&AllocatedGpu> {
        self.0.get(interface)
    }

    /// Whether no rail has a GPU.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The GPU allocated with each rail of both pods of a pair (mode `dra` with `--gpu-align`),
/// for the rows' `client_gpu` and `server_gpu`; empty otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairGpus {
    /// The client pod's rails.
    pub client: GpusByInterface,
    /// The server pod's rails.
    pub server: GpusByInterface,
}

#[cfg(test)]
mod tests;

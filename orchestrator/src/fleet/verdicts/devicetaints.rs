//! Per-rail verdicts as DRA device taints (`resource.k8s.io/v1` DeviceTaintRule, stable since
//! Kubernetes 1.37): with `--apply-verdicts taints`, a bad rail that a DRA driver publishes as a
//! device of its node (a ResourceSlice device whose `DOMAIN/ifName` attribute names the rail's
//! interface on that node, as DRANET's `dra.net/ifName` does) gets one DeviceTaintRule of its
//! own, [`rule_name`] `railbench-NODE-railN`, instead of a taint on the whole node:
//!
//! * `spec.deviceSelector` names the device's driver, pool and name;
//! * `spec.taint` is [`RULE_TAINT_KEY`] = `degraded` or `failed`, effect `NoSchedule` (the
//!   scheduler allocates the device to no new claim that does not tolerate it; a pod already
//!   holding it keeps running);
//! * the label [`MANAGED_BY_LABEL`] = [`MANAGED_BY`] marks railsweep's rules, and
//!   [`RAIL_LABEL`] / [`NODE_LABEL`] say which rail of which node;
//! * the annotation [`RULE_EVIDENCE_ANNOTATION`] holds the evidence (JSON: the rail's Gb/s, the
//!   percentage of the fleet median, the counter findings, the run), as the node's
//!   `railbench.io/rails-evidence` does (the 1.37 taint has no description field).
//!
//! The node itself is tainted only when [`node_at_fault`] says so (every measured rail bad, or
//! a bad rail whose slow pairs are all judged `node-setup`),
//! or when a bad rail has no DRA device (today's node taint). `--untaint-passed` deletes the
//! rule of a measured rail that passes again.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{
    DeviceTaint, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::{BadRail, NodeVerdict, Options, TAINT_EFFECT};
use crate::modes::dra::NodeDevice;

/// The taint key of railsweep's DeviceTaintRules.
pub const RULE_TAINT_KEY: &str = "railbench.io/bad-rail";
/// The label that marks railsweep's own rules (the only ones it lists, changes or deletes).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY: &str = "railsweep";
/// The label with the rule's rail.
pub const RAIL_LABEL: &str = "railbench.io/rail";
/// The label with the rule's node (where the name fits a label value).
pub const NODE_LABEL: &str = "railbench.io/node";
/// The annotation with the rail's evidence.
pub const RULE_EVIDENCE_ANNOTATION: &str = "railbench.io/rail-evidence";
/// The attribute name (after the domain) that names a device's network interface.
pub const IFNAME_ATTRIBUTE: &str = "ifName";
/// The longest rule name railsweep writes (a DNS label, so it fits wherever a name does).
pub const MAX_NAME: usize = 63;

/// The DRA device that stands for a rail of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RailDevice {
    /// The driver of its ResourceSlice.
    pub driver: String,
    /// Its pool.
    pub pool: String,
    /// The device's name.
    pub device: String,
}

/// Whether the node as a whole is to blame for its bad rails, and is tainted whole: every
/// measured rail of it is bad, or a bad rail's slow pairs all have a verdict of the
/// `node-setup` layer (the device cgroup, memlock, the GID table, a rail missing in the pod:
/// what the node gives every pod, not one rail's NIC).
pub fn node_at_fault(v: &NodeVerdict) -> bool {
    let bad: BTreeSet<u32> = v.bad_rails.iter().map(|b| b.evidence.rail).collect();
    let setup = v
        .bad_rails
        .iter()
        .any(|b| b.evidence.layers == [results::Layer::NodeSetup.as_str()]);
    !bad.is_empty() && (setup || v.rails.keys().all(|r| bad.contains(r)))
}

/// The interface a device stands for: its string attribute `DOMAIN/ifName`.
fn interface_of(d: &NodeDevice) -> Option<String> {
    d.attributes
        .iter()
        .find(|(k, v)| {
            k.rsplit_once('/').map(|(_, n)| n) == Some(IFNAME_ATTRIBUTE) && v.string.is_some()
        })
        .and_then(|(_, v)| v.string.clone())
}

/// The DRA device of each rail in `rails` (rail -> the node's interface) among the node's
/// `devices`: the device whose `DOMAIN/ifName` is the rail's interface (the first by driver,
/// pool and name if several drivers publish it). Rails without one are left out.
pub fn rail_devices(
    devices: &[NodeDevice],
    rails: &BTreeMap<u32, String>,
) -> BTreeMap<u32, RailDevice> {
    let mut sorted: Vec<&NodeDevice> = devices.iter().collect();
    sorted.sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
    rails
        .iter()
        .filter_map(|(rail, iface)| {
            let d = sorted
                .iter()
                .find(|d| interface_of(d).as_deref() == Some(iface.as_str()))?;
            Some((
                *rail,
                RailDevice {
                    driver: d.driver.clone(),
                    pool: d.pool.clone(),
                    device: d.name.clone(),
                },
            ))
        })
        .collect()
}

/// FNV-1a, 32 bits: a short, stable suffix for names that must be cut.
fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The name of the rule for `rail` of `node`: `railbench-NODE-railN`, the node's name
/// lowercased with what a DNS label cannot hold (dots too) made `-`; when that is longer than
/// [`MAX_NAME`], the node's part is cut and a hash of the whole node name keeps it unique.
pub fn rule_name(node: &str, rail: u32) -> String {
    let clean: String = node
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let clean = clean.trim_matches('-');
    let tail = format!("-rail{rail}");
    let full = format!("railbench-{clean}{tail}");
    if full.len() <= MAX_NAME {
        return full;
    }
    let hash = format!("-{:08x}", fnv1a(node));
    let room = MAX_NAME - "railbench-".len() - hash.len() - tail.len();
    let cut = clean[..room].trim_end_matches('-');
    format!("railbench-{cut}{hash}{tail}")
}

/// Whether `s` is a valid label value (63 characters at most, alphanumerics at the ends,
/// `-`, `_` and `.` between).
fn label_value(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric();
    s.len() <= 63
        && s.chars().all(|c| ok(c) || "-_.".contains(c))
        && s.chars().next().is_some_and(ok)
        && s.chars().last().is_some_and(ok)
}

/// The rule railsweep writes for bad rail `bad` of `v`'s node, on device `dev`.
pub fn rule(v: &NodeVerdict, bad: &BadRail, dev: &RailDevice, o: &Options) -> DeviceTaintRule {
    let rail = bad.evidence.rail;
    let mut labels = BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
        (RAIL_LABEL.to_string(), rail.to_string()),
    ]);
    if label_value(&v.node) {
        labels.insert(NODE_LABEL.into(), v.node.clone());
    }
    let mut evidence = json!({
        "node": v.node,
        "rail": rail,
        "interface": v.rails.get(&rail),
        "run_id": o.run_id,
        "checked": o.date,
    });
    if let (Some(doc), Ok(serde_json::Value::Object(more))) =
        (evidence.as_object_mut(), serde_json::to_value(bad))
    {
        doc.extend(more);
    }
    DeviceTaintRule {
        metadata: ObjectMeta {
            name: Some(rule_name(&v.node, rail)),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                RULE_EVIDENCE_ANNOTATION.to_string(),
                evidence.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some(dev.driver.clone()),
                pool: Some(dev.pool.clone()),
                device: Some(dev.device.clone()),
            }),
            taint: DeviceTaint {
                key: RULE_TAINT_KEY.into(),
                value: Some(bad.verdict.word().into()),
                effect: TAINT_EFFECT.into(),
                time_added: None,
            },
        },
        status: None,
    }
}

/// What railsweep does about one node's rails.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePlan {
    /// The node taint is warranted: [`node_at_fault`], or a bad rail without a DRA device.
    pub node_taint: bool,
    /// The rails the node taint stands for (its value): every bad rail when the node is at
    /// fault, else those without a DRA device.
    pub node_taint_rails: Vec<u32>,
    /// The rules for its bad rails that have a DRA device.
    pub rules: Vec<DeviceTaintRule>,
    /// The names of the rules of its measured rails that pass (removed with
    /// `--untaint-passed`, where railsweep has one).
    pub passing: Vec<String>,
}

impl NodePlan {
    /// The node taint's value: its rails joined by `.`.
    pub fn taint_value(&self) -> String {
        self.node_taint_rails
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// The plan for `v`'s node, whose DRA devices are `devices` (none: every rail is the node's).
pub fn plan(v: &NodeVerdict, devices: &[NodeDevice], o: &Options) -> NodePlan {
    let managed = rail_devices(devices, &v.rails);
    let at_fault = node_at_fault(v);
    let mut p = NodePlan::default();
    for b in &v.bad_rails {
        let rail = b.evidence.rail;
        match managed.get(&rail) {
            Some(dev) => p.rules.push(rule(v, b, dev, o)),
            None => p.node_taint_rails.push(rail),
        }
    }
    if at_fault {
        p.node_taint_rails = v.bad_rails.iter().map(|b| b.evidence.rail).collect();
    }
    p.node_taint = !p.node_taint_rails.is_empty();
    let bad: BTreeSet<u32> = v.bad_rails.iter().map(|b| b.evidence.rail).collect();
    p.passing = v
        .rails
        .keys()
        .filter(|r| !bad.contains(r))
        .map(|r| rule_name(&v.node, *r))
        .collect();
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::culprit::RailEvidence;
    use crate::fleet::verdicts::{ApplyVerdicts, Health};
    use k8s_openapi::api::resource::v1::DeviceAttribute;

    fn dev(driver: &str, name: &str, ifname: Option<&str>) -> NodeDevice {
        let mut attributes = BTreeMap::new();
        if let Some(i) = ifname {
            attributes.insert(
                format!("{driver}/ifName"),
                DeviceAttribute {
                    string: Some(i.into()),
                    ..DeviceAttribute::default()
                },
            );
        }
        NodeDevice {
            driver: driver.into(),
            pool: "node-1".into(),
            name: name.into(),
            attributes,
        }
    }

    fn bad(rail: u32, verdict: Health) -> BadRail {
        BadRail {
            verdict,
            evidence: RailEvidence {
                rail,
                pairs: 5,
                slow_pairs: 5,
                failed_pairs: usize::from(verdict == Health::Failed) * 5,
                median_gbps: 40.0,
                fleet_median_gbps: Some(96.0),
                pct_of_fleet_median: Some(41.7),
                findings: vec!["link-flap".into()],
                latency_pairs: 0,
                lat_p99_us: None,
                fleet_lat_p99_us: None,
                layers: vec!["nic-port".into()],
            },
        }
    }

    fn verdict(node: &str, rails: u32, bad_rails: Vec<BadRail>) -> NodeVerdict {
        NodeVerdict {
            node: node.into(),
            pod: format!("pod-{node}"),
            health: bad_rails
                .iter()
                .map(|b| b.verdict)
                .max()
                .unwrap_or(Health::Ok),
            bad_rails,
            rails: (0..rails).map(|r| (r, format!("net{}", r + 1))).collect(),
        }
    }

    fn opts() -> Options {
        Options {
            apply: ApplyVerdicts::Taints,
            max_taint_pct: 10.0,
            untaint_passed: false,
            dry_run: false,
            date: "2026-12-06".into(),
            run_id: "r1".into(),
        }
    }

    #[test]
    fn names_are_deterministic_dns_labels_of_bounded_length() {
        assert_eq!(rule_name("fleet-6", 1), "railbench-fleet-6-rail1");
        assert_eq!(
            rule_name("gpu-07.rack3.Example.com", 0),
            "railbench-gpu-07-rack3-example-com-rail0"
        );
        let long = "a-very-long-node-name-of-a-cloud-provider.region-1.compute.internal";
        let n = rule_name(long, 7);
        assert!(n.len() <= MAX_NAME, "{n}");
        assert!(
            n.starts_with("railbench-a-very-long") && n.ends_with("-rail7"),
            "{n}"
        );
        assert_eq!(
            n,
            rule_name(long, 7),
            "the same node and rail, the same name"
        );
        assert_ne!(n, rule_name(&long.replace("region-1", "region-2"), 7));
        assert!(n
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    }

    #[test]
    fn a_rail_maps_to_the_device_naming_its_interface() {
        let devices = [
            dev("dra.net", "eth0", Some("eth0")),
            dev("dra.net", "net1", Some("net1")),
            dev("dra.net", "pci-0000-20-00-0", Some("net2")),
            dev("gpu.nvidia.com", "gpu-0", None),
        ];
        let rails = BTreeMap::from([(0, "net1".to_string()), (1, "net2".to_string())]);
        let m = rail_devices(&devices, &rails);
        assert_eq!(m[&0].device, "net1");
        assert_eq!(
            m[&1],
            RailDevice {
                driver: "dra.net".into(),
                pool: "node-1".into(),
                device: "pci-0000-20-00-0".into()
            }
        );
        let rails = BTreeMap::from([(2, "net3".to_string())]);
        assert!(rail_devices(&devices, &rails).is_empty());
    }

    #[test]
    fn a_node_is_at_fault_when_every_rail_is_bad_or_one_is_its_set_up() {
        assert!(!node_at_fault(&verdict("n", 2, vec![])));
        assert!(!node_at_fault(&verdict(
            "n",
            2,
            vec![bad(1, Health::Failed)]
        )));
        assert!(node_at_fault(&verdict(
            "n",
            2,
            vec![bad(0, Health::Degraded), bad(1, Health::Failed)]
        )));
        assert!(node_at_fault(&verdict(
            "n",
            1,
            vec![bad(0, Health::Failed)]
        )));
        // One bad rail of two, every slow pair of it judged the node's set-up: the node.
        let mut setup = bad(1, Health::Failed);
        setup.evidence.layers = vec!["node-setup".into()];
        assert!(node_at_fault(&verdict("n", 2, vec![setup.clone()])));
        // Some of its slow pairs judged otherwise: that rail alone.
        setup.evidence.layers.push("peer".into());
        assert!(!node_at_fault(&verdict("n", 2, vec![setup])));
    }

    #[test]
    fn a_dra_rail_gets_a_rule_and_the_node_no_taint() {
        let v = verdict("fleet-6", 2, vec![bad(1, Health::Degraded)]);
        let devices = [
            dev("dra.net", "net1", Some("net1")),
            dev("dra.net", "net2", Some("net2")),
        ];
        let p = plan(&v, &devices, &opts());
        assert!(!p.node_taint, "{p:?}");
        assert_eq!(p.rules.len(), 1);
        assert_eq!(p.passing, ["railbench-fleet-6-rail0"]);
        let r = serde_json::to_value(&p.rules[0]).expect("JSON");
        assert_eq!(r["apiVersion"], "resource.k8s.io/v1");
        assert_eq!(r["kind"], "DeviceTaintRule");
        assert_eq!(r["metadata"]["name"], "railbench-fleet-6-rail1");
        assert_eq!(r["metadata"]["labels"][MANAGED_BY_LABEL], "railsweep");
        assert_eq!(r["metadata"]["labels"][RAIL_LABEL], "1");
        assert_eq!(r["metadata"]["labels"][NODE_LABEL], "fleet-6");
        assert_eq!(
            r["spec"]["deviceSelector"],
            json!({ "driver": "dra.net", "pool": "node-1", "device": "net2" })
        );
        assert_eq!(
            r["spec"]["taint"],
            json!({ "key": RULE_TAINT_KEY, "value": "degraded", "effect": "NoSchedule" })
        );
        let e: serde_json::Value = serde_json::from_str(
            r["metadata"]["annotations"][RULE_EVIDENCE_ANNOTATION]
                .as_str()
                .expect("evidence"),
        )
        .expect("JSON");
        assert_eq!(e["node"], "fleet-6");
        assert_eq!(e["interface"], "net2");
        assert_eq!(e["verdict"], "degraded");
        assert_eq!(e["median_gbps"], 40.0);
        assert_eq!(e["pct_of_fleet_median"], 41.7);
        assert_eq!(e["findings"], json!(["link-flap"]));
        assert_eq!(e["run_id"], "r1");
    }

    #[test]
    fn rails_without_a_device_and_nodes_at_fault_keep_the_node_taint() {
        // No DRA at all: today's node taint.
        let v = verdict("n", 2, vec![bad(1, Health::Failed)]);
        let p = plan(&v, &[], &opts());
        assert!(p.node_taint && p.rules.is_empty());
        assert_eq!(p.taint_value(), "1");
        // Rail 0 is DRA's, rail 1 is not: a rule for 0, the node taint for 1.
        let v = verdict("n", 3, vec![bad(0, Health::Failed), bad(1, Health::Failed)]);
        let p = plan(&v, &[dev("dra.net", "net1", Some("net1"))], &opts());
        assert_eq!(p.rules.len(), 1);
        assert_eq!(p.taint_value(), "1");
        // Every rail bad: the node is at fault, tainted for all of them, and the rules stay.
        let v = verdict("n", 2, vec![bad(0, Health::Failed), bad(1, Health::Failed)]);
        let devices = [
            dev("dra.net", "net1", Some("net1")),
            dev("dra.net", "net2", Some("net2")),
        ];
        let p = plan(&v, &devices, &opts());
        assert_eq!((p.node_taint, p.taint_value().as_str()), (true, "0.1"));
        assert_eq!(p.rules.len(), 2);
        assert!(p.passing.is_empty());
    }
}

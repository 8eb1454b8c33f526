//! What `rdmabw rails --json` prints: the rails of one network namespace, and what is not one.

use serde::{Deserialize, Serialize};

/// How an interface reaches the pod (see the field reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attachment {
    /// The node's own rail netdev and RDMA device (hostNetwork pod, or bare metal).
    HostNetwork,
    /// An IPvlan child of a rail; its GID lives on the master's RDMA device.
    Ipvlan,
    /// An SR-IOV VF netdev with an RDMA device of its own.
    Sriov,
    /// A software RDMA device (rxe, siw) on this netdev.
    Software,
    /// Could not be told.
    Unknown,
}

/// One rail as this network namespace sees it: what `rdmabw rails --json` lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailRow {
    /// Rail number from the interface name: `rdmaN` is N, `netN` is N-1 (Multus numbers from
    /// net1); otherwise the order of discovery. Two pods' tables pair up by this number.
    pub rail: u32,
    /// Interface name (`rdma3`, `net4`).
    pub iface: String,
    /// IPv4 address of the interface.
    pub ipv4: Option<String>,
    /// RDMA device that carries this rail's GID.
    pub device: Option<String>,
    /// Port of that device.
    pub port: Option<u8>,
    /// Index of the RoCE v2 IPv4-mapped GID of this interface's address.
    pub gid_index: Option<u32>,
    /// Port state (`ACTIVE`, `DOWN`).
    pub state: Option<String>,
    /// `Ethernet` or `InfiniBand`.
    pub link_layer: Option<String>,
    /// Line rate in Gb/s.
    pub rate_gbps: Option<f64>,
    /// Active MTU in bytes.
    pub active_mtu_bytes: Option<u32>,
    /// PCI address of the NIC.
    pub pci: Option<String>,
    /// NUMA node of the NIC.
    pub numa_node: Option<i32>,
    /// GPUs under the same PCIe switch or root (PCI addresses).
    pub gpus: Vec<String>,
    /// How the rail reaches this namespace.
    pub attachment: Attachment,
    /// Whether a test can run on it here.
    pub usable: bool,
    /// Why not, when not usable.
    pub reason: Option<String>,
}

/// A device or interface that is not a rail, with the reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotARail {
    /// RDMA device or interface name.
    pub name: String,
    /// Why it is not a rail (front-end NIC, port down, no address...).
    pub reason: String,
}

/// What an rdmabw build can do beyond the protocol its version names. rdmabw announces its
/// own in `rdmabw rails --json` (the document railsweep reads from every pod before anything
/// else), and railsweep decides from that announcement, per pod, what to ask of it: never from
/// the text of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// `server --daemon --exit-on-stdin-eof`: the daemon stops at the end of its input.
    ExitOnStdinEof,
    /// `rdmabw batch`: one client process runs test after test from its input.
    Batch,
    /// `server --bind ADDR,ADDR...`: the server listens on each of several addresses.
    BindAddresses,
    /// `rdmabw lat`, served by the daemon too: the RDMA WRITE latency test railsweep runs for
    /// `--test bw,lat`.
    Latency,
    /// One this build does not know (announced by a newer rdmabw).
    #[serde(other)]
    Unknown,
}

impl Capability {
    /// What this build can do: what its `rails --json` announces.
    pub const OURS: [Capability; 4] = [
        Capability::ExitOnStdinEof,
        Capability::Batch,
        Capability::BindAddresses,
        Capability::Latency,
    ];
}

/// What `rdmabw rails --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailsReport {
    /// [`super::REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Version of the rdmabw that printed it.
    pub rdmabw_version: String,
    /// What that rdmabw can do ([`Capability::OURS`] of its build; empty from a build older
    /// than the announcement, which railsweep treats as having none of them).
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Host (pod) name.
    pub host: String,
    /// Rails in rail order.
    pub rails: Vec<RailRow>,
    /// Everything else that was looked at.
    pub not_rails: Vec<NotARail>,
}

/// The rail number an interface name implies: `rdmaN` -> N, `netN` -> N-1, else `None`.
pub fn rail_number(iface: &str) -> Option<u32> {
    let digits = |prefix: &str| {
        iface
            .strip_prefix(prefix)
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse::<u32>().ok())
    };
    digits("rdma").or_else(|| digits("net").and_then(|n| n.checked_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_read_unknown_ones_and_default_to_none() {
        let r: RailsReport = serde_json::from_str(
            r#"{"schema_version":1,"rdmabw_version":"0.1.0","host":"h","rails":[],"not_rails":[],
                "capabilities":["batch","teleport","bind-addresses"]}"#,
        )
        .expect("reads");
        assert_eq!(
            r.capabilities,
            [
                Capability::Batch,
                Capability::Unknown,
                Capability::BindAddresses
            ]
        );
        let old: RailsReport = serde_json::from_str(
            r#"{"schema_version":1,"rdmabw_version":"0.1.0","host":"h","rails":[],"not_rails":[]}"#,
        )
        .expect("reads");
        assert!(old.capabilities.is_empty());
        let ours = serde_json::to_string(&Capability::OURS).expect("writes");
        assert_eq!(
            ours,
            r#"["exit-on-stdin-eof","batch","bind-addresses","latency"]"#
        );
    }

    #[test]
    fn rail_numbers_follow_the_field_reports_names() {
        assert_eq!(rail_number("rdma0"), Some(0));
        assert_eq!(rail_number("rdma15"), Some(15));
        assert_eq!(rail_number("net1"), Some(0));
        assert_eq!(rail_number("net16"), Some(15));
        assert_eq!(rail_number("net0"), None);
        assert_eq!(rail_number("eth0"), None);
        assert_eq!(rail_number("rdma"), None);
        assert_eq!(rail_number("net1a"), None);
    }
}

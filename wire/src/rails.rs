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
    /// The interface's `operstate` (`up`, `down`, `lowerlayerdown`, `unknown`), where this
    /// rdmabw reads it (absent from older builds' reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operstate: Option<String>,
}

impl RailRow {
    /// Whether the interface is down in this namespace (`ip link set IFACE down`, no carrier,
    /// or the device under it down): a rail that waiting does not bring up. `false` where the
    /// state is up, unknown, or not reported.
    pub fn interface_down(&self) -> bool {
        matches!(self.operstate.as_deref(), Some("down" | "lowerlayerdown"))
    }
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

/// One GPU of this container and the rails of this pod near enough to it for GPUDirect RDMA:
/// an entry of [`RailsReport::gpus`].
///
/// NCCL moves a GPU's data through a NIC with GPUDirect RDMA only when the NIC is under the
/// same PCIe switch or root port as the GPU (nvidia-smi PIX or PXB, NCCL's default
/// `NCCL_NET_GDR_LEVEL`): a GPU with no such rail sends through host memory, at a fraction of
/// the bandwidth (field report 001: 56 to 59 GB/s instead of 96 for two jobs whose rails the
/// kubelet handed out without looking at their GPUs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRails {
    /// PCI address of the GPU, `0000:8c:00.0`.
    pub pci: String,
    /// Its index among the node's GPUs in PCI address order (nvidia-smi's index on the node;
    /// CUDA inside the pod numbers only the pod's GPUs).
    pub node_index: usize,
    /// The `/dev/nvidiaN` file that gives the container this GPU (`nvidia4`).
    pub device_file: String,
    /// The PCIe root it is under: the host bridge, `pci0000:80`; `None` when sysfs names none.
    pub pcie_root: Option<String>,
    /// NUMA node of the GPU.
    pub numa_node: Option<i32>,
    /// The usable rails of this pod (interfaces, rail order) whose NIC is under the same PCIe
    /// switch or root port as the GPU; empty when none: NCCL will not use GPUDirect RDMA for
    /// this GPU.
    pub rails: Vec<String>,
}

/// What to do about a GPU with no rail near it, in one line (the probe's fix and the last
/// words of `rdmabw rails`' line for that GPU).
pub const GPU_RAIL_FIX: &str = "have the kubelet allocate GPUs and rail NICs together: \
Topology Manager policy restricted (or single-numa-node) with topologyManagerScope pod in the \
kubelet configuration (the pod then gets its PFs on its GPUs' NUMA nodes, or is rejected with \
TopologyAffinityError), or with DRA, claim the GPUs and the NICs in one ResourceClaim whose \
constraints matchAttribute resource.kubernetes.io/pcieRoot";

impl GpuRails {
    /// Whether a rail of this pod is near enough for GPUDirect RDMA.
    pub fn aligned(&self) -> bool {
        !self.rails.is_empty()
    }

    /// `GPU 0000:8c:00.0 (nvidia4, PCIe root pci0000:80, NUMA 7)`: how a GPU is named in
    /// messages.
    pub fn name(&self) -> String {
        let mut s = format!("GPU {} ({}", self.pci, self.device_file);
        if let Some(r) = &self.pcie_root {
            s.push_str(&format!(", PCIe root {r}"));
        }
        if let Some(n) = self.numa_node {
            s.push_str(&format!(", NUMA {n}"));
        }
        s.push(')');
        s
    }

    /// One line for a GPU with no rail near it: what is wrong, and [`GPU_RAIL_FIX`].
    pub fn unaligned_line(&self) -> String {
        format!(
            "{} has no rail of this pod under its PCIe switch or root: NCCL will not use \
             GPUDirect RDMA for it; fix: {GPU_RAIL_FIX}",
            self.name()
        )
    }
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
    /// The GPUs of this container (a `/dev/nvidiaN` file here), in PCI address order, each
    /// with the rails near it; empty when the container has no GPU, and in a report from an
    /// rdmabw older than this field (read as "not said", not as "aligned").
    #[serde(default)]
    pub gpus: Vec<GpuRails>,
}

impl RailsReport {
    /// The GPUs of this container with no usable rail under their PCIe switch or root port.
    pub fn unaligned_gpus(&self) -> impl Iterator<Item = &GpuRails> {
        self.gpus.iter().filter(|g| !g.aligned())
    }
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
        // A report from before the GPU alignment: no GPUs said, none unaligned.
        assert!(old.gpus.is_empty());
        assert_eq!(old.unaligned_gpus().count(), 0);
        let ours = serde_json::to_string(&Capability::OURS).expect("writes");
        assert_eq!(
            ours,
            r#"["exit-on-stdin-eof","batch","bind-addresses","latency"]"#
        );
    }

    #[test]
    fn gpus_without_a_rail_near_them_are_the_unaligned_ones() {
        let r: RailsReport = serde_json::from_str(
            r#"{"schema_version":1,"rdmabw_version":"0.1.0","host":"h","rails":[],"not_rails":[],
                "gpus":[{"pci":"0000:50:00.0","node_index":2,"device_file":"nvidia2",
                         "pcie_root":"pci0000:40","numa_node":1,"rails":["net5","net6"]},
                        {"pci":"0000:8c:00.0","node_index":4,"device_file":"nvidia4",
                         "pcie_root":"pci0000:80","numa_node":7,"rails":[]}]}"#,
        )
        .expect("reads");
        assert!(r.gpus[0].aligned());
        let un: Vec<&str> = r.unaligned_gpus().map(|g| g.pci.as_str()).collect();
        assert_eq!(un, ["0000:8c:00.0"]);
        let back: RailsReport =
            serde_json::from_str(&serde_json::to_string(&r).expect("writes")).expect("reads");
        assert_eq!(back, r);
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

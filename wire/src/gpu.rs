//! The GPU side of the documents: where a test's buffer was asked to live and where it went
//! (`--use_cuda`, `--cuda-bus-id`, `--cuda-mem`), and what `rdmabw gpus --json` lists.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::topology::{Distance, Proximity};

/// Which GPU a test's buffer goes on (`--use_cuda N|auto`, `--cuda-bus-id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSelect {
    /// A CUDA device ordinal.
    Index(u32),
    /// A PCI bus id (any spelling bench-core's `topology::normalize_bus_id` takes).
    BusId(String),
    /// The GPU nearest the test's NIC, among those CUDA sees.
    Auto,
}

impl GpuSelect {
    /// Parses `--use_cuda`'s value: a GPU index or `auto`.
    pub fn parse(text: &str) -> Option<GpuSelect> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("auto") {
            Some(GpuSelect::Auto)
        } else {
            t.parse::<u32>().ok().map(GpuSelect::Index)
        }
    }
}

impl fmt::Display for GpuSelect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuSelect::Index(i) => write!(f, "{i}"),
            GpuSelect::BusId(b) => write!(f, "bus id {b}"),
            GpuSelect::Auto => f.write_str("auto"),
        }
    }
}

/// How GPU memory is registered with the NIC (`--cuda-mem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CudaMemPath {
    /// Export a dma-buf and register it (`ibv_reg_dmabuf_mr`).
    Dmabuf,
    /// Register the device address through `nvidia_peermem` (`ibv_reg_mr`).
    Peermem,
    /// dma-buf when the GPU can export it and the NIC takes it, else peermem.
    #[default]
    Auto,
}

impl CudaMemPath {
    /// Parses `--cuda-mem`'s value.
    pub fn parse(text: &str) -> Option<CudaMemPath> {
        match text.trim().to_ascii_lowercase().as_str() {
            "dmabuf" | "dma-buf" | "dma_buf" => Some(CudaMemPath::Dmabuf),
            "peermem" | "peer-mem" | "nvidia_peermem" => Some(CudaMemPath::Peermem),
            "auto" => Some(CudaMemPath::Auto),
            _ => None,
        }
    }
}

/// Where a test's buffer lives: host memory (the default) or a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryRequest {
    /// Page-aligned host memory.
    #[default]
    Host,
    /// CUDA memory.
    Cuda {
        /// Which GPU.
        gpu: GpuSelect,
        /// Which registration path.
        path: CudaMemPath,
    },
}

impl MemoryRequest {
    /// Whether this is host memory (for `skip_serializing_if`).
    pub fn is_host(&self) -> bool {
        matches!(self, MemoryRequest::Host)
    }
}

/// The GPU a buffer is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuUse {
    /// CUDA index.
    pub index: u32,
    /// Name.
    pub name: String,
    /// PCI bus id.
    pub pci_bus_id: String,
    /// How it was chosen.
    pub chosen_by: ChosenBy,
}

/// How the GPU of a test was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChosenBy {
    /// `--use_cuda N`.
    Index,
    /// `--cuda-bus-id`.
    BusId,
    /// `--use_cuda auto`: nearest to the NIC.
    Nearest {
        /// The RDMA device it is nearest to.
        device: String,
        /// How near.
        distance: Distance,
    },
}

impl fmt::Display for ChosenBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChosenBy::Index => f.write_str("--use_cuda"),
            ChosenBy::BusId => f.write_str("--cuda-bus-id"),
            ChosenBy::Nearest { device, distance } => {
                write!(f, "nearest to {device}: {}", distance.proximity)
            }
        }
    }
}

/// An RDMA device near a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NearRail {
    /// RDMA device.
    pub device: String,
    /// Its netdevs in this network namespace (`rdma3`), when known.
    pub netdevs: Vec<String>,
    /// How near.
    pub proximity: Proximity,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRow {
    /// CUDA index (`--use_cuda N`); `None` when CUDA does not see it (another pod's GPU, or no
    /// CUDA driver here).
    pub index: Option<u32>,
    /// Name from CUDA.
    pub name: Option<String>,
    /// PCI bus id.
    pub pci_bus_id: String,
    /// NUMA node from sysfs.
    pub numa_node: Option<u32>,
    /// Whether CUDA can export its memory as a dma-buf; `None` without CUDA.
    pub dmabuf_supported: Option<bool>,
    /// Whether CUDA says it supports GPUDirect RDMA; `None` without CUDA.
    pub gpudirect_rdma_supported: Option<bool>,
    /// Device memory in bytes; `None` without CUDA.
    pub total_mem_bytes: Option<u64>,
    /// Compute capability; `None` without CUDA.
    pub compute_capability: Option<String>,
    /// The RDMA devices nearest it (all those of the nearest proximity).
    pub nearest_rails: Vec<NearRail>,
}

/// What `rdmabw gpus --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpusReport {
    /// The CUDA version the driver supports (`13.0`); `None` without CUDA.
    pub cuda_driver: Option<String>,
    /// Why CUDA could not be used, when it could not.
    pub cuda_error: Option<String>,
    /// GPUs: CUDA's in CUDA order, then those only sysfs shows, in PCI order.
    pub gpus: Vec<GpuRow>,
}

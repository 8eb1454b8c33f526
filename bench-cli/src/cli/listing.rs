//! The flags of the commands that list or check (no test): `devices`, `gpus`, `rails`,
//! `counters`, `probe`, and `batch`'s own.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct BatchCmd {
    /// The first line of standard input is the run's secret, presented by every test (or set
    /// RDMABW_SECRET); the tests' lines follow it.
    #[arg(long = "secret-stdin")]
    pub secret_stdin: bool,
}

/// Flags of `rdmabw counters`.
#[derive(Debug, Args)]
pub struct CountersCmd {
    /// RDMA device; default: the one behind --netdev.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub ib_dev: Option<String>,
    /// Port of the device (default: that of --netdev, else 1).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u8>,
    /// The rail's interface (its statistics are read too); default: the interface of this
    /// network namespace that owns GIDs of the device's port, when there is one.
    #[arg(long, value_name = "IF")]
    pub netdev: Option<String>,
    /// One JSON document (a CountersReport) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Read ROOT/sys instead of /sys (fixture trees); ethtool statistics are then not read.
    #[arg(long, value_name = "ROOT")]
    pub root: Option<PathBuf>,
}

/// Flags of `rdmabw probe`.
#[derive(Debug, Args)]
pub struct ProbeCmd {
    /// One JSON document (a ProbeReport) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `rdmabw rails`.
#[derive(Debug, Args)]
pub struct RailsCmd {
    /// One JSON document (a RailsReport, what railsweep reads) instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Do not open the devices: the active MTU is derived from the interface MTU.
    #[arg(long = "no-verbs")]
    pub no_verbs: bool,

    /// Read ROOT/sys, ROOT/proc and ROOT/dev instead of /sys, /proc and /dev (fixture trees,
    /// or a copy of a pod's view); implies --no-verbs.
    #[arg(long, value_name = "ROOT")]
    pub root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GpusCmd {
    /// One JSON document instead of the table (or the steps).
    #[arg(long)]
    pub json: bool,
    /// Test a GPU buffer: allocate, export a dma-buf, write and read a pattern through CUDA,
    /// (with -d) register the dma-buf with that RDMA device, free; each step is reported.
    #[arg(long)]
    pub selftest: bool,
    /// Register a host dma-buf (from /dev/udmabuf) on -d DEV: does this NIC take dma-buf memory
    /// at all? No GPU needed.
    #[arg(long = "dmabuf-check")]
    pub dmabuf_check: bool,
    /// --selftest: the GPU, an index or auto (nearest -d DEV); default 0.
    #[arg(long = "use_cuda", alias = "use-cuda", value_name = "GPU")]
    pub use_cuda: Option<String>,
    /// --selftest: the GPU by PCI bus id.
    #[arg(long = "cuda-bus-id", alias = "cuda_bus_id", value_name = "BUS_ID")]
    pub cuda_bus_id: Option<String>,
    /// The RDMA device to register on.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub ib_dev: Option<String>,
    /// Bytes of the test buffer (default 2M).
    #[arg(short = 's', long = "size", value_name = "BYTES")]
    pub size: Option<String>,
}

#[derive(Debug, Args)]
pub struct DevicesCmd {
    /// One JSON document instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Read ROOT/sys, ROOT/proc and ROOT/dev instead of /sys, /proc and /dev (fixture trees,
    /// or a copy of a pod's view); the devices are not opened (the active MTU is unknown).
    #[arg(long, value_name = "ROOT")]
    pub root: Option<std::path::PathBuf>,
}

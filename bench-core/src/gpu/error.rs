//! Typed errors of GPU memory: the CUDA driver, the choice of GPU, and registration with a NIC.

use std::io;

use crate::error::Error;
use crate::topology::TopologyError;

/// What `--use_cuda` and `rdmabw gpus` say when it cannot work. The `Display` text is meant to
/// be shown as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No `libcuda.so.1` could be loaded (this binary needs none to run, only to use GPUs).
    #[error(
        "no CUDA driver library: libcuda.so (libcuda.so.1) could not be loaded. GPU buffers need the \
         NVIDIA driver on this host; in a container, ask for a GPU (resources: nvidia.com/gpu) so \
         that the NVIDIA container runtime mounts the driver. Run without --use_cuda to test with \
         host memory"
    )]
    NoDriverLibrary,

    /// libcuda loaded but would not initialise.
    #[error("the CUDA driver could not be initialised: {call} failed with {code}{}",
        if .code.contains("NO_DEVICE") { " (no GPU visible to this process: check NVIDIA_VISIBLE_DEVICES/CUDA_VISIBLE_DEVICES and the pod's nvidia.com/gpu request)" } else { "" })]
    DriverInit {
        /// The call, e.g. `cuInit`.
        call: &'static str,
        /// The CUDA error, e.g. `CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)`.
        code: String,
    },

    /// CUDA sees no GPU.
    #[error(
        "CUDA sees no GPU in this process (check CUDA_VISIBLE_DEVICES and the container's GPUs)"
    )]
    NoGpus,

    /// The GPU asked for does not exist here.
    #[error("no GPU {asked}: CUDA sees {}", if .available.is_empty() { "none".to_string() } else { .available.join(", ") })]
    NoSuchGpu {
        /// What was asked, e.g. `3` or `with PCI bus id 0000:0f:00.0`.
        asked: String,
        /// What exists, as `INDEX (BUS_ID NAME)`.
        available: Vec<String>,
    },

    /// `--use_cuda auto` could not place the rail's NIC or find a GPU near it.
    #[error("--use_cuda auto: {0}")]
    Topology(#[from] TopologyError),

    /// A CUDA call failed.
    #[error("{what} on GPU {gpu} failed: {code}")]
    Cuda {
        /// What was being done, e.g. `cuMemAlloc of 2097152 bytes`.
        what: String,
        /// The GPU, as `INDEX (BUS_ID)`.
        gpu: String,
        /// The CUDA error.
        code: String,
    },

    /// The GPU or its driver cannot export memory as a dma-buf.
    #[error("GPU {gpu} cannot export its memory as a dma-buf ({why}); use --cuda-mem peermem with nvidia_peermem loaded, or a GPU driver with dma-buf support (open kernel modules, R515+, on kernel >= 5.12)")]
    DmabufExportUnsupported {
        /// The GPU, as `INDEX (BUS_ID)`.
        gpu: String,
        /// Why, e.g. `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0`.
        why: String,
    },

    /// Registering GPU memory through nvidia_peermem was refused.
    #[error("registering {bytes} bytes of GPU memory on {device} through the peer-memory path was refused ({errno}): is nvidia_peermem loaded? (lsmod | grep nvidia_peermem; modprobe nvidia_peermem on the host) Or use --cuda-mem dmabuf on a NIC and GPU driver with dma-buf support")]
    PeermemRefused {
        /// RDMA device.
        device: String,
        /// Bytes.
        bytes: u64,
        /// The errno, e.g. `EFAULT (Bad address)`.
        errno: String,
    },

    /// `--cuda-mem auto` tried both paths and neither worked.
    #[error("GPU memory could not be registered on {device} by either path: dma-buf: {dmabuf}; peermem: {peermem}")]
    NoPath {
        /// RDMA device.
        device: String,
        /// Why the dma-buf path failed.
        dmabuf: String,
        /// Why the peermem path failed.
        peermem: String,
    },

    /// A verbs error while registering (memlock, the NIC refusing dma-buf memory, ...).
    #[error("{0}")]
    Verbs(#[from] Error),

    /// What was written to GPU memory did not read back.
    #[error("GPU {gpu}: the pattern read back differs from what was written at byte {offset} (wrote {wrote:#04x}, read {read:#04x})")]
    PatternMismatch {
        /// The GPU.
        gpu: String,
        /// First differing byte.
        offset: usize,
        /// Written value.
        wrote: u8,
        /// Read value.
        read: u8,
    },

    /// Making a host dma-buf (memfd, udmabuf) failed.
    #[error("{what} failed: {source}")]
    Io {
        /// What, e.g. `opening /dev/udmabuf`.
        what: String,
        /// The error.
        source: io::Error,
    },

    /// Arguments that cannot work.
    #[error("{0}")]
    Invalid(String),
}

impl GpuError {
    /// Whether this says the test cannot be set up as asked (exit 2): no driver, no such GPU,
    /// no registration path, bad arguments. False when set-up worked and the GPU then failed
    /// (a CUDA call, a pattern that did not read back): exit 1.
    pub fn is_setup(&self) -> bool {
        !matches!(
            self,
            GpuError::Cuda { .. } | GpuError::PatternMismatch { .. }
        )
    }
}

impl From<GpuError> for Error {
    /// How a GPU failure reaches the engine: a verbs error met while registering GPU memory
    /// stays what it is; any other is carried as [`Error::Gpu`].
    fn from(e: GpuError) -> Error {
        match e {
            GpuError::Verbs(v) => v,
            other => Error::Gpu(Box::new(other)),
        }
    }
}

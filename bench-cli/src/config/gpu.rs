//! The GPU flags resolved: a bandwidth test's buffer memory (`--use_cuda`, `--cuda-bus-id`,
//! `--cuda-mem`) and what `rdmabw gpus` does.

use bench_core::gpu;
use bench_core::topology::{normalize_bus_id, TopologyError};
use results::rdmabw::flags::parse_size;
use results::rdmabw::gpu::{CudaMemPath, GpuSelect, MemoryRequest};

use crate::cli::{GpuArgs, GpusCmd};
use crate::exit::{usage, Usage};

/// The self-test's default buffer: 2 MiB.
const SELFTEST_BYTES: u64 = 2 << 20;

/// What `rdmabw gpus` does.
#[derive(Debug)]
pub enum GpusMode {
    /// List the GPUs.
    List,
    /// The GPU buffer self-test.
    Selftest {
        gpu: GpuSelect,
        bytes: u64,
        register_on: Option<String>,
    },
    /// Register a host dma-buf on an RDMA device.
    DmabufCheck { device: String, bytes: u64 },
}

/// `rdmabw gpus` resolved.
#[derive(Debug)]
pub struct GpusConfig {
    pub json: bool,
    pub mode: GpusMode,
}

pub(super) fn gpu_select(
    use_cuda: Option<&str>,
    bus_id: Option<&str>,
) -> Result<Option<GpuSelect>, Usage> {
    match (use_cuda, bus_id) {
        (Some(_), Some(_)) => usage(
            "--use_cuda and --cuda-bus-id both name a GPU: give one (--cuda-bus-id alone implies \
             --use_cuda)",
        ),
        (Some(v), None) => match GpuSelect::parse(v) {
            Some(s) => Ok(Some(s)),
            None => usage(format!(
                "--use_cuda {v}: give a CUDA GPU index (0, 1, ...; see rdmabw gpus) or auto (the GPU \
                 nearest the rail's NIC)"
            )),
        },
        (None, Some(b)) => match normalize_bus_id(b) {
            Some(n) => Ok(Some(GpuSelect::BusId(n))),
            None => usage(format!(
                "--cuda-bus-id {b}: {}",
                TopologyError::BadBusId { text: b.to_string() }
            )),
        },
        (None, None) => Ok(None),
    }
}

fn flag_of(sel: &GpuSelect) -> String {
    match sel {
        GpuSelect::BusId(b) => format!("--cuda-bus-id {b}"),
        other => format!("--use_cuda {other}"),
    }
}

/// The memory a test's buffer is in, from `--use_cuda N|auto`, `--cuda-bus-id` and
/// `--cuda-mem`. A GPU is checked for here, before any work starts: no CUDA driver library, no
/// such GPU, are usage errors (exit 2).
pub fn memory_request(a: &GpuArgs) -> Result<MemoryRequest, Usage> {
    let sel = gpu_select(a.use_cuda.as_deref(), a.cuda_bus_id.as_deref())?;
    // ib_write_bw's --use_cuda_dmabuf is --cuda-mem dmabuf.
    let cuda_mem = a
        .cuda_mem
        .as_deref()
        .or(a.use_cuda_dmabuf.then_some("dmabuf"));
    let path = match cuda_mem {
        None => CudaMemPath::Auto,
        Some(p) => match CudaMemPath::parse(p) {
            Some(p) => p,
            None => {
                return usage(format!(
                    "--cuda-mem {p}: use dmabuf (export a dma-buf, ibv_reg_dmabuf_mr), peermem \
                     (nvidia_peermem) or auto"
                ))
            }
        },
    };
    let Some(gpu) = sel else {
        if cuda_mem.is_some() {
            let flag = if a.use_cuda_dmabuf {
                "--use_cuda_dmabuf"
            } else {
                "--cuda-mem"
            };
            return usage(format!(
                "{flag} applies to GPU memory: add --use_cuda N|auto or --cuda-bus-id"
            ));
        }
        return Ok(MemoryRequest::Host);
    };
    if let Err(e) = gpu::preflight(&gpu) {
        return usage(format!("{}: {e}", flag_of(&gpu)));
    }
    Ok(MemoryRequest::Cuda { gpu, path })
}

/// Resolves `rdmabw gpus`' flags.
pub fn gpus_config(c: GpusCmd) -> Result<GpusConfig, Usage> {
    let bytes = match c.size.as_deref() {
        None => SELFTEST_BYTES,
        Some(s) => match parse_size(s) {
            Some(n) if n > 0 => n,
            _ => return usage(format!("-s/--size {s}: give a size in bytes, e.g. 2M")),
        },
    };
    let sel = gpu_select(c.use_cuda.as_deref(), c.cuda_bus_id.as_deref())?;
    let mode = match (c.selftest, c.dmabuf_check) {
        (true, true) => return usage("--selftest and --dmabuf-check: pick one"),
        (true, false) => {
            let gpu = sel.unwrap_or(GpuSelect::Index(0));
            if gpu == GpuSelect::Auto && c.ib_dev.is_none() {
                return usage(
                    "--selftest --use_cuda auto needs -d DEV: the RDMA device the GPU should be near",
                );
            }
            GpusMode::Selftest {
                gpu,
                bytes,
                register_on: c.ib_dev,
            }
        }
        (false, true) => {
            if sel.is_some() {
                return usage("--dmabuf-check needs no GPU: leave out --use_cuda/--cuda-bus-id");
            }
            let Some(device) = c.ib_dev else {
                return usage("--dmabuf-check needs -d DEV: the RDMA device to register on");
            };
            GpusMode::DmabufCheck { device, bytes }
        }
        (false, false) => {
            if sel.is_some() || c.ib_dev.is_some() || c.size.is_some() {
                return usage(
                    "--use_cuda, --cuda-bus-id, -d and -s go with --selftest or --dmabuf-check",
                );
            }
            GpusMode::List
        }
    };
    Ok(GpusConfig { json: c.json, mode })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_flags_parse_and_conflict() {
        assert_eq!(
            gpu_select(Some("3"), None).ok().flatten(),
            Some(GpuSelect::Index(3))
        );
        assert_eq!(
            gpu_select(Some("auto"), None).ok().flatten(),
            Some(GpuSelect::Auto)
        );
        assert_eq!(
            gpu_select(None, Some("00000000:0F:00.0")).ok().flatten(),
            Some(GpuSelect::BusId("0000:0f:00.0".into()))
        );
        let e = |u: Option<&str>, b: Option<&str>| {
            gpu_select(u, b).err().map(|e| e.0).unwrap_or_default()
        };
        assert!(e(Some("x"), None).starts_with("--use_cuda x: give a CUDA GPU index"));
        assert!(e(Some("0"), Some("0f:00.0")).contains("give one"));
        assert!(e(None, Some("gpu0")).starts_with("--cuda-bus-id gpu0: "));
    }
}

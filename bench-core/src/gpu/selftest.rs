//! The GPU buffer self-test behind `rdmabw gpus --selftest`: load the driver, pick a GPU,
//! allocate, export a dma-buf, write a pattern and read it back through CUDA, optionally
//! register the dma-buf with an RDMA device, and free, reporting each step as it ends.

use std::fs::{self, File};
use std::io::{Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use wire::gpu::GpuSelect;

use super::{Cuda, GpuError, GpuInfo, GpuMemory};
use crate::sysfs::SysRoots;
use crate::verbs::Device;

/// What to test.
#[derive(Debug, Clone)]
pub struct SelftestOptions {
    /// Which GPU (`auto` needs `register_on`, the NIC it should be near).
    pub gpu: GpuSelect,
    /// Bytes to allocate (rounded up to 64 KiB).
    pub bytes: u64,
    /// An RDMA device to register the dma-buf with, if any.
    pub register_on: Option<String>,
    /// Where sysfs is.
    pub roots: SysRoots,
}

/// One step's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// `load`, `select`, `alloc`, `export`, `write`, `read`, `register`, `free`.
    pub step: String,
    /// Whether it worked.
    pub ok: bool,
    /// What happened.
    pub detail: String,
    /// How long it took, in milliseconds.
    pub ms: f64,
}

/// The whole self-test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelftestReport {
    /// The GPU tested.
    pub gpu: Option<GpuInfo>,
    /// Steps in order; the test stops at the first failure.
    pub steps: Vec<Step>,
    /// Whether every step worked.
    pub ok: bool,
}

/// Fills `buf` with the pattern for `seed`: not constant, not periodic in powers of two.
pub fn pattern(seed: u64, buf: &mut [u8]) {
    let mut x = seed | 1;
    for b in buf.iter_mut() {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
}

fn dmabuf_facts(fd: &OwnedFd) -> String {
    let size = fd
        .try_clone()
        .ok()
        .map(File::from)
        .and_then(|mut f| f.seek(SeekFrom::End(0)).ok());
    let info =
        fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).unwrap_or_default();
    let exp = info
        .lines()
        .find_map(|l| l.strip_prefix("exp_name:"))
        .map(|s| s.trim().to_string());
    let mut s = format!("dma-buf fd {}", fd.as_raw_fd());
    if let Some(n) = size {
        s += &format!(", size {n} bytes");
    }
    if let Some(e) = exp {
        s += &format!(", exporter {e}");
    }
    s
}

struct Run<'a> {
    steps: Vec<Step>,
    on_step: &'a mut dyn FnMut(&Step),
}

impl Run<'_> {
    fn step<T>(
        &mut self,
        name: &str,
        f: impl FnOnce() -> Result<(T, String), GpuError>,
    ) -> Result<T, GpuError> {
        let t = Instant::now();
        let r = f();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let (out, step) = match r {
            Ok((v, detail)) => (
                Ok(v),
                Step {
                    step: name.into(),
                    ok: true,
                    detail,
                    ms,
                },
            ),
            Err(e) => {
                let detail = e.to_string();
                (
                    Err(e),
                    Step {
                        step: name.into(),
                        ok: false,
                        detail,
                        ms,
                    },
                )
            }
        };
        (self.on_step)(&step);
        self.steps.push(step);
        out
    }
}

/// Runs the self-test, calling `on_step` as each step ends. The error is that of the first
/// step that failed (also in the report).
pub fn run(
    opts: &SelftestOptions,
    on_step: &mut dyn FnMut(&Step),
) -> (SelftestReport, Option<GpuError>) {
    let mut run = Run {
        steps: Vec::new(),
        on_step,
    };
    let mut gpu_info = None;
    let r = body(opts, &mut run, &mut gpu_info);
    let ok = r.is_ok();
    (
        SelftestReport {
            gpu: gpu_info,
            steps: run.steps,
            ok,
        },
        r.err(),
    )
}

fn body(
    opts: &SelftestOptions,
    run: &mut Run<'_>,
    gpu_info: &mut Option<GpuInfo>,
) -> Result<(), GpuError> {
    let cuda = run.step("load", || {
        let c = Cuda::load()?;
        let n = c.gpus()?.len();
        let (ma, mi) = c.driver_version();
        Ok((
            c,
            format!("libcuda loaded; the driver supports CUDA {ma}.{mi}; {n} GPU(s) visible"),
        ))
    })?;
    let gpu = run.step("select", || {
        let (info, how) = cuda.select(&opts.gpu, &opts.roots, opts.register_on.as_deref())?;
        let g = cuda.open(&info)?;
        let d = format!(
            "GPU {} {} at {} ({}), compute {}, {} MiB; dma-buf export {}, GPUDirect RDMA {}; primary context retained",
            info.index,
            info.name,
            info.pci_bus_id,
            how,
            info.compute_capability,
            info.total_mem_bytes >> 20,
            if info.dmabuf_supported { "supported" } else { "NOT supported" },
            if info.gpudirect_rdma_supported { "supported" } else { "not supported" },
        );
        Ok((g, d))
    })?;
    *gpu_info = Some(gpu.info().clone());
    let mem: GpuMemory = run.step("alloc", || {
        let m = gpu.alloc(opts.bytes)?;
        let d = format!(
            "cuMemAlloc {} bytes at device address {:#x}; CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set",
            m.len(),
            m.addr()
        );
        Ok((m, d))
    })?;
    let fd = run.step("export", || {
        let fd = mem.export_dmabuf()?;
        let d = format!(
            "cuMemGetHandleForAddressRange(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) gave {}",
            dmabuf_facts(&fd)
        );
        Ok((fd, d))
    })?;
    let len = usize::try_from(mem.len()).unwrap_or(0);
    let mut want = vec![0u8; len];
    pattern(0x5eed_0f6a_1d00, &mut want);
    run.step("write", || {
        mem.write(0, &want)?;
        Ok(((), format!("cuMemcpyHtoD of a {len}-byte xorshift pattern")))
    })?;
    run.step("read", || {
        let mut got = vec![0u8; len];
        mem.read(0, &mut got)?;
        if let Some(i) = want.iter().zip(&got).position(|(a, b)| a != b) {
            return Err(GpuError::PatternMismatch {
                gpu: mem.gpu().label(),
                offset: i,
                wrote: want[i],
                read: got[i],
            });
        }
        Ok((
            (),
            format!("cuMemcpyDtoH of {len} bytes: identical to what was written"),
        ))
    })?;
    if let Some(dev) = &opts.register_on {
        run.step("register", || {
            let device = Device::open_with(&opts.roots, dev)?;
            let pd = device.alloc_pd()?;
            let b = pd.register_dmabuf(fd.as_fd(), 0, mem.len(), mem.addr())?;
            let d = format!(
                "ibv_reg_dmabuf_mr on {dev}: lkey {:#x}, rkey {:#x}, {} bytes at iova {:#x}; deregistered",
                b.lkey(),
                b.rkey(),
                b.len(),
                b.addr()
            );
            drop(b);
            Ok(((), d))
        })?;
    }
    run.step("free", || {
        drop(fd);
        mem.free()?;
        drop(gpu);
        Ok((
            (),
            "dma-buf fd closed; cuMemFree done; context released".to_string(),
        ))
    })?;
    Ok(())
}

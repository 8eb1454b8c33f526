//! `rdmabw gpus`: the GPUs of this host (or pod) with their nearest rails, the GPU buffer
//! self-test (`--selftest`), and the dma-buf check of a NIC (`--dmabuf-check`).

use std::fmt::Write as _;

use anyhow::Result;
use bench_core::gpu::list::gpus_report;
use bench_core::gpu::selftest::{self, SelftestOptions, Step};
use bench_core::gpu::{self, GpuError};
use bench_core::sysfs::SysRoots;
use bench_core::verbs::Device;
use results::rdmabw::gpu::GpusReport;
use serde::Serialize;

use crate::config::{GpusConfig, GpusMode};
use crate::exit::{Exit, Usage};
use crate::stdout;

/// Runs `rdmabw gpus`: a GPU step that failed is a failure (exit 1); no GPU, or no CUDA, a
/// set-up error (exit 2).
pub fn run(c: &GpusConfig) -> Result<Exit> {
    let roots = SysRoots::default();
    match &c.mode {
        GpusMode::List => list(&roots, c.json),
        GpusMode::Selftest {
            gpu,
            bytes,
            register_on,
        } => run_selftest(
            &SelftestOptions {
                gpu: gpu.clone(),
                bytes: *bytes,
                register_on: register_on.clone(),
                roots,
            },
            c.json,
        ),
        GpusMode::DmabufCheck { device, bytes } => dmabuf_check(&roots, device, *bytes, c.json),
    }
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// The table `rdmabw gpus` prints.
pub fn table(r: &GpusReport) -> String {
    let mut rows = vec![[
        "GPU".to_string(),
        "NAME".into(),
        "PCI BUS ID".into(),
        "NUMA".into(),
        "DMA-BUF".into(),
        "GDR".into(),
        "MEMORY".into(),
        "NEAREST RAILS".into(),
    ]];
    for g in &r.gpus {
        let rails = if g.nearest_rails.is_empty() {
            "-".to_string()
        } else {
            let names: Vec<String> = g
                .nearest_rails
                .iter()
                .map(|n| {
                    if n.netdevs.is_empty() {
                        n.device.clone()
                    } else {
                        format!("{} ({})", n.device, n.netdevs.join(","))
                    }
                })
                .collect();
            format!(
                "{} [{}]",
                names.join(", "),
                g.nearest_rails[0].proximity.nvidia_smi()
            )
        };
        rows.push([
            g.index.map_or("-".into(), |i| i.to_string()),
            g.name.clone().unwrap_or_else(|| "-".into()),
            g.pci_bus_id.clone(),
            g.numa_node.map_or("-".into(), |n| n.to_string()),
            yes_no(g.dmabuf_supported).into(),
            yes_no(g.gpudirect_rdma_supported).into(),
            g.total_mem_bytes
                .map_or("-".into(), |b| format!("{} MiB", b >> 20)),
            rails,
        ]);
    }
    let mut w = [0usize; 8];
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i == 7 {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<width$}  ", width = w[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn list(roots: &SysRoots, json: bool) -> Result<Exit> {
    let (report, err) = gpus_report(roots);
    if json {
        stdout::json_pretty(&report)?;
    } else {
        let mut text = String::new();
        if let Some(v) = &report.cuda_driver {
            let _ = writeln!(text, "CUDA driver: supports CUDA {v}");
        }
        if report.gpus.is_empty() {
            let _ = writeln!(
                text,
                "no GPU (neither CUDA nor {} shows one)",
                roots.sys.join("bus/pci/devices").display()
            );
        } else {
            text.push_str(&table(&report));
            if report.gpus.iter().any(|g| g.index.is_none()) {
                text.push_str("(GPU -: in sysfs but not visible to CUDA in this process)\n");
            }
        }
        stdout::text(&text)?;
    }
    match err {
        // Whatever CUDA said, a GPU that cannot be listed is one this host cannot test with.
        Some(e) => Err(Usage(e.to_string()).into()),
        None if report.gpus.is_empty() => Err(GpuError::NoGpus.into()),
        None => Ok(Exit::Ok),
    }
}

fn step_line(s: &Step) -> String {
    format!(
        "[{}] {:<8} {} ({:.1} ms)\n",
        if s.ok { "ok" } else { "FAILED" },
        s.step,
        s.detail,
        s.ms
    )
}

fn run_selftest(opts: &SelftestOptions, json: bool) -> Result<Exit> {
    let (report, err) = if json {
        selftest::run(opts, &mut |_| {})
    } else {
        stdout::line(&format!(
            "GPU buffer self-test: {} bytes on GPU {}{}",
            opts.bytes,
            opts.gpu,
            opts.register_on
                .as_deref()
                .map(|d| format!(", registered on {d}"))
                .unwrap_or_default()
        ))?;
        // Each step is printed as it ends; the first write that fails ends the printing.
        let mut printed = Ok(());
        let run = selftest::run(opts, &mut |s| {
            if printed.is_ok() {
                printed = stdout::text(&step_line(s));
            }
        });
        printed?;
        run
    };
    if json {
        stdout::json_pretty(&report)?;
    }
    match err {
        None => {
            if !json {
                stdout::line("self-test passed")?;
            }
            Ok(Exit::Ok)
        }
        Some(e) => Err(e.into()),
    }
}

#[derive(Debug, Serialize)]
struct DmabufCheck {
    device: String,
    driver: Option<String>,
    source: Option<String>,
    registered: bool,
    error: Option<String>,
}

fn dmabuf_check(roots: &SysRoots, device: &str, bytes: u64, json: bool) -> Result<Exit> {
    let mut out = DmabufCheck {
        device: device.to_string(),
        driver: bench_core::sysfs::read_device(roots, device)
            .ok()
            .map(|d| d.driver_label()),
        source: None,
        registered: false,
        error: None,
    };
    let r = (|| -> Result<()> {
        let dev = Device::open_with(roots, device).map_err(GpuError::from)?;
        let pd = dev.alloc_pd().map_err(GpuError::from)?;
        let (source, reg) = gpu::check_dmabuf_registration(&pd, bytes)?;
        out.source = Some(source.to_string());
        if !json {
            stdout::line(&format!(
                "dma-buf check on {device}: registering {bytes} bytes of {source}"
            ))?;
        }
        let buf = reg?;
        out.registered = true;
        if !json {
            stdout::line(&format!(
                "registered: lkey {:#x}, rkey {:#x}, {} bytes; {device} takes dma-buf memory",
                buf.lkey(),
                buf.rkey(),
                buf.len()
            ))?;
        }
        Ok(())
    })();
    if let Err(e) = &r {
        out.error = Some(e.to_string());
    }
    if json {
        stdout::json_pretty(&out)?;
    }
    r.map(|()| Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::rdmabw::gpu::{GpuRow, NearRail};
    use results::rdmabw::topology::Proximity;

    #[test]
    fn the_table_names_the_nearest_rails() {
        let r = GpusReport {
            cuda_driver: Some("13.0".into()),
            cuda_error: None,
            gpus: vec![GpuRow {
                index: Some(0),
                name: Some("NVIDIA H200".into()),
                pci_bus_id: "0000:19:00.0".into(),
                numa_node: Some(0),
                dmabuf_supported: Some(true),
                gpudirect_rdma_supported: Some(true),
                total_mem_bytes: Some(150_000 << 20),
                compute_capability: Some("9.0".into()),
                nearest_rails: vec![
                    NearRail {
                        device: "mlx5_0".into(),
                        netdevs: vec!["rdma0".into()],
                        proximity: Proximity::SameSwitch,
                    },
                    NearRail {
                        device: "mlx5_1".into(),
                        netdevs: vec![],
                        proximity: Proximity::SameSwitch,
                    },
                ],
            }],
        };
        let t = table(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("GPU  NAME"), "{t}");
        assert!(
            lines[1].contains("NVIDIA H200  0000:19:00.0  0     yes"),
            "{t}"
        );
        assert!(lines[1].ends_with("mlx5_0 (rdma0), mlx5_1 [PIX]"), "{t}");
    }
}

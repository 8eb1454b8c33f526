//! GPU memory without a GPU: the CUDA driver library is looked for, never assumed (cudarc
//! panics without it), `rdmabw gpus` still lists what sysfs shows, and the flags parse. On a
//! machine with libcuda the driver-less assertions are skipped.

use std::path::PathBuf;

use bench_core::error::Error;
use bench_core::gpu::list::gpus_report;
use bench_core::gpu::selftest::{self, SelftestOptions};
use bench_core::gpu::{host_dmabuf, Cuda, GpuError, HostDmabufSource};
use bench_core::sysfs::SysRoots;
use wire::gpu::{CudaMemPath, GpuSelect, MemoryRequest};
use wire::topology::Proximity;
use wire::MemoryKind;

fn roots(tree: &str) -> SysRoots {
    SysRoots::under(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(tree),
    )
}

fn no_cuda_here() -> bool {
    matches!(Cuda::load(), Err(GpuError::NoDriverLibrary))
}

#[test]
fn without_libcuda_loading_fails_with_the_clear_error() {
    if !no_cuda_here() {
        eprintln!("libcuda is present here: skipped");
        return;
    }
    let e = Cuda::load().expect_err("no libcuda");
    let text = e.to_string();
    assert!(text.starts_with("no CUDA driver library"), "{text}");
    assert!(text.contains("libcuda.so"), "{text}");
    assert!(text.contains("Run without --use_cuda"), "{text}");
    assert!(e.is_setup());
    // The engine's error shows the same text (and is a set-up error for the CLI).
    let engine: Error = e.into();
    assert!(matches!(engine, Error::Gpu(_)));
    // The GPU layer's own error travels inside it, to be read back.
    assert!(matches!(
        &engine,
        Error::Gpu(g) if matches!(g.downcast_ref::<GpuError>(), Some(GpuError::NoDriverLibrary))
    ));
    assert_eq!(engine.to_string(), text);
}

#[test]
fn without_libcuda_the_selftest_stops_at_its_first_step() {
    if !no_cuda_here() {
        return;
    }
    let mut seen = Vec::new();
    let opts = SelftestOptions {
        gpu: GpuSelect::Index(0),
        bytes: 1 << 20,
        register_on: None,
        roots: roots("gpu-node"),
    };
    let (report, err) = selftest::run(&opts, &mut |s| seen.push(s.step.clone()));
    assert!(!report.ok);
    assert_eq!(seen, ["load"]);
    assert_eq!(report.steps.len(), 1);
    assert!(!report.steps[0].ok);
    assert!(matches!(err, Some(GpuError::NoDriverLibrary)));
}

#[test]
fn without_libcuda_gpus_lists_what_sysfs_shows_with_the_nearest_rails() {
    if !no_cuda_here() {
        return;
    }
    let (report, err) = gpus_report(&roots("gpu-node"));
    assert!(matches!(err, Some(GpuError::NoDriverLibrary)));
    assert!(report.cuda_driver.is_none());
    assert!(report
        .cuda_error
        .as_deref()
        .unwrap_or("")
        .contains("no CUDA driver library"));
    assert_eq!(report.gpus.len(), 8);
    for (i, g) in report.gpus.iter().enumerate() {
        assert_eq!(g.index, None);
        assert_eq!(g.dmabuf_supported, None);
        assert_eq!(g.numa_node, Some(if i < 4 { 0 } else { 1 }));
        let rails: Vec<(&str, &[String], Proximity)> = g
            .nearest_rails
            .iter()
            .map(|r| (r.device.as_str(), r.netdevs.as_slice(), r.proximity))
            .collect();
        let (a, b) = (format!("mlx5_{}", 2 * i), format!("mlx5_{}", 2 * i + 1));
        let (na, nb) = ([format!("rdma{}", 2 * i)], [format!("rdma{}", 2 * i + 1)]);
        assert_eq!(
            rails,
            [
                (a.as_str(), &na[..], Proximity::SameSwitch),
                (b.as_str(), &nb[..], Proximity::SameSwitch)
            ],
            "GPU {i}"
        );
    }
    assert_eq!(report.gpus[0].pci_bus_id, "0000:0f:00.0");
}

#[test]
fn use_cuda_and_cuda_mem_values() {
    assert_eq!(GpuSelect::parse("0"), Some(GpuSelect::Index(0)));
    assert_eq!(GpuSelect::parse(" 7 "), Some(GpuSelect::Index(7)));
    assert_eq!(GpuSelect::parse("AUTO"), Some(GpuSelect::Auto));
    assert_eq!(GpuSelect::parse("-1"), None);
    assert_eq!(GpuSelect::parse("gpu0"), None);
    assert_eq!(CudaMemPath::parse("dmabuf"), Some(CudaMemPath::Dmabuf));
    assert_eq!(CudaMemPath::parse("dma-buf"), Some(CudaMemPath::Dmabuf));
    assert_eq!(CudaMemPath::parse("peermem"), Some(CudaMemPath::Peermem));
    assert_eq!(CudaMemPath::parse("auto"), Some(CudaMemPath::Auto));
    assert_eq!(CudaMemPath::parse("host"), None);
    assert_eq!(MemoryKind::CudaDmabuf.as_str(), "cuda-dmabuf");
    assert_eq!(MemoryKind::CudaPeermem.as_str(), "cuda-peermem");
    assert_eq!(MemoryKind::Host.as_str(), "host");
}

#[test]
fn memory_requests_round_trip_and_default_to_host() {
    let r = MemoryRequest::Cuda {
        gpu: GpuSelect::BusId("0000:0f:00.0".into()),
        path: CudaMemPath::Dmabuf,
    };
    let j = serde_json::to_string(&r).expect("json");
    assert_eq!(
        j,
        r#"{"cuda":{"gpu":{"bus_id":"0000:0f:00.0"},"path":"dmabuf"}}"#
    );
    assert_eq!(serde_json::from_str::<MemoryRequest>(&j).expect("back"), r);
    assert!(MemoryRequest::default().is_host());
    assert_eq!(
        serde_json::to_string(&MemoryKind::CudaPeermem).expect("json"),
        r#""cuda-peermem""#
    );
}

#[test]
fn without_a_udmabuf_device_the_host_dmabuf_is_a_plain_memfd_and_says_so() {
    // The fixture has no dev/udmabuf.
    let (_fd, _memfd, source) = host_dmabuf(&roots("gpu-node"), 1 << 16).expect("memfd");
    match source {
        HostDmabufSource::Memfd { why } => assert!(why.contains("udmabuf"), "{why}"),
        other => panic!("expected a memfd, got {other:?}"),
    }
}

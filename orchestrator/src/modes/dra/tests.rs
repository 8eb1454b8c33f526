use super::*;
use k8s_openapi::api::resource::v1::{Device, ResourcePool, ResourceSliceSpec};

fn s(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(v.into()),
        ..DeviceAttribute::default()
    }
}

/// 4 roots, 2 NICs and 2 GPUs under each (BM.GPU.B4.8), as the test cluster publishes.
fn b48(node: &str) -> Vec<ResourceSlice> {
    let mut nics = Vec::new();
    let mut gpus = Vec::new();
    for i in 0..8 {
        let root = format!("pci0000:{:02x}", 0x0c + (i / 2) * 0x40);
        nics.push(Device {
            name: format!("nic{i}"),
            attributes: Some(BTreeMap::from([
                ("ifName".to_string(), s(&format!("eth{i}"))),
                (
                    "rdma".to_string(),
                    DeviceAttribute {
                        bool: Some(true),
                        ..DeviceAttribute::default()
                    },
                ),
                (PCIE_ROOT.to_string(), s(&root)),
            ])),
            ..Device::default()
        });
        gpus.push(Device {
            name: format!("gpu-{i}"),
            attributes: Some(BTreeMap::from([(PCIE_ROOT.to_string(), s(&root))])),
            ..Device::default()
        });
    }
    let slice = |driver: &str, devices| ResourceSlice {
        metadata: ObjectMeta::default(),
        spec: ResourceSliceSpec {
            driver: driver.into(),
            node_name: Some(node.into()),
            pool: ResourcePool {
                name: node.into(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(devices),
            ..ResourceSliceSpec::default()
        },
    };
    vec![slice("dra.net", nics), slice("gpu.nvidia.com", gpus)]
}

#[test]
fn the_claim_asks_for_rails_or_aligned_pairs() {
    let plain = claim_spec(&DraOptions {
        rails: Some(2),
        ..DraOptions::default()
    });
    let reqs = plain
        .devices
        .as_ref()
        .and_then(|d| d.requests.clone())
        .expect("requests");
    assert_eq!(reqs.len(), 1);
    let e = reqs[0].exactly.as_ref().expect("exactly");
    assert_eq!(
        (e.count, e.allocation_mode.as_deref()),
        (Some(2), Some("ExactCount"))
    );
    assert_eq!(e.device_class_name, "dranet");
    let all = claim_spec(&DraOptions::default());
    let e = all.devices.and_then(|d| d.requests).expect("requests")[0]
        .exactly
        .clone()
        .expect("exactly");
    assert_eq!((e.count, e.allocation_mode.as_deref()), (None, Some("All")));
    let aligned = claim_spec(&DraOptions {
        rails: Some(4),
        gpu_align: true,
        ..DraOptions::default()
    });
    let d = aligned.devices.expect("devices");
    assert_eq!(d.requests.as_ref().map(Vec::len), Some(8));
    let c = d.constraints.expect("constraints");
    assert_eq!(c.len(), 4);
    assert_eq!(
        c[3].requests,
        Some(vec!["rail-3".to_string(), "gpu-3".to_string()])
    );
    assert_eq!(c[3].match_attribute.as_deref(), Some(PCIE_ROOT));
}

#[test]
fn the_evaluator_reads_the_selectors_railsweep_writes() {
    let devs = node_devices(&b48("n1"), "n1");
    assert_eq!(devs.len(), 16);
    assert!(node_devices(&b48("n1"), "n2").is_empty());
    let nic = &devs[0];
    assert_eq!(cel_matches(DEFAULT_SELECTOR, nic), Some(true));
    assert_eq!(cel_matches("device.driver == 'dra.net'", nic), Some(true));
    assert_eq!(
        cel_matches("device.attributes[\"dra.net\"].ifName == \"eth1\"", nic),
        Some(false)
    );
    assert_eq!(
        cel_matches(
            "device.attributes[\"dra.net\"][\"rdma\"] && device.driver != \"x\"",
            nic
        ),
        Some(true)
    );
    assert_eq!(
        cel_matches("device.attributes[\"dra.net\"].rdma == true", &devs[8]),
        Some(false)
    );
    assert_eq!(cel_matches("size(device.attributes) > 2", nic), None);
}

#[test]
fn each_reason_a_claim_does_not_fit() {
    let devs = node_devices(&b48("n1"), "n1");
    let none = BTreeMap::new();
    let why = |o: DraOptions| why_unallocatable(&o, "n1", &devs, &none).join("\n");
    let w = why(DraOptions {
        rails: Some(9),
        ..DraOptions::default()
    });
    assert!(
        w.starts_with("not enough devices: node n1 publishes 8 that match"),
        "{w}"
    );
    assert!(w.contains("at most 8 with --dra-rails"), "{w}");
    let w = why(DraOptions {
        selector: "device.attributes[\"dra.net\"].ifName == \"ib0\"".into(),
        ..DraOptions::default()
    });
    assert!(
        w.contains("matched none of node n1's 8 devices of DeviceClass dranet"),
        "{w}"
    );
    let w = why(DraOptions {
        device_class: "mlx".into(),
        ..DraOptions::default()
    });
    assert!(
        w.starts_with("railsweep cannot evaluate DeviceClass mlx"),
        "{w}"
    );
    let w = why_unallocatable(&DraOptions::default(), "n2", &[], &none).join("");
    assert!(
        w.contains("publishes no device of DeviceClass dranet"),
        "{w}"
    );
    // 8 aligned pairs exist; with one GPU gone from each root, 4 do.
    let fewer: Vec<NodeDevice> = devs
        .iter()
        .filter(|d| !(d.driver == "gpu.nvidia.com" && d.name.ends_with(['1', '3', '5', '7'])))
        .cloned()
        .collect();
    let o = DraOptions {
        rails: Some(6),
        gpu_align: true,
        ..DraOptions::default()
    };
    let w = why_unallocatable(&o, "n1", &fewer, &none).join("");
    assert!(
        w.starts_with("the alignment constraint cannot be met: on node n1 only 4 rail(s)"),
        "{w}"
    );
    assert!(w.contains("pci0000:0c: 2 NIC(s), 1 GPU(s)"), "{w}");
    let w = why_unallocatable(&o, "n1", &devs, &none).join("");
    assert!(w.contains("other claims may hold them"), "{w}");
}

#[test]
fn each_rail_gets_the_gpu_of_its_own_request_keyed_by_its_interface() {
    use k8s_openapi::api::resource::v1::{
        AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult,
        ResourceClaimStatus,
    };
    let result = |request: &str, driver: &str, device: &str| DeviceRequestAllocationResult {
        request: request.into(),
        driver: driver.into(),
        pool: "n1".into(),
        device: device.into(),
        ..DeviceRequestAllocationResult::default()
    };
    // The scheduler's results, GPUs not in rail order: rail-1 has gpu-7 (root 0xcc).
    let claim = ResourceClaim {
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(vec![
                        result("rail-0", "dra.net", "nic0"),
                        result("gpu-1", "gpu.nvidia.com", "gpu-7"),
                        result("gpu-0", "gpu.nvidia.com", "gpu-1"),
                        result("rail-1", "dra.net", "nic6"),
                    ]),
                    ..DeviceAllocationResult::default()
                }),
                ..AllocationResult::default()
            }),
            ..ResourceClaimStatus::default()
        }),
        ..ResourceClaim::default()
    };
    let devs = node_devices(&b48("n1"), "n1");
    let rails = allocated_rails(&claim, &devs);
    assert_eq!(rails.len(), 2);
    assert_eq!(
        rails[1].to_string(),
        "rail-1 nic6 (eth6) pcieRoot pci0000:cc, GPU gpu-7 pcieRoot pci0000:cc"
    );
    let gpus = GpusByInterface::of(&rails);
    let gpu = |i: &str| {
        gpus.get(i)
            .map(|g| (g.device.as_str(), g.pcie_root.as_deref()))
    };
    assert_eq!(gpu("eth0"), Some(("gpu-1", Some("pci0000:0c"))));
    assert_eq!(gpu("eth6"), Some(("gpu-7", Some("pci0000:cc"))));
    assert_eq!(gpu("eth1"), None);
    // Without the node's devices (no right to list ResourceSlices) the interfaces are not
    // known: no rail can be matched to a row.
    assert!(GpusByInterface::of(&allocated_rails(&claim, &[])).is_empty());
}

use super::*;

/// Issue 56: the default image (busybox, pinned by digest) is pulled when the node lacks it, as
/// an image given with --image is; the pull secrets reach the spec.
#[test]
fn the_default_image_is_pulled_if_not_present_and_secrets_reach_the_spec() {
    let place = Placement {
        run: "r1".into(),
        client_node: None,
        server_node: None,
    };
    let default = pod_pair(Mode::HostNetwork, &PodOptions::default(), &place).expect("pair");
    let c = &default.server.spec.as_ref().expect("spec").containers[0];
    assert_eq!(c.image.as_deref(), Some(DEFAULT_IMAGE));
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
    let opts = PodOptions {
        image: "registry.example/rdmabw:1".into(),
        pull_policy: PullPolicy::IfNotPresent,
        pull_secrets: vec!["regcred".into()],
        ..PodOptions::default()
    };
    let pair = pod_pair(Mode::HostNetwork, &opts, &place).expect("pair");
    let spec = pair.client.spec.as_ref().expect("spec");
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    assert_eq!(
        spec.image_pull_secrets.as_ref().expect("secrets")[0].name,
        "regcred"
    );
}

fn opts() -> PodOptions {
    PodOptions {
        uverbs: (0..18).collect(),
        ipvlan: Attachment {
            networks: pattern::expand_pattern("rdma-ipvlan-{0..15}").expect("ok"),
            resources: ResourceSpec::parse_many("nvidia.com/hostdev=16").expect("ok"),
        },
        sriov: Attachment {
            networks: vec!["rdma-net".into()],
            resources: ResourceSpec::parse_many("openshift.io/mlxrdma=1").expect("ok"),
        },
        ..PodOptions::default()
    }
}

fn place() -> Placement {
    Placement {
        run: "20261129T101500Z".into(),
        client_node: Some("10.140.66.66".into()),
        server_node: Some("10.140.82.106".into()),
    }
}

#[test]
fn hostnetwork_is_privileged_on_the_node_network() {
    let p = pod_pair(Mode::HostNetwork, &opts(), &place()).expect("builds");
    let spec = p.server.spec.as_ref().expect("spec");
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    let sc = spec.containers[0].security_context.as_ref().expect("sc");
    assert_eq!(sc.privileged, Some(true));
    assert!(
        sc.capabilities.is_none(),
        "privileged has every capability already"
    );
    assert_eq!(
        p.server.metadata.name.as_deref(),
        Some("railsweep-20261129t101500z-hostnetwork-server")
    );
    let client = p.client.spec.as_ref().expect("spec");
    assert_eq!(
        client
            .node_selector
            .as_ref()
            .and_then(|s| s.get("kubernetes.io/hostname"))
            .map(String::as_str),
        Some("10.140.66.66")
    );
    assert_eq!(security::required_level(&p.server).0, Level::Privileged);
}

#[test]
fn crio_lists_each_device_and_is_not_privileged() {
    let p = pod_pair(Mode::HostNetworkCrio, &opts(), &place()).expect("builds");
    let ann = p.client.metadata.annotations.as_ref().expect("annotations");
    let devices = &ann[CRIO_DEVICES_ANNOTATION];
    assert!(devices.starts_with("/dev/infiniband/uverbs0,/dev/infiniband/uverbs1,"));
    assert!(devices.ends_with(",/dev/infiniband/uverbs17,/dev/infiniband/rdma_cm"));
    assert_eq!(
        devices.split(',').count(),
        19,
        "18 uverbs devices and rdma_cm, as in the field report"
    );
    let spec = p.client.spec.as_ref().expect("spec");
    assert_eq!(spec.runtime_class_name.as_deref(), Some("runc-nohostdev"));
    let sc = spec.containers[0].security_context.as_ref().expect("sc");
    assert_eq!(sc.privileged, None);
    assert_eq!(
        sc.capabilities.as_ref().and_then(|c| c.add.clone()),
        Some(vec!["IPC_LOCK".to_string()])
    );
    let no_uverbs = PodOptions {
        uverbs: vec![],
        ..opts()
    };
    assert!(matches!(
        pod_pair(Mode::HostNetworkCrio, &no_uverbs, &place()),
        Err(ModeError::Missing {
            option: "--uverbs",
            ..
        })
    ));
}

#[test]
fn every_unprivileged_mode_drops_all_capabilities_but_ipc_lock() {
    for mode in [Mode::HostNetworkCrio, Mode::Ipvlan, Mode::Sriov, Mode::Dra] {
        for ipc_lock in [true, false] {
            let o = PodOptions { ipc_lock, ..opts() };
            let p = pod_pair(mode, &o, &place()).expect("builds");
            for pod in [&p.client, &p.server] {
                let sc = pod.spec.as_ref().expect("spec").containers[0]
                    .security_context
                    .as_ref()
                    .expect("a security context");
                assert_eq!(sc.privileged, None, "{mode}");
                assert_eq!(sc.allow_privilege_escalation, Some(false), "{mode}");
                let caps = sc.capabilities.as_ref().expect("capabilities");
                assert_eq!(caps.drop, Some(vec!["ALL".to_string()]), "{mode}");
                let want = ipc_lock.then(|| vec!["IPC_LOCK".to_string()]);
                assert_eq!(caps.add, want, "{mode}, ipc_lock {ipc_lock}");
            }
        }
    }
}

#[test]
fn ipvlan_without_ipc_lock_passes_baseline() {
    let with = pod_pair(Mode::Ipvlan, &opts(), &place()).expect("builds");
    let (level, why) = security::required_level(&with.server);
    assert_eq!(level, Level::Privileged);
    assert_eq!(
            why,
            ["non-default capabilities (container \"rdmabw\" must not include \"IPC_LOCK\" in securityContext.capabilities.add)"]
        );
    let without = pod_pair(
        Mode::Ipvlan,
        &PodOptions {
            ipc_lock: false,
            ..opts()
        },
        &place(),
    )
    .expect("builds");
    assert_eq!(
        security::required_level(&without.server),
        (Level::Baseline, vec![])
    );
    let ann = without
        .server
        .metadata
        .annotations
        .as_ref()
        .expect("annotations");
    assert!(ann[NETWORKS_ANNOTATION].starts_with("rdma-ipvlan-0,rdma-ipvlan-1,"));
    let limits = without.server.spec.as_ref().expect("spec").containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.limits.clone())
        .expect("limits");
    assert_eq!(limits["nvidia.com/hostdev"], Quantity("16".into()));
}

#[test]
fn attachment_modes_need_networks_and_resources() {
    let none = PodOptions::default();
    for mode in [Mode::Ipvlan, Mode::Sriov] {
        let err = pod_pair(mode, &none, &place()).expect_err("refused");
        assert!(err.to_string().contains("--networks"), "{err}");
    }
    let nets_only = PodOptions {
        sriov: Attachment {
            networks: vec!["rdma-net".into()],
            resources: vec![],
        },
        ..PodOptions::default()
    };
    let err = pod_pair(Mode::Sriov, &nets_only, &place()).expect_err("refused");
    assert!(err.to_string().contains("--rdma-resource"), "{err}");
}

#[test]
fn fleet_pods_one_per_node_in_order() {
    let nodes: Vec<String> = ["node-b", "node-a", "10.140.66.66"]
        .map(String::from)
        .to_vec();
    let names = |pods: &[Pod]| -> Vec<String> {
        pods.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    let pods = fleet_pods(Mode::Sriov, &opts(), "f1", &nodes).expect("builds");
    assert_eq!(
        names(&pods),
        [
            "railsweep-f1-sriov-node-b",
            "railsweep-f1-sriov-node-a",
            "railsweep-f1-sriov-10.140.66.66"
        ]
    );
    for (p, n) in pods.iter().zip(&nodes) {
        let spec = p.spec.as_ref().expect("spec");
        assert_eq!(
            spec.node_selector
                .as_ref()
                .and_then(|s| s.get("kubernetes.io/hostname")),
            Some(n)
        );
        assert!(
            spec.containers[0].ports.is_some(),
            "every fleet pod serves in some pair"
        );
        assert_eq!(
            p.metadata.labels.as_ref().expect("labels")[labels::COMPONENT],
            FLEET_COMPONENT
        );
    }
    // Names that cannot be part of a pod name, or that would collide, become indexes.
    let odd: Vec<String> = ["Node_A", &"n".repeat(60)].map(String::from).to_vec();
    let pods = fleet_pods(Mode::HostNetwork, &opts(), "f1", &odd).expect("builds");
    assert_eq!(
        names(&pods),
        ["railsweep-f1-hostnetwork-0", "railsweep-f1-hostnetwork-1"]
    );
    assert!(fleet_pods(Mode::Ipvlan, &PodOptions::default(), "f1", &nodes).is_err());
}

#[test]
fn names_and_selectors() {
    assert!(run_label("Bad_Run").is_err());
    assert_eq!(
        run_label("20261129T101500Z").expect("ok"),
        "20261129t101500z"
    );
    let longest = pod_name(&"x".repeat(28), Mode::HostNetworkCrio, Role::Server);
    assert!(longest.len() <= 63, "{}", longest.len());
    assert_eq!(
        selector(Some("r1")),
        "app.kubernetes.io/managed-by=railsweep,app.kubernetes.io/instance=r1"
    );
    assert_eq!("sriov".parse::<Mode>().expect("ok"), Mode::Sriov);
    assert!("pods".parse::<Mode>().is_err());
}

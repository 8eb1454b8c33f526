//! `rdmabw rails` and `rdmabw probe` as a user runs them: the built binary on bench-core's
//! fixture trees (`--root`), its exit statuses and its two output forms.

use results::rdmabw::rails::{Attachment, Capability, RailsReport};

#[path = "support/cli.rs"]
mod cli;
use cli::{fixture, rdmabw, text};

#[test]
fn rails_json_is_the_report_railsweep_reads() {
    let root = fixture("rails-ipvlan/pod2");
    let out = rdmabw(&["rails", "--json", "--root", &root.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let r: RailsReport = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(r.rails.len(), 16);
    assert!(r
        .rails
        .iter()
        .all(|x| x.gid_index == Some(7) && x.attachment == Attachment::Ipvlan && x.usable));
    // What this build can do, announced for railsweep to read (not guessed from errors).
    assert_eq!(r.capabilities, Capability::OURS);
}

#[test]
fn rails_table_reads_with_awk_and_lists_what_is_not_a_rail() {
    let root = fixture("rails-hostnet");
    let out = rdmabw(&["rails", "--root", &root.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    let lines: Vec<&str> = t.lines().collect();
    // The header is a contract: scripts pick columns by these names.
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>().join(" "),
        "RAIL IFACE IPV4 DEVICE PORT GID_INDEX STATE GBPS MTU PCI NUMA GPUS ATTACHMENT USABLE"
    );
    let row0: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row0,
        vec![
            "0",
            "rdma0",
            "10.224.0.1",
            "mlx5_5",
            "1",
            "3",
            "ACTIVE",
            "100",
            "4096",
            "0000:0c:00.0",
            "3",
            "0000:0f:00.0,0000:15:00.0",
            "host_network",
            "yes"
        ]
    );
    assert!(t.contains("NOT A RAIL"), "{t}");
    assert!(t.contains("mlx5_0") && t.contains("front-end NIC"), "{t}");
    // Machine output on stdout only.
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(rdmabw(&["rails", "--bogus"]).status.code(), Some(2));
    assert_eq!(rdmabw(&["probe", "--bogus"]).status.code(), Some(2));
}

#[test]
fn probe_prints_twelve_checks_and_exits_1_on_a_fail_0_otherwise() {
    // This machine's own view: whatever it is, the exit status follows the FAIL count.
    let out = rdmabw(&["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    let checks = v["checks"].as_array().cloned().unwrap_or_default();
    assert_eq!(checks.len(), 12);
    let fails = checks.iter().filter(|c| c["status"] == "FAIL").count();
    assert_eq!(out.status.code(), Some(if fails > 0 { 1 } else { 0 }));
    let table = rdmabw(&["probe"]);
    let t = text(&table.stdout);
    for c in &checks {
        assert!(t.contains(c["name"].as_str().unwrap_or("?")), "{t}");
    }
    assert!(t.contains("12 checks"), "{t}");
}

/// Field report 001's split node: `rails --json` carries each GPU of the pod with the rails
/// near it (what railsweep reads), and the table says which GPUs have none, with the fix.
#[test]
fn rails_says_which_gpus_have_no_rail_under_their_pcie_root() {
    let root = fixture("rails-split/unaligned");
    let out = rdmabw(&["rails", "--json", "--root", &root.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let r: RailsReport = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    let un: Vec<(&str, Option<&str>)> = r
        .unaligned_gpus()
        .map(|g| (g.pci.as_str(), g.pcie_root.as_deref()))
        .collect();
    assert_eq!(
        un,
        [
            ("0000:8c:00.0", Some("pci0000:80")),
            ("0000:91:00.0", Some("pci0000:80"))
        ]
    );
    assert_eq!(r.gpus.len(), 4);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(v["gpus"][2]["rails"], serde_json::json!([]));
    assert_eq!(
        v["gpus"][0]["rails"],
        serde_json::json!(["net5", "net6", "net7"])
    );

    let out = rdmabw(&["rails", "--root", &root.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    let lines: Vec<&str> = t
        .lines()
        .filter(|l| l.contains("NCCL will not use GPUDirect RDMA"))
        .collect();
    assert_eq!(lines.len(), 2, "{t}");
    assert!(
        lines[0].starts_with("GPU 0000:8c:00.0 (nvidia4, PCIe root pci0000:80, NUMA 7)"),
        "{t}"
    );
    assert!(lines[1].starts_with("GPU 0000:91:00.0 (nvidia5"), "{t}");
    for l in &lines {
        assert!(
            l.contains("Topology Manager policy restricted")
                && l.contains("resource.kubernetes.io/pcieRoot"),
            "{l}"
        );
    }
    // Aligned: no such line, and the JSON says each GPU's rails.
    let ok = fixture("rails-split/aligned");
    let out = rdmabw(&["rails", "--root", &ok.to_string_lossy()]);
    assert!(
        !text(&out.stdout).contains("GPUDirect"),
        "{}",
        text(&out.stdout)
    );
    let out = rdmabw(&["rails", "--json", "--root", &ok.to_string_lossy()]);
    let r: RailsReport = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(r.gpus.len(), 4);
    assert_eq!(r.unaligned_gpus().count(), 0);
}

//! `rdmabw rails`: one row per rail of this network namespace (see `bench_core::rails`).

use anyhow::{Context, Result};
use bench_core::rails::{self, PortQuery, SysfsOnly, VerbsQuery};
use comfy_table::{presets, Table};
use results::rdmabw::rails::{Attachment, RailRow, RailsReport};

use crate::cli::RailsCmd;
use crate::exit::Exit;
use crate::stdout;

fn dash<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".to_string())
}

fn rate(r: &RailRow) -> String {
    match r.rate_gbps {
        Some(g) if g.fract() == 0.0 => format!("{g:.0}"),
        Some(g) => format!("{g}"),
        None => "-".into(),
    }
}

/// The attachment as `--json` spells it.
fn attachment(a: Attachment) -> &'static str {
    match a {
        Attachment::HostNetwork => "host_network",
        Attachment::Ipvlan => "ipvlan",
        Attachment::Sriov => "sriov",
        Attachment::Software => "software",
        Attachment::Unknown => "unknown",
    }
}

/// The table: one line per rail, fields separated by spaces (`awk '$2 == "net3"'` works), the
/// reason last; then one line per GPU of this container with no rail near it (NCCL will not
/// use GPUDirect RDMA for it), with the fix; then the devices that are not rails.
pub fn render(r: &RailsReport) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(vec![
        "RAIL",
        "IFACE",
        "IPV4",
        "DEVICE",
        "PORT",
        "GID_INDEX",
        "STATE",
        "GBPS",
        "MTU",
        "PCI",
        "NUMA",
        "GPUS",
        "ATTACHMENT",
        "USABLE",
    ]);
    for row in &r.rails {
        t.add_row(vec![
            row.rail.to_string(),
            row.iface.clone(),
            dash(row.ipv4.as_deref()),
            dash(row.device.as_deref()),
            dash(row.port),
            dash(row.gid_index),
            dash(row.state.as_deref()),
            rate(row),
            dash(row.active_mtu_bytes),
            dash(row.pci.as_deref()),
            dash(row.numa_node),
            if row.gpus.is_empty() {
                "-".into()
            } else {
                row.gpus.join(",")
            },
            attachment(row.attachment).to_string(),
            match (&row.usable, &row.reason) {
                (true, _) => "yes".to_string(),
                (false, Some(why)) => format!("no: {why}"),
                (false, None) => "no".to_string(),
            },
        ]);
    }
    let mut s = String::new();
    if r.rails.is_empty() {
        s.push_str("no rails (no rdmaN or netN interface, and no RDMA interface with an address) in this network namespace\n");
    } else {
        s.push_str(&t.trim_fmt());
        s.push('\n');
    }
    // One line per GPU of this container that no rail of this pod is near, with the fix.
    let unaligned: Vec<String> = r
        .unaligned_gpus()
        .map(rails::gpus::unaligned_line)
        .collect();
    if !unaligned.is_empty() {
        s.push('\n');
        for line in unaligned {
            s.push_str(&line);
            s.push('\n');
        }
    }
    if !r.not_rails.is_empty() {
        let mut n = Table::new();
        n.load_preset(presets::NOTHING);
        n.set_header(vec!["NOT A RAIL", "WHY"]);
        for x in &r.not_rails {
            n.add_row(vec![x.name.clone(), x.reason.clone()]);
        }
        s.push('\n');
        s.push_str(&n.trim_fmt());
        s.push('\n');
    }
    s
}

/// Collects the report.
pub fn collect(cmd: &RailsCmd) -> Result<RailsReport> {
    let roots = crate::config::sys_roots(cmd.root.as_deref())?;
    let verbs = VerbsQuery::new(&roots);
    let ports: &dyn PortQuery = if cmd.no_verbs || cmd.root.is_some() {
        &SysfsOnly
    } else {
        &verbs
    };
    rails::discover(&roots, ports).context("listing the rails")
}

/// Runs `rdmabw rails`: it lists the rails whatever their state (an unreadable sysfs is a
/// set-up error).
pub fn run(cmd: &RailsCmd) -> Result<Exit> {
    stdout::listing(cmd.json, &collect(cmd)?, render)?;
    Ok(Exit::Ok)
}

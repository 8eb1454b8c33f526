//! `rdmabw devices`: every RDMA device and port as this network namespace sees it.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use bench_core::gid::GidType;
use bench_core::rails::{PortQuery, VerbsQuery};
use bench_core::sysfs::{Inventory, LinkLayer};
use serde::Serialize;

/// One GID table entry as listed.
#[derive(Debug, Serialize)]
pub struct GidRow {
    pub index: u32,
    pub gid: String,
    #[serde(rename = "type")]
    pub gid_type: Option<String>,
    pub netdev: Option<String>,
    pub ip: Option<String>,
    /// Whether a test in this namespace can use it.
    pub usable_here: bool,
    /// Why not, or `default` for the GID rdmabw picks without -x.
    pub note: Option<String>,
}

/// One port as listed.
#[derive(Debug, Serialize)]
pub struct PortRow {
    pub device: String,
    pub port: u8,
    pub state: Option<String>,
    pub phys_state: Option<String>,
    pub link_layer: Option<String>,
    pub rate: Option<String>,
    pub line_rate_gbps: Option<f64>,
    pub active_mtu_bytes: Option<u32>,
    pub netdevs_here: Vec<String>,
    pub gids: Vec<GidRow>,
}

/// What `rdmabw devices --json` prints.
#[derive(Debug, Serialize)]
pub struct DevicesReport {
    pub rdmabw_version: String,
    pub ports: Vec<PortRow>,
    /// Why the active MTU is missing, when libibverbs could not open the devices.
    pub verbs_error: Option<String>,
}

/// Collects the listing: of this host, or with `root` of the tree under it (a fixture, a copy
/// of a pod's view), whose devices are not opened (the active MTU is unknown).
pub fn collect(root: Option<&Path>) -> Result<DevicesReport> {
    let roots = crate::config::sys_roots(root)?;
    // Each device opened once, for its GID table and its ports' active MTU; under `root`, none.
    let verbs = root.is_none().then(|| VerbsQuery::new(&roots));
    let inv: Inventory = match &verbs {
        Some(v) => bench_core::rails::inventory_with(&roots, v),
        None => bench_core::rails::inventory(&roots),
    }
    .context("listing the RDMA devices")?;
    let mut ports = Vec::new();
    for d in &inv.devices {
        for p in &d.ports {
            let ethernet = !matches!(p.link_layer, Some(LinkLayer::InfiniBand));
            let default = p
                .gids
                .iter()
                .find(|g| {
                    g.netdev_here
                        && g.gid_type == Some(GidType::RoceV2)
                        && g.gid.ipv4_mapped().is_some()
                })
                .map(|g| g.index);
            let gids = p
                .gids
                .iter()
                .filter(|g| !g.gid.is_zero())
                .map(|g| {
                    let usable = !ethernet || g.netdev_here;
                    let note = if !usable {
                        Some(match &g.netdev {
                            Some(n) => format!("not usable here: {n} is another namespace's"),
                            None => "not usable here: another namespace's".to_string(),
                        })
                    } else if Some(g.index) == default && ethernet {
                        Some("default".to_string())
                    } else {
                        None
                    };
                    GidRow {
                        index: g.index,
                        gid: g.gid.to_string(),
                        gid_type: g.gid_type.as_ref().map(ToString::to_string),
                        netdev: g.netdev.clone(),
                        ip: g.ip().map(|a| a.to_string()),
                        usable_here: usable,
                        note,
                    }
                })
                .collect();
            ports.push(PortRow {
                device: d.name.clone(),
                port: p.num,
                state: p.state.as_ref().map(|s| s.name().to_string()),
                phys_state: p.phys_state.clone(),
                link_layer: p.link_layer.as_ref().map(|l| match l {
                    LinkLayer::InfiniBand => "InfiniBand".to_string(),
                    LinkLayer::Ethernet => "Ethernet".to_string(),
                    LinkLayer::Other(s) => s.clone(),
                }),
                rate: p.rate.clone(),
                line_rate_gbps: p.line_rate_gbps,
                active_mtu_bytes: verbs.as_ref().and_then(|v| v.active_mtu(&d.name, p.num)),
                netdevs_here: p.netdevs_here(),
                gids,
            });
        }
    }
    Ok(DevicesReport {
        rdmabw_version: results::VERSION.to_string(),
        ports,
        verbs_error: verbs.as_ref().and_then(VerbsQuery::open_error),
    })
}

/// The human listing.
pub fn render(r: &DevicesReport) -> String {
    let mut s = String::new();
    if r.ports.is_empty() {
        s.push_str("no RDMA devices (/sys/class/infiniband is empty or missing)\n");
    }
    for p in &r.ports {
        let _ = writeln!(
            s,
            "{} port {}: {} ({}), {}, {}, MTU {}{}",
            p.device,
            p.port,
            p.state.as_deref().unwrap_or("state unknown"),
            p.phys_state.as_deref().unwrap_or("?"),
            p.link_layer.as_deref().unwrap_or("link layer unknown"),
            p.rate.as_deref().unwrap_or("rate unknown"),
            p.active_mtu_bytes
                .map(|m| m.to_string())
                .unwrap_or_else(|| "?".into()),
            if p.netdevs_here.is_empty() {
                ", no interface in this namespace".to_string()
            } else {
                format!(", here: {}", p.netdevs_here.join(" "))
            }
        );
        if p.gids.is_empty() {
            let _ = writeln!(s, "    (no GIDs)");
            continue;
        }
        let mut gid_line = |index: &dyn std::fmt::Display, cols: [&str; 5]| {
            let [gid, ty, netdev, ip, note] = cols;
            let _ = writeln!(
                s,
                "    {index:>5}  {gid:<39}  {ty:<10}  {netdev:<10}  {ip:<25}  {note}"
            );
        };
        gid_line(&"INDEX", ["GID", "TYPE", "NETDEV", "IP", "NOTE"]);
        for g in &p.gids {
            gid_line(
                &g.index,
                [
                    &g.gid,
                    g.gid_type.as_deref().unwrap_or("-"),
                    g.netdev.as_deref().unwrap_or("-"),
                    g.ip.as_deref().unwrap_or("-"),
                    g.note.as_deref().unwrap_or(""),
                ],
            );
        }
    }
    if let Some(e) = &r.verbs_error {
        let _ = writeln!(s, "active MTU unknown: {e}");
    }
    s
}

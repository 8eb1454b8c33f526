//! `rdmabw counters`: every counter of one rail as it stands (the RDMA port's, the driver's
//! hardware counters, the netdev's statistics and ethtool statistics), and the `-W` table of
//! their deltas after a test.

use anyhow::{Context, Result};
use bench_core::counters::{CounterTarget, Snapshot};
use bench_core::sysfs::SysRoots;
use comfy_table::{presets, Table};
use results::rdmabw::counters::{
    CounterDelta, CounterReport, CounterSource, CounterValue, CountersReport, Finding,
};
use results::rdmabw::REPORT_SCHEMA_VERSION;

use crate::cli::CountersCmd;
use crate::exit::{Exit, Usage};
use crate::stdout;

/// Resolves the device, port and interface the flags name.
fn target(cmd: &CountersCmd, roots: &SysRoots) -> Result<CounterTarget> {
    let inv = bench_core::rails::inventory(roots).context("listing the RDMA devices")?;
    let (device, port) = match (&cmd.ib_dev, &cmd.netdev) {
        (Some(d), _) => (d.clone(), cmd.ib_port.unwrap_or(1)),
        (None, Some(n)) => {
            let (d, p) = inv
                .port_for_netdev(roots, n)
                .map_err(|e| Usage(format!("--netdev {n}: {e}")))?;
            (d, cmd.ib_port.unwrap_or(p))
        }
        (None, None) => {
            return Err(Usage(format!(
                "name the rail: -d DEV (devices: {}) or --netdev IF",
                inv.device_names().join(", ")
            ))
            .into())
        }
    };
    let Some(dev) = inv.device(&device) else {
        return Err(Usage(format!(
            "-d {device}: no such RDMA device here (devices: {})",
            inv.device_names().join(", ")
        ))
        .into());
    };
    let Some(p) = dev.port(port) else {
        return Err(Usage(format!("-i {port}: {device} has no port {port}")).into());
    };
    let netdev = cmd
        .netdev
        .clone()
        .or_else(|| p.netdevs_here().into_iter().next());
    Ok(CounterTarget::new(device, port, netdev))
}

/// Runs `rdmabw counters`.
pub fn run(cmd: &CountersCmd) -> Result<Exit> {
    let roots = crate::config::sys_roots(cmd.root.as_deref())?;
    let t = target(cmd, &roots)?;
    let snap = Snapshot::read(&roots, &t);
    let report = CountersReport {
        schema_version: REPORT_SCHEMA_VERSION,
        device: t.device.clone(),
        port: t.port,
        netdev: t.netdev.clone(),
        read_ms: snap.read_ms(),
        counters: snap
            .values()
            .map(|(source, name, value, unit)| CounterValue {
                source,
                name: name.to_string(),
                value,
                unit,
            })
            .collect(),
    };
    stdout::listing(cmd.json, &report, render)?;
    Ok(Exit::Ok)
}

fn render(r: &CountersReport) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(vec!["SOURCE", "COUNTER", "VALUE"]);
    for c in &r.counters {
        t.add_row(vec![
            c.source.as_str().to_string(),
            c.name.clone(),
            c.value.to_string(),
        ]);
    }
    format!(
        "{} port {}{}: {} counters\n{}\n",
        r.device,
        r.port,
        r.netdev
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default(),
        r.counters.len(),
        t.trim_fmt()
    )
}

/// The `-W` table: each side's counters that moved, after the result table.
pub fn deltas_table(reports: &[CounterReport], names: &[String]) -> String {
    // ib_write_bw -W names `counters/NAME` (the port's) or `hw_counters/NAME` (the driver's);
    // a bare name matches any source; no name, every counter that moved.
    let wanted = |d: &CounterDelta| {
        names.is_empty()
            || names.iter().any(|n| match n.split_once('/') {
                Some(("counters", name)) => d.source == CounterSource::Port && d.name == name,
                Some(("hw_counters", name)) => d.source == CounterSource::Hw && d.name == name,
                Some((_, name)) => d.name == name,
                None => d.name == *n,
            })
    };
    let mut s = String::new();
    for r in reports {
        let moved = r.moved().count();
        let shown: Vec<_> = r
            .deltas
            .iter()
            .filter(|d| d.delta > 0 && wanted(d))
            .collect();
        s.push_str(&format!(
            " Counters of the {} ({} port {}{}), {:.2} s around the window: {} of {} moved\n",
            r.role.as_str(),
            r.device,
            r.port,
            r.netdev
                .as_ref()
                .map(|n| format!(", {n}"))
                .unwrap_or_default(),
            r.span_s,
            moved,
            r.counters_read
        ));
        for d in shown {
            s.push_str(&format!(
                "   {:<7} {:<40} {}\n",
                d.source.as_str(),
                d.name,
                d.delta
            ));
        }
    }
    s
}

/// The findings as stderr shows them: one line each, the advice under it.
pub fn findings_text(findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| {
            format!(
                "rdmabw: finding {}: {}\n  what to do: {}\n",
                f.finding.word(),
                f.summary,
                f.what_to_do
            )
        })
        .collect()
}

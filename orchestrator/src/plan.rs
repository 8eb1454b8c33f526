//! Which rails a sweep measures: `--rails` lists, and the pairing of two pods' rail tables by
//! rail number.

use std::collections::BTreeSet;

use results::rdmabw::rails::{RailRow, RailsReport};
use results::Cause;

/// Parse `0,3,5-7` into the sorted, deduplicated rail numbers.
pub fn parse_rail_list(s: &str) -> Result<Vec<u32>, String> {
    let mut set = BTreeSet::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!("empty item in rail list `{s}`"));
        }
        let num = |t: &str| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{t}` is not a rail number (in `{s}`)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("range `{part}` runs backwards"));
                }
                if b - a > 4096 {
                    return Err(format!("range `{part}` is too long"));
                }
                set.extend(a..=b);
            }
            None => {
                set.insert(num(part)?);
            }
        }
    }
    Ok(set.into_iter().collect())
}

/// One rail as both pods see it.
#[derive(Debug, Clone, PartialEq)]
pub struct RailPair {
    /// Rail number.
    pub rail: u32,
    /// The client pod's view, if it has this rail.
    pub client: Option<RailRow>,
    /// The server pod's view, if it has this rail.
    pub server: Option<RailRow>,
}

impl RailPair {
    /// Why this rail cannot be measured, if it cannot: a side without the rail, a rail that is
    /// not usable there (port down, no GID...), a server rail without an IPv4 address.
    pub fn problem(&self, client_pod: &str, server_pod: &str) -> Option<(String, Cause)> {
        let side = |row: &Option<RailRow>, pod: &str| -> Option<(String, Cause)> {
            let Some(r) = row else {
                return Some((
                    format!("pod {pod} has no rail {}", self.rail),
                    Cause::RailMissing { pod: pod.into() },
                ));
            };
            if !r.usable {
                return Some((
                    format!(
                        "rail {} in pod {pod} ({}, {}) is not usable: {}",
                        self.rail,
                        r.iface,
                        r.device.as_deref().unwrap_or("no RDMA device"),
                        r.reason.as_deref().unwrap_or("no reason given")
                    ),
                    Cause::RailUnusable { pod: pod.into() },
                ));
            }
            None
        };
        let mut problems: Vec<(String, Cause)> = [
            side(&self.client, client_pod),
            side(&self.server, server_pod),
        ]
        .into_iter()
        .flatten()
        .collect();
        if problems.is_empty() {
            if let Some(s) = &self.server {
                if s.ipv4.is_none() {
                    problems.push((
                        format!(
                            "rail {} in pod {server_pod} ({}) has no IPv4 address to connect to",
                            self.rail, s.iface
                        ),
                        Cause::RailUnusable {
                            pod: server_pod.into(),
                        },
                    ));
                }
            }
        }
        let cause = problems.first()?.1.clone();
        let words: Vec<String> = problems.into_iter().map(|(w, _)| w).collect();
        Some((words.join("; "), cause))
    }
}

/// A pod's GPUs with no rail of the pod near them (`rdmabw rails`' `gpus`), as a row's
/// `client_gpus_without_rail`: their PCI addresses, comma-separated; `None` when there is none.
pub fn gpus_without_rail(rails: &RailsReport) -> Option<String> {
    let pci: Vec<&str> = rails.unaligned_gpus().map(|g| g.pci.as_str()).collect();
    (!pci.is_empty()).then(|| pci.join(","))
}

/// Pair two rail tables by rail number: every rail either side has (or only the `select`ed
/// ones, which are listed even when neither pod has them, so that a typo shows as a failed
/// rail rather than silence).
pub fn pair_rails(
    client: &RailsReport,
    server: &RailsReport,
    select: Option<&[u32]>,
) -> Vec<RailPair> {
    let numbers: BTreeSet<u32> = match select {
        Some(list) => list.iter().copied().collect(),
        None => client
            .rails
            .iter()
            .chain(&server.rails)
            .map(|r| r.rail)
            .collect(),
    };
    let find = |rep: &RailsReport, n: u32| rep.rails.iter().find(|r| r.rail == n).cloned();
    numbers
        .into_iter()
        .map(|rail| RailPair {
            rail,
            client: find(client, rail),
            server: find(server, rail),
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use results::rdmabw::rails::Attachment;

    pub(crate) fn row(rail: u32, iface: &str, dev: &str, ip: &str) -> RailRow {
        RailRow {
            rail,
            iface: iface.into(),
            ipv4: Some(ip.into()),
            device: Some(dev.into()),
            port: Some(1),
            gid_index: Some(1),
            state: Some("ACTIVE".into()),
            link_layer: Some("Ethernet".into()),
            rate_gbps: Some(100.0),
            active_mtu_bytes: Some(4096),
            pci: None,
            numa_node: None,
            gpus: vec![],
            attachment: Attachment::Sriov,
            usable: true,
            reason: None,
            operstate: None,
        }
    }

    pub(crate) fn report(host: &str, rows: Vec<RailRow>) -> RailsReport {
        RailsReport {
            schema_version: 1,
            rdmabw_version: "0.1.0".into(),
            capabilities: results::rdmabw::rails::Capability::OURS.to_vec(),
            host: host.into(),
            rails: rows,
            not_rails: vec![],
            gpus: vec![],
        }
    }

    #[test]
    fn a_pods_gpus_without_a_rail_are_named_for_its_rows() {
        use results::rdmabw::rails::GpuRails;
        let gpu = |pci: &str, rails: &[&str]| GpuRails {
            pci: pci.into(),
            node_index: 0,
            device_file: "nvidia0".into(),
            pcie_root: Some("pci0000:80".into()),
            numa_node: None,
            rails: rails.iter().map(|r| r.to_string()).collect(),
        };
        let mut r = report("a", vec![]);
        assert_eq!(gpus_without_rail(&r), None, "no GPU");
        r.gpus = vec![
            gpu("0000:8c:00.0", &["net1"]),
            gpu("0000:8d:00.0", &["net2"]),
        ];
        assert_eq!(gpus_without_rail(&r), None, "aligned");
        r.gpus.push(gpu("0000:ac:00.0", &[]));
        r.gpus.push(gpu("0000:ad:00.0", &[]));
        assert_eq!(
            gpus_without_rail(&r).as_deref(),
            Some("0000:ac:00.0,0000:ad:00.0")
        );
    }

    #[test]
    fn rail_lists() {
        assert_eq!(parse_rail_list("0,3,5-7"), Ok(vec![0, 3, 5, 6, 7]));
        assert_eq!(parse_rail_list(" 2 , 1,1 "), Ok(vec![1, 2]));
        assert!(parse_rail_list("3-1").is_err());
        assert!(parse_rail_list("a").is_err());
        assert!(parse_rail_list("1,,2").is_err());
    }

    #[test]
    fn pairs_by_rail_number_and_names_what_is_missing() {
        let a = report(
            "podA",
            vec![
                row(0, "net1", "mlx5_0", "10.0.0.1"),
                row(1, "net2", "mlx5_1", "10.0.1.1"),
            ],
        );
        let mut down = row(1, "net2", "mlx5_5", "10.0.1.2");
        down.usable = false;
        down.reason = Some("port state DOWN".into());
        let b = report(
            "podB",
            vec![
                row(0, "net1", "mlx5_4", "10.0.0.2"),
                down,
                row(2, "net3", "mlx5_6", "10.0.2.2"),
            ],
        );
        let pairs = pair_rails(&a, &b, None);
        assert_eq!(
            pairs.iter().map(|p| p.rail).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(pairs[0].problem("podA", "podB"), None);
        let (p1, c1) = pairs[1].problem("podA", "podB").expect("down");
        assert!(
            p1.contains("port state DOWN") && p1.contains("podB"),
            "{p1}"
        );
        assert_eq!(c1, Cause::RailUnusable { pod: "podB".into() });
        let (p2, c2) = pairs[2].problem("podA", "podB").expect("missing");
        assert_eq!(p2, "pod podA has no rail 2");
        assert_eq!(c2, Cause::RailMissing { pod: "podA".into() });

        let sel = pair_rails(&a, &b, Some(&[0, 9]));
        assert_eq!(sel.len(), 2);
        assert!(sel[1]
            .problem("podA", "podB")
            .expect("absent")
            .0
            .contains("no rail 9"));
    }
}

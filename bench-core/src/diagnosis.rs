//! Findings from the counter deltas of a test: which counters moved, what that means for the
//! rail, and what to do. The figures a finding needs are in [`THRESHOLDS`], each with its
//! reason; a counter the driver does not have is simply not evidence.

use wire::counters::{CounterReport, CounterSource, CounterUnit, Evidence, Finding, FindingKind};

/// The figures at which counters become a finding.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// Loss events (sequence errors, retransmissions, timeouts, PHY discards) over the window.
    /// One: a reliable connection on a healthy fabric retransmits nothing, so a single
    /// sequence error is a lost (or reordered) packet.
    pub loss_events: u64,
    /// CNPs or ECN-marked packets per second. 100: DCQCN answers a marked packet with at most
    /// one CNP per 50 µs per QP, so a handful at start-up is the algorithm probing; a hundred
    /// every second means a switch queue is building and the flow is being slowed.
    pub congestion_per_s: f64,
    /// Share of the window a priority spent paused. 1%: pauses that short cost less than the
    /// bench's own noise; above it the link was stopped long enough to lower the average.
    pub pause_share: f64,
    /// Pause frames on a priority, when the driver counts no pause duration. One: any pause
    /// says PFC is active on that priority.
    pub pause_frames: u64,
    /// Share of the bytes that makes a priority the one that carried the test. 90%: the rest
    /// is other traffic of the interface (ARP, the control channel, other pods).
    pub priority_share: f64,
    /// Bytes the per-priority counters must show before they say anything. 1 MiB: less is
    /// background traffic, not the test.
    pub priority_min_bytes: u64,
    /// Physical-layer errors (symbol, CRC, corrected bits) over the window. One: a clean link
    /// has none at these rates; any is a cable, optic or port to look at.
    pub phy_errors: u64,
    /// Link-down or carrier changes. One: a link that went down during the window is a flap,
    /// whatever the bandwidth says.
    pub link_changes: u64,
}

/// The thresholds rdmabw applies.
pub const THRESHOLDS: Thresholds = Thresholds {
    loss_events: 1,
    congestion_per_s: 100.0,
    pause_share: 0.01,
    pause_frames: 1,
    priority_share: 0.9,
    priority_min_bytes: 1 << 20,
    phy_errors: 1,
    link_changes: 1,
};

/// Loss: mlx5's hardware counters (sender: retransmissions and ACK timeouts; receiver:
/// out-of-sequence packets), rxe's, and the PHY's discards.
const LOSS: &[(CounterSource, &str)] = &[
    (CounterSource::Hw, "out_of_sequence"),
    (CounterSource::Hw, "packet_seq_err"),
    (CounterSource::Hw, "local_ack_timeout_err"),
    (CounterSource::Hw, "roce_adp_retrans"),
    (CounterSource::Hw, "roce_adp_retrans_to"),
    (CounterSource::Hw, "roce_slow_restart"),
    (CounterSource::Hw, "implied_nak_seq_err"),
    (CounterSource::Hw, "duplicate_request"),
    (CounterSource::Hw, "rcvd_seq_err"),
    (CounterSource::Hw, "out_of_seq_request"),
    (CounterSource::Hw, "completer_retry_err"),
    (CounterSource::Hw, "retry_exceeded_err"),
    (CounterSource::Netdev, "rx_discards_phy"),
    (CounterSource::Netdev, "tx_discards_phy"),
];

/// Congestion notification: CNPs sent (notification point) and handled (reaction point), and
/// ECN-marked RoCE packets received.
const CONGESTION: &[(CounterSource, &str)] = &[
    (CounterSource::Hw, "np_cnp_sent"),
    (CounterSource::Hw, "rp_cnp_handled"),
    (CounterSource::Hw, "np_ecn_marked_roce_packets"),
];

/// Link changes: the port's and the netdev's.
const LINK: &[(CounterSource, &str)] = &[
    (CounterSource::Port, "link_downed"),
    (CounterSource::Port, "link_error_recovery"),
    (CounterSource::Hw, "link_downed"),
    (CounterSource::Netdev, "carrier_changes"),
];

/// Physical-layer errors of the port.
const PHY_PORT: &[&str] = &[
    "symbol_error",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
];

/// Whether [`diagnose`] reads this counter (kept in reports even when it did not move).
pub fn is_evidence(d: &wire::counters::CounterDelta) -> bool {
    let named =
        |set: &[(CounterSource, &str)]| set.iter().any(|(s, n)| *s == d.source && *n == d.name);
    named(LOSS)
        || named(CONGESTION)
        || named(LINK)
        || (d.source == CounterSource::Port && PHY_PORT.contains(&d.name.as_str()))
        || (d.source == CounterSource::Netdev
            && prio_counter(&d.name)
                .is_some_and(|(_, _, w)| matches!(w, "pause" | "pause_duration" | "bytes")))
}

/// What the findings are judged against: the test's traffic class (0: none asked for).
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// The traffic class of the QPs (`--tclass`).
    pub traffic_class: u8,
}

/// The priority a traffic class lands on with the default DSCP-to-priority map of a RoCE NIC
/// in DSCP trust mode (priority = DSCP / 8, DSCP = traffic class / 4): `--tclass 106` is DSCP
/// 26, priority 3.
pub fn priority_of(traffic_class: u8) -> u8 {
    (traffic_class >> 2) >> 3
}

/// The findings of one test from the counter reports of its sides, in [`FindingKind`] order.
pub fn diagnose(reports: &[CounterReport], ctx: Context) -> Vec<Finding> {
    diagnose_with(reports, ctx, &THRESHOLDS)
}

/// [`diagnose`] with other thresholds.
pub fn diagnose_with(reports: &[CounterReport], ctx: Context, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let congestion = moved(reports, CONGESTION);
    let loss = moved(reports, LOSS);
    if loss.iter().map(|e| e.delta).sum::<u64>() >= t.loss_events {
        let cnps = congestion.iter().map(|e| e.delta).sum::<u64>();
        out.push(Finding {
            finding: FindingKind::PacketLoss,
            summary: format!(
                "packets were lost or retransmitted: {}{}",
                list(&loss),
                if cnps == 0 && has_any(reports, CONGESTION) {
                    "; no CNPs, so congestion control did not react (loss without congestion)"
                } else {
                    ""
                }
            ),
            evidence: loss,
            what_to_do: "look for drops on the path: switch port counters and buffer drops on \
                         this rail, PFC on the priority of --tclass (a lossless class), the \
                         cable or optic (ethtool -S IF | grep -E 'discard|err')"
                .into(),
        });
    }
    // The busiest of them: a CNP sent, handled and the marked packet behind it are one event.
    let per_s = congestion.iter().map(|e| e.per_s).fold(0.0, f64::max);
    if per_s >= t.congestion_per_s {
        out.push(Finding {
            finding: FindingKind::Congestion,
            summary: format!(
                "the network signalled congestion at {:.0}/s: {}",
                per_s,
                list(&congestion)
            ),
            evidence: congestion,
            what_to_do: "the path is shared or oversubscribed: check the switch queues of this \
                         rail, other traffic on its priority, and the ECN/DCQCN settings"
                .into(),
        });
    }
    out.extend(pfc(reports, t));
    out.extend(priority(reports, ctx, t));
    let link = moved(reports, LINK);
    if link.iter().map(|e| e.delta).sum::<u64>() >= t.link_changes {
        out.push(Finding {
            finding: FindingKind::LinkFlap,
            summary: format!("the link went down during the test: {}", list(&link)),
            evidence: link,
            what_to_do: "the link flapped: check the cable or optic and the switch port's \
                         log (ip -s link show IF; ethtool IF)"
                .into(),
        });
    }
    let phy: Vec<Evidence> = reports
        .iter()
        .flat_map(|r| {
            r.deltas
                .iter()
                .filter(move |d| {
                    d.delta > 0
                        && match d.source {
                            CounterSource::Port => PHY_PORT.contains(&d.name.as_str()),
                            CounterSource::Netdev => {
                                d.name.ends_with("_phy")
                                    && ["symbol", "crc", "corrected_bits", "fec"]
                                        .iter()
                                        .any(|k| d.name.contains(k))
                            }
                            CounterSource::Hw => false,
                        }
                })
                .map(move |d| evidence(r, d.source, &d.name, d.delta))
        })
        .collect();
    if phy.iter().map(|e| e.delta).sum::<u64>() >= t.phy_errors {
        out.push(Finding {
            finding: FindingKind::PhysicalErrors,
            summary: format!("the physical layer saw errors: {}", list(&phy)),
            evidence: phy,
            what_to_do: "reseat or replace the cable or optic of this rail; compare with \
                         the switch port's error counters"
                .into(),
        });
    }
    out
}

fn evidence(r: &CounterReport, source: CounterSource, name: &str, delta: u64) -> Evidence {
    Evidence {
        role: r.role,
        source,
        counter: name.to_string(),
        delta,
        per_s: if r.span_s > 0.0 {
            delta as f64 / r.span_s
        } else {
            0.0
        },
    }
}

/// The counters of `names` that moved, on every side.
fn moved(reports: &[CounterReport], names: &[(CounterSource, &str)]) -> Vec<Evidence> {
    reports
        .iter()
        .flat_map(|r| {
            names.iter().filter_map(move |(s, n)| {
                let d = r.get(*s, n)?;
                (d > 0).then(|| evidence(r, *s, n, d))
            })
        })
        .collect()
}

/// Whether any side has one of `names` at all (moved or not).
fn has_any(reports: &[CounterReport], names: &[(CounterSource, &str)]) -> bool {
    reports
        .iter()
        .any(|r| names.iter().any(|(s, n)| r.get(*s, n).is_some()))
}

fn list(e: &[Evidence]) -> String {
    e.iter()
        .map(|e| format!("{} {} on the {}", e.counter, e.delta, e.role.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `rx_prio3_pause` -> (rx, 3, "pause").
fn prio_counter(name: &str) -> Option<(&str, u8, &str)> {
    let (dir, rest) = name.split_once("_prio")?;
    let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
    let prio = rest[..digits].parse().ok()?;
    let what = rest[digits..].strip_prefix('_')?;
    matches!(dir, "rx" | "tx").then_some((dir, prio, what))
}

/// PFC: a priority with pause frames, and the share of the span it spent paused.
fn pfc(reports: &[CounterReport], t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for prio in 0..8u8 {
        let mut ev = Vec::new();
        let mut frames = 0;
        let mut share: Option<f64> = None;
        for r in reports {
            for d in &r.deltas {
                let Some((_, p, what)) = prio_counter(&d.name) else {
                    continue;
                };
                if p != prio || d.source != CounterSource::Netdev || d.delta == 0 {
                    continue;
                }
                match what {
                    "pause" => frames += d.delta,
                    "pause_duration" if d.unit == CounterUnit::Microseconds && r.span_s > 0.0 => {
                        let s = d.delta as f64 / 1e6 / r.span_s;
                        share = Some(share.map_or(s, |x: f64| x.max(s)));
                    }
                    _ => continue,
                }
                ev.push(evidence(r, d.source, &d.name, d.delta));
            }
        }
        let fires = match share {
            Some(s) => s >= t.pause_share,
            None => frames >= t.pause_frames,
        };
        if !fires {
            continue;
        }
        out.push(Finding {
            finding: FindingKind::PfcPause,
            summary: match share {
                Some(s) => format!(
                    "PFC paused priority {prio} for {:.0}% of the window ({frames} pause frames)",
                    s * 100.0
                ),
                None => format!("PFC paused priority {prio}: {frames} pause frames"),
            },
            evidence: ev,
            what_to_do: format!(
                "priority {prio} is lossless and a receiver or switch ran out of buffer: check \
                 the switch's buffer and PFC settings for it, and whether other traffic shares \
                 priority {prio}"
            ),
        });
    }
    out
}

/// Which priority carried the bytes, against the one the traffic class maps to.
fn priority(reports: &[CounterReport], ctx: Context, t: &Thresholds) -> Vec<Finding> {
    // The sending side's tx bytes say where the test's traffic went.
    let mut bytes = [0u64; 8];
    let mut ev = Vec::new();
    for r in reports {
        for d in &r.deltas {
            if let Some(("tx", p, "bytes")) = prio_counter(&d.name) {
                if (p as usize) < bytes.len() && d.delta > 0 {
                    bytes[p as usize] += d.delta;
                    ev.push(evidence(r, d.source, &d.name, d.delta));
                }
            }
        }
    }
    let total: u64 = bytes.iter().sum();
    if total < t.priority_min_bytes {
        return Vec::new();
    }
    let Some((top, &top_bytes)) = bytes.iter().enumerate().max_by_key(|(_, b)| **b) else {
        return Vec::new();
    };
    let top = top as u8;
    if (top_bytes as f64) < t.priority_share * total as f64 {
        return Vec::new();
    }
    let pct = top_bytes as f64 * 100.0 / total as f64;
    if ctx.traffic_class == 0 {
        if top != 0 {
            return Vec::new();
        }
        return vec![Finding {
            finding: FindingKind::NoTrafficClass,
            summary: format!(
                "no traffic class was set, and {pct:.0}% of the bytes went on priority 0, the \
                 default (usually lossy) class"
            ),
            evidence: ev,
            what_to_do: "set the traffic class of the fabric's RoCE priority (--tclass 106 for \
                         DSCP 26, priority 3, the common lossless class; ask the network team \
                         which one it is)"
                .into(),
        }];
    }
    let want = priority_of(ctx.traffic_class);
    if top == want {
        return Vec::new();
    }
    vec![Finding {
        finding: FindingKind::OtherPriority,
        summary: format!(
            "{pct:.0}% of the bytes went on priority {top}, not priority {want} that --tclass {} \
             (DSCP {}) maps to",
            ctx.traffic_class,
            ctx.traffic_class >> 2
        ),
        evidence: ev,
        what_to_do: format!(
            "the NIC does not map DSCP {} to priority {want}: check its trust mode and DSCP map \
             (mlnx_qos -i IF shows both), or the VLAN priority if it trusts PCP",
            ctx.traffic_class >> 2
        ),
    }]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::counters::unit_of;
    use wire::counters::CounterDelta;
    use wire::report::Role;

    /// A report of `role` over 2 s with these (source, name, delta).
    fn rep(role: Role, deltas: &[(CounterSource, &str, u64)]) -> CounterReport {
        CounterReport {
            role,
            device: "mlx5_3".into(),
            port: 1,
            netdev: Some("rdma3".into()),
            span_s: 2.0,
            read_ms: 1.0,
            counters_read: deltas.len(),
            deltas: deltas
                .iter()
                .map(|(s, n, d)| CounterDelta {
                    source: *s,
                    name: n.to_string(),
                    delta: *d,
                    unit: unit_of(*s, n),
                })
                .collect(),
        }
    }

    fn kinds(f: &[Finding]) -> Vec<FindingKind> {
        f.iter().map(|f| f.finding).collect()
    }

    use CounterSource::{Hw, Netdev, Port};

    /// The counters of an mlx5 port in a clean test on priority 3 (--tclass 106).
    fn clean(role: Role) -> Vec<(CounterSource, &'static str, u64)> {
        let tx = if role == Role::Client { 20 << 30 } else { 0 };
        vec![
            (Port, "port_xmit_data", 5 << 30),
            (Port, "link_downed", 0),
            (Port, "symbol_error", 0),
            (Hw, "out_of_sequence", 0),
            (Hw, "packet_seq_err", 0),
            (Hw, "local_ack_timeout_err", 0),
            (Hw, "roce_adp_retrans", 0),
            (Hw, "np_cnp_sent", 0),
            (Hw, "rp_cnp_handled", 0),
            (Hw, "np_ecn_marked_roce_packets", 0),
            (Netdev, "rx_discards_phy", 0),
            (Netdev, "tx_prio3_bytes", tx),
            (Netdev, "tx_prio0_bytes", 4096),
            (Netdev, "rx_prio3_pause", 0),
            (Netdev, "rx_prio3_pause_duration", 0),
            (Netdev, "carrier_changes", 0),
            (Netdev, "rx_symbol_err_phy", 0),
        ]
    }

    fn with(
        mut base: Vec<(CounterSource, &'static str, u64)>,
        set: &[(CounterSource, &'static str, u64)],
    ) -> Vec<(CounterSource, &'static str, u64)> {
        for s in set {
            match base.iter_mut().find(|b| b.0 == s.0 && b.1 == s.1) {
                Some(b) => b.2 = s.2,
                None => base.push(*s),
            }
        }
        base
    }

    const TC106: Context = Context { traffic_class: 106 };

    #[test]
    fn a_clean_test_has_no_findings() {
        let r = [
            rep(Role::Client, &clean(Role::Client)),
            rep(Role::Server, &clean(Role::Server)),
        ];
        assert!(diagnose(&r, TC106).is_empty(), "{:?}", diagnose(&r, TC106));
    }

    #[test]
    fn pauses_on_priority_3_with_cnps_and_no_drops() {
        // 23% of 2 s paused (0.46 s), CNPs at 1.2k/s, no drops.
        let c = with(
            clean(Role::Client),
            &[
                (Netdev, "rx_prio3_pause", 5400),
                (Netdev, "rx_prio3_pause_duration", 460_000),
                (Hw, "rp_cnp_handled", 2400),
            ],
        );
        let s = with(
            clean(Role::Server),
            &[
                (Hw, "np_cnp_sent", 2400),
                (Hw, "np_ecn_marked_roce_packets", 2400),
            ],
        );
        let f = diagnose(&[rep(Role::Client, &c), rep(Role::Server, &s)], TC106);
        assert_eq!(
            kinds(&f),
            [FindingKind::Congestion, FindingKind::PfcPause],
            "{f:#?}"
        );
        assert!(
            f[1].summary.contains("priority 3 for 23% of the window"),
            "{}",
            f[1].summary
        );
        assert!(f[0].summary.contains("at 1200/s"), "{}", f[0].summary);
        assert!(f[1]
            .evidence
            .iter()
            .any(|e| e.counter == "rx_prio3_pause_duration" && e.delta == 460_000));
    }

    #[test]
    fn out_of_sequence_without_cnps_is_loss_without_congestion() {
        let s = with(clean(Role::Server), &[(Hw, "out_of_sequence", 350)]);
        let c = with(clean(Role::Client), &[(Hw, "roce_adp_retrans", 120)]);
        let f = diagnose(&[rep(Role::Client, &c), rep(Role::Server, &s)], TC106);
        assert_eq!(kinds(&f), [FindingKind::PacketLoss], "{f:#?}");
        assert!(
            f[0].summary.contains("out_of_sequence 350 on the server"),
            "{}",
            f[0].summary
        );
        assert!(f[0].summary.contains("no CNPs"), "{}", f[0].summary);
        assert_eq!(f[0].evidence.len(), 2);
        assert_eq!(f[0].evidence[1].per_s, 175.0);
    }

    #[test]
    fn bytes_on_priority_0_while_tclass_106_was_asked_for() {
        let c = with(
            clean(Role::Client),
            &[
                (Netdev, "tx_prio3_bytes", 0),
                (Netdev, "tx_prio0_bytes", 20 << 30),
            ],
        );
        let f = diagnose(
            &[
                rep(Role::Client, &c),
                rep(Role::Server, &clean(Role::Server)),
            ],
            TC106,
        );
        assert_eq!(kinds(&f), [FindingKind::OtherPriority], "{f:#?}");
        assert!(
            f[0].summary
                .contains("priority 0, not priority 3 that --tclass 106 (DSCP 26)"),
            "{}",
            f[0].summary
        );
    }

    #[test]
    fn no_traffic_class_and_priority_0_is_the_field_reports_case() {
        let c = with(
            clean(Role::Client),
            &[
                (Netdev, "tx_prio3_bytes", 0),
                (Netdev, "tx_prio0_bytes", 20 << 30),
            ],
        );
        let f = diagnose(&[rep(Role::Client, &c)], Context::default());
        assert_eq!(kinds(&f), [FindingKind::NoTrafficClass], "{f:#?}");
        // With a traffic class that lands on priority 0 there is nothing to say.
        assert!(diagnose(&[rep(Role::Client, &c)], Context { traffic_class: 8 }).is_empty());
    }

    #[test]
    fn link_down_and_phy_errors() {
        let c = with(
            clean(Role::Client),
            &[(Port, "link_downed", 1), (Netdev, "carrier_changes", 2)],
        );
        let s = with(
            clean(Role::Server),
            &[(Netdev, "rx_symbol_err_phy", 7), (Port, "symbol_error", 3)],
        );
        let f = diagnose(&[rep(Role::Client, &c), rep(Role::Server, &s)], TC106);
        assert_eq!(
            kinds(&f),
            [FindingKind::LinkFlap, FindingKind::PhysicalErrors],
            "{f:#?}"
        );
        assert_eq!(f[1].evidence.len(), 2);
    }

    #[test]
    fn rxe_retries_are_loss() {
        let c = rep(
            Role::Client,
            &[
                (Hw, "completer_retry_err", 4),
                (Hw, "retry_exceeded_err", 0),
                (Hw, "rcvd_seq_err", 0),
            ],
        );
        let f = diagnose(&[c], TC106);
        assert_eq!(kinds(&f), [FindingKind::PacketLoss]);
        // rxe has no congestion counters: the loss summary does not claim there were no CNPs.
        assert!(!f[0].summary.contains("CNP"), "{}", f[0].summary);
    }

    #[test]
    fn priorities_of_traffic_classes() {
        assert_eq!(priority_of(106), 3);
        assert_eq!(priority_of(41), 1);
        assert_eq!(priority_of(0), 0);
        assert_eq!(
            prio_counter("rx_prio3_pause_duration"),
            Some(("rx", 3, "pause_duration"))
        );
        assert_eq!(prio_counter("tx_prio7_bytes"), Some(("tx", 7, "bytes")));
        assert_eq!(prio_counter("rx_vport_bytes"), None);
    }
}

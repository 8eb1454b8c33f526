//! One test per rule of [`judge`], in the order of its doc comment.

use std::time::{Duration, UNIX_EPOCH};

use super::*;
use crate::rdmabw::counters::{CounterSource, Evidence};
use crate::rdmabw::RdmabwRun;

fn failed(error: &str) -> RailResult {
    let mut run = RdmabwRun::ended_at(UNIX_EPOCH + Duration::from_secs(1_709_210_096));
    run.rail = Some(3);
    run.failed_row(None, error)
}

fn measured(status: RailStatus) -> RailResult {
    let mut row = failed("x");
    row.status = status;
    row.error = (status == RailStatus::BelowThreshold).then(|| "below the threshold".into());
    row.bw_avg_gbps = Some(40.0);
    row
}

fn finding(kind: FindingKind, roles: &[Role]) -> Finding {
    Finding {
        finding: kind,
        summary: format!("{} seen", kind.word()),
        evidence: roles
            .iter()
            .map(|&role| Evidence {
                role,
                source: CounterSource::Hw,
                counter: "c".into(),
                delta: 7,
                per_s: 1.0,
            })
            .collect(),
        what_to_do: format!("fix {}", kind.word()),
    }
}

fn layer(row: &RailResult, cause: Option<&Cause>, fleet: Option<&FleetBlame>) -> Option<Layer> {
    judge(row, cause, fleet).map(|v| v.layer)
}

#[test]
fn rule_1_a_failed_rail_takes_its_causes_layer() {
    let row = failed("pod a has no rail 3");
    let v = judge(&row, Some(&Cause::RailMissing { pod: "a".into() }), None).expect("verdict");
    assert_eq!(v.layer, Layer::NodeSetup);
    assert_eq!(v.evidence, "pod a has no rail 3");
    assert!(
        v.fix.contains("kubectl exec a -- rdmabw rails"),
        "{}",
        v.fix
    );
    let unusable = Cause::RailUnusable { pod: "b".into() };
    assert_eq!(layer(&row, Some(&unusable), None), Some(Layer::NodeSetup));
    assert_eq!(layer(&row, Some(&Cause::Timeout), None), Some(Layer::Tool));
    assert_eq!(layer(&row, Some(&Cause::NoReport), None), Some(Layer::Tool));
    assert_eq!(
        layer(&row, Some(&Cause::ServerEnded), None),
        Some(Layer::Peer)
    );
}

#[test]
fn rule_1_rdmabws_failure_kinds_each_have_a_layer() {
    let row = failed("boom");
    let of = |kind| {
        layer(
            &row,
            Some(&Cause::Rdmabw {
                kind,
                side: Role::Client,
            }),
            None,
        )
    };
    assert_eq!(of(FailureKind::Memlock), Some(Layer::PodSpec));
    assert_eq!(of(FailureKind::NoVerbs), Some(Layer::PodSpec));
    assert_eq!(of(FailureKind::DeviceAccess), Some(Layer::NodeSetup));
    assert_eq!(of(FailureKind::Gid), Some(Layer::NodeSetup));
    assert_eq!(of(FailureKind::PeerSetup), Some(Layer::NodeSetup));
    assert_eq!(of(FailureKind::PortDown), Some(Layer::NicPort));
    assert_eq!(of(FailureKind::Transport), Some(Layer::Path));
    assert_eq!(of(FailureKind::PeerFailed), Some(Layer::Peer));
    assert_eq!(of(FailureKind::Unreachable), Some(Layer::Peer));
    assert_eq!(of(FailureKind::Mismatch), Some(Layer::Tool));
    // Every kind names a layer: none is left to `unknown`.
    for kind in FailureKind::ALL {
        assert!(
            !matches!(of(kind), None | Some(Layer::Unknown)),
            "{kind} has no layer"
        );
    }
    let server = Cause::Rdmabw {
        kind: FailureKind::Gid,
        side: Role::Server,
    };
    let v = judge(&row, Some(&server), None).expect("verdict");
    assert_eq!(v.evidence, "server: boom");
}

#[test]
fn rule_1_the_cause_wins_over_findings_on_a_failed_rail() {
    let mut row = failed("the peer died");
    row.diagnosis = vec![finding(FindingKind::Congestion, &[Role::Client])];
    let cause = Cause::Rdmabw {
        kind: FailureKind::PeerFailed,
        side: Role::Client,
    };
    assert_eq!(layer(&row, Some(&cause), None), Some(Layer::Peer));
}

#[test]
fn rule_2_a_failed_rail_without_a_cause_is_unknown_with_its_error() {
    let row = failed("ib_write_bw ended with exit status 1");
    let v = judge(&row, None, None).expect("verdict");
    assert_eq!(v.layer, Layer::Unknown);
    assert_eq!(v.evidence, "ib_write_bw ended with exit status 1");
}

#[test]
fn rule_3_findings_name_the_layer_even_on_a_passing_rail() {
    let mut row = measured(RailStatus::Ok);
    row.diagnosis = vec![finding(FindingKind::PacketLoss, &[Role::Server])];
    let v = judge(&row, None, None).expect("a fault on a passing rail");
    assert_eq!(v.layer, Layer::NicPort);
    assert_eq!(v.evidence, "loss (server): loss seen");
    assert_eq!(v.fix, "fix loss");
    row.diagnosis = vec![finding(
        FindingKind::PacketLoss,
        &[Role::Client, Role::Server],
    )];
    assert_eq!(layer(&row, None, None), Some(Layer::Path));
    row.diagnosis = vec![finding(FindingKind::PfcPause, &[Role::Client])];
    assert_eq!(layer(&row, None, None), Some(Layer::Path));
}

#[test]
fn rule_3_a_ports_own_fault_before_qos_before_the_fabric() {
    let mut row = measured(RailStatus::BelowThreshold);
    row.diagnosis = vec![
        finding(FindingKind::Congestion, &[Role::Client, Role::Server]),
        finding(FindingKind::NoTrafficClass, &[Role::Client]),
    ];
    assert_eq!(layer(&row, None, None), Some(Layer::NodeSetup));
    row.diagnosis
        .push(finding(FindingKind::PhysicalErrors, &[Role::Server]));
    let v = judge(&row, None, None).expect("verdict");
    assert_eq!(v.layer, Layer::NicPort);
    assert!(
        v.evidence.starts_with("phy-errors (server)"),
        "{}",
        v.evidence
    );
    // A fleet's blame does not override what the counters show.
    let blame = FleetBlame::Group {
        group: "rack-2".into(),
    };
    assert_eq!(layer(&row, None, Some(&blame)), Some(Layer::NicPort));
}

#[test]
fn rule_4_a_slow_rail_a_fleet_blames() {
    let row = measured(RailStatus::BelowThreshold);
    let node = FleetBlame::Node {
        node: "n7".into(),
        pct_of_fleet: Some(61.4),
    };
    let v = judge(&row, None, Some(&node)).expect("verdict");
    assert_eq!(v.layer, Layer::Path);
    assert_eq!(
        v.evidence,
        "node n7 is slow on rail 3 with every partner (61% of the fleet's median)"
    );
    let group = FleetBlame::Group {
        group: "rack-2".into(),
    };
    assert_eq!(layer(&row, None, Some(&group)), Some(Layer::Path));
    let rail = FleetBlame::Rail { pairs: 12 };
    assert_eq!(layer(&row, None, Some(&rail)), Some(Layer::Path));
    // A fleet judges slowness against its median, not the recorded threshold: a row it blames
    // is judged whatever its status says.
    assert_eq!(
        layer(&measured(RailStatus::Ok), None, Some(&node)),
        Some(Layer::Path)
    );
}

#[test]
fn rule_5_a_slow_rail_with_nothing_else_is_unknown() {
    let row = measured(RailStatus::BelowThreshold);
    let v = judge(&row, None, None).expect("verdict");
    assert_eq!(v.layer, Layer::Unknown);
    assert!(v.fix.contains("railsweep fleet"), "{}", v.fix);
}

#[test]
fn rule_6_a_clean_rail_has_no_verdict() {
    assert_eq!(judge(&measured(RailStatus::Ok), None, None), None);
}

#[test]
fn a_row_keeps_its_verdict_and_layers_read_back() {
    let mut row = failed("no GID");
    row.judge(
        Some(&Cause::Rdmabw {
            kind: FailureKind::Gid,
            side: Role::Client,
        }),
        None,
    );
    let v = row.verdict().expect("set");
    assert_eq!((v.layer, v.evidence.as_str()), (Layer::NodeSetup, "no GID"));
    assert_eq!(row.layer, Some(Layer::NodeSetup));
    let mut ok = measured(RailStatus::Ok);
    ok.judge(None, None);
    assert_eq!((ok.layer, ok.evidence, ok.fix), (None, None, None));
    for l in Layer::ALL {
        assert_eq!(l.as_str().parse::<Layer>(), Ok(l));
        let json = serde_json::to_string(&l).expect("serializes");
        assert_eq!(json, format!("\"{l}\""));
    }
    assert!("fabric".parse::<Layer>().is_err());
}

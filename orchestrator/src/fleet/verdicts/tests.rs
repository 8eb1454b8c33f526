use super::*;
use crate::fleet::schedule::all_pairs;
use crate::test_support::row;

/// 6 nodes, 2 rails, every pair at 96 Gb/s except those with `bad` on rail 1: failed
/// (`None`) or at that speed. Pods `pod-N` on nodes `node-N`.
fn fleet(bad: &[&str], bw: Option<f64>) -> Vec<RailResult> {
    let names: Vec<String> = (1..=6).map(|i| format!("pod-{i}")).collect();
    let mut rows = Vec::new();
    for p in all_pairs(6).pairs() {
        for rail in 0..2 {
            let (c, s) = (&names[p.client], &names[p.server]);
            let hit = rail == 1 && (bad.contains(&c.as_str()) || bad.contains(&s.as_str()));
            let mut r = row(c, s, rail, if hit { bw } else { Some(96.0) });
            r.client_node = c.replace("pod", "node");
            r.server_node = s.replace("pod", "node");
            rows.push(r);
        }
    }
    rows
}

fn verdicts(rows: &[RailResult]) -> Vec<NodeVerdict> {
    let t = culprit::Threshold::default();
    node_verdicts(rows, &culprit::judge(rows, t), t)
}

fn opts(apply: ApplyVerdicts) -> Options {
    Options {
        apply,
        max_taint_pct: 10.0,
        untaint_passed: false,
        dry_run: false,
        date: "2026-12-03".into(),
        run_id: "r1".into(),
    }
}

#[test]
fn a_failed_rail_marks_its_node_failed_and_its_partners_ok() {
    let v = verdicts(&fleet(&["pod-3"], None));
    assert_eq!(v.len(), 6);
    let bad: Vec<&NodeVerdict> = v.iter().filter(|v| v.health != Health::Ok).collect();
    assert_eq!(bad.len(), 1, "{v:?}");
    assert_eq!(
        (bad[0].node.as_str(), bad[0].pod.as_str()),
        ("node-3", "pod-3")
    );
    assert_eq!(bad[0].health, Health::Failed);
    let e = &bad[0].bad_rails[0].evidence;
    assert_eq!(
        (e.rail, e.pairs, e.slow_pairs, e.failed_pairs),
        (1, 5, 5, 5)
    );
    assert_eq!(e.median_gbps, 0.0);
    assert_eq!(e.fleet_median_gbps, Some(96.0));
    assert_eq!(bad[0].taint_value(), "1");
}

#[test]
fn a_slow_rail_is_degraded_with_its_share_of_the_median() {
    let v = verdicts(&fleet(&["pod-5"], Some(48.0)));
    let bad: Vec<&NodeVerdict> = v.iter().filter(|v| v.health != Health::Ok).collect();
    assert_eq!(bad.len(), 1, "{v:?}");
    assert_eq!(bad[0].health, Health::Degraded);
    let e = &bad[0].bad_rails[0].evidence;
    assert_eq!(e.failed_pairs, 0);
    assert_eq!(e.pct_of_fleet_median, Some(50.0));
    let text = evidence_text(bad[0], &opts(ApplyVerdicts::Labels)).expect("annotation");
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["verdict"], "degraded");
    assert_eq!(doc["bad_rails"][0]["rail"], 1);
    assert_eq!(doc["bad_rails"][0]["median_gbps"], 48.0);
    assert_eq!(doc["bad_rails"][0]["pct_of_fleet_median"], 50.0);
}

#[test]
fn the_breaker_keeps_taints_off_many_nodes() {
    assert!(breaker(0, 6, 10.0).is_ok());
    assert!(breaker(1, 6, 20.0).is_ok());
    assert!(breaker(6, 64, 10.0).is_ok());
    assert!(breaker(7, 64, 10.0).is_err());
    let why = breaker(3, 6, 10.0).expect_err("3 of 6 is over 10 %");
    assert!(why.contains("3 of 6 measured nodes (50.0 %)"), "{why}");
    assert!(why.contains("at most 0 node(s)"), "{why}");
    assert!(why.contains("fabric"), "{why}");
    // One of six is 16.7 %: over the default 10 %.
    assert!(breaker(1, 6, 10.0).is_err());
}

fn taint(key: &str, value: &str) -> Taint {
    Taint {
        key: key.into(),
        value: Some(value.into()),
        effect: "NoSchedule".into(),
        time_added: None,
    }
}

#[test]
fn other_taints_are_kept_and_only_railsweeps_changes() {
    let gpu = taint("nvidia.com/gpu", "");
    let old = taint(TAINT_KEY, "0");
    assert_eq!(
        new_taints(std::slice::from_ref(&gpu), TaintAction::Set, "1"),
        Some(vec![gpu.clone(), taint(TAINT_KEY, "1")])
    );
    assert_eq!(
        new_taints(&[old.clone(), gpu.clone()], TaintAction::Set, "1.3"),
        Some(vec![gpu.clone(), taint(TAINT_KEY, "1.3")])
    );
    assert_eq!(
        new_taints(&[gpu.clone(), taint(TAINT_KEY, "1")], TaintAction::Set, "1"),
        None,
        "already there"
    );
    assert_eq!(
        new_taints(&[gpu.clone(), old], TaintAction::Remove, ""),
        Some(vec![gpu.clone()])
    );
    assert_eq!(
        new_taints(std::slice::from_ref(&gpu), TaintAction::Remove, ""),
        None
    );
    assert_eq!(new_taints(&[gpu], TaintAction::Keep, "1"), None);
}

#[test]
fn the_patch_holds_labels_evidence_and_taints_at_a_version() {
    let v = verdicts(&fleet(&["pod-2"], None));
    let o = opts(ApplyVerdicts::Taints);
    let bad = v.iter().find(|v| v.node == "node-2").expect("node-2");
    let p = node_patch(bad, &o, Some((vec![taint(TAINT_KEY, "1")], "42")));
    assert_eq!(p["metadata"]["labels"][LABEL], "failed");
    assert_eq!(p["metadata"]["labels"][CHECKED_LABEL], "2026-12-03");
    assert_eq!(p["metadata"]["resourceVersion"], "42");
    assert_eq!(p["spec"]["taints"][0]["key"], TAINT_KEY);
    let ok = v.iter().find(|v| v.node == "node-1").expect("node-1");
    let p = node_patch(ok, &o, None);
    assert_eq!(p["metadata"]["labels"][LABEL], "ok");
    assert!(p["metadata"]["annotations"][EVIDENCE_ANNOTATION].is_null());
    assert!(p.get("spec").is_none());
    // Who gets which action.
    assert_eq!(action_for(bad, &o, true, true), TaintAction::Set);
    assert_eq!(action_for(bad, &o, false, true), TaintAction::Keep);
    assert_eq!(action_for(ok, &o, true, false), TaintAction::Keep);
    // A node whose bad rails all have DeviceTaintRules: no node taint, and an old one is
    // removed with --untaint-passed (the breaker keeping the rules off keeps it).
    assert_eq!(action_for(bad, &o, true, false), TaintAction::Keep);
    let ou = Options {
        untaint_passed: true,
        ..o.clone()
    };
    assert_eq!(action_for(bad, &ou, true, false), TaintAction::Remove);
    assert_eq!(action_for(bad, &ou, false, false), TaintAction::Keep);
    let o = Options {
        untaint_passed: true,
        ..opts(ApplyVerdicts::Labels)
    };
    assert_eq!(action_for(ok, &o, false, false), TaintAction::Remove);
    assert_eq!(action_for(bad, &o, false, true), TaintAction::Keep);
}

#[test]
fn the_summary_names_the_rules_written_held_and_removed() {
    let v = verdicts(&fleet(&["pod-2"], Some(48.0)));
    let o = opts(ApplyVerdicts::Taints);
    let applied = Applied {
        labelled: 6,
        rules_written: vec!["railbench-node-2-rail1".into()],
        rules_removed: vec!["railbench-node-4-rail0".into()],
        untainted: vec!["node-2".into(), "node-5".into()],
        ..Applied::default()
    };
    let lines = summary(&v, &applied, &o);
    let has = |s: &str| lines.iter().any(|l| l.contains(s));
    assert!(
        has("verdicts: wrote DeviceTaintRule railbench-node-2-rail1 (railbench.io/bad-rail:NoSchedule on the rail's DRA device"),
        "{lines:?}"
    );
    assert!(
        has("verdicts: removed DeviceTaintRule railbench-node-4-rail0 (the rail passes now)"),
        "{lines:?}"
    );
    assert!(
        has("verdicts: removed railbench.io/bad-rails from node-5 (they pass now)"),
        "{lines:?}"
    );
    assert!(
        has("verdicts: removed railbench.io/bad-rails from node-2 (DeviceTaintRules stand for their bad rails)"),
        "{lines:?}"
    );
    let held = Applied {
        rules_held: 2,
        breaker: Some("not tainting: ...".into()),
        ..Applied::default()
    };
    let lines = summary(&v, &held, &o);
    assert!(
        lines
            .iter()
            .any(|l| l == "verdicts: the breaker kept 2 DeviceTaintRule(s) from being written"),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("wrote DeviceTaintRule")));
    // The measured rails and their interfaces come from the rows.
    let node2 = v.iter().find(|n| n.node == "node-2").expect("node-2");
    assert_eq!(node2.rails.keys().copied().collect::<Vec<_>>(), [0, 1]);
    assert_eq!(node2.rails[&1], "net2");
}

/// A client of an API server that is not there: the paths below make no request.
fn no_server() -> Client {
    let url = "https://127.0.0.1:9".parse().expect("a URL");
    Client::try_from(kube::Config::new(url)).expect("a client")
}

/// node-2's plan with DRA devices for both its rails (rail 1 bad, rail 0 passing).
fn dra_plan() -> devicetaints::NodePlan {
    use k8s_openapi::api::resource::v1::DeviceAttribute;
    let v = verdicts(&fleet(&["pod-2"], Some(48.0)));
    let node2 = v.iter().find(|n| n.node == "node-2").expect("node-2");
    let devices: Vec<dra::NodeDevice> = ["net1", "net2"]
        .iter()
        .map(|i| dra::NodeDevice {
            driver: "dra.net".into(),
            pool: "node-2".into(),
            name: (*i).into(),
            attributes: BTreeMap::from([(
                "dra.net/ifName".to_string(),
                DeviceAttribute {
                    string: Some((*i).into()),
                    ..DeviceAttribute::default()
                },
            )]),
        })
        .collect();
    devicetaints::plan(node2, &devices, &opts(ApplyVerdicts::Taints))
}

#[tokio::test]
async fn the_breaker_holds_every_rule_back() {
    let plans = [dra_plan()];
    assert_eq!(plans[0].rules.len(), 1);
    let mut applied = Applied::default();
    let mut out = Vec::new();
    let o = opts(ApplyVerdicts::Taints);
    apply_rules(
        &no_server(),
        &plans,
        &BTreeSet::new(),
        &o,
        false,
        &mut applied,
        &mut out,
    )
    .await
    .expect("no request");
    assert_eq!(applied.rules_held, 1);
    assert!(applied.rules_written.is_empty() && out.is_empty());
}

#[tokio::test]
async fn dry_run_prints_each_rule_and_each_removal() {
    let plans = [dra_plan()];
    let o = Options {
        dry_run: true,
        untaint_passed: true,
        ..opts(ApplyVerdicts::Taints)
    };
    // railsweep's rule of node-2's rail 0 is there from an earlier run; rail 0 passes now.
    let existing = BTreeSet::from(["railbench-node-2-rail0".to_string()]);
    let mut applied = Applied::default();
    let mut out = Vec::new();
    apply_rules(
        &no_server(),
        &plans,
        &existing,
        &o,
        true,
        &mut applied,
        &mut out,
    )
    .await
    .expect("no request");
    let lines: Vec<Value> = String::from_utf8(out)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["device_taint_rule"], "railbench-node-2-rail1");
    assert_eq!(
        lines[0]["apply"]["spec"]["deviceSelector"]["device"],
        "net2"
    );
    assert_eq!(
        lines[1],
        json!({ "device_taint_rule": "railbench-node-2-rail0", "delete": true })
    );
    assert_eq!(applied.rules_written, ["railbench-node-2-rail1"]);
    assert_eq!(applied.rules_removed, ["railbench-node-2-rail0"]);
}

#[test]
fn three_bad_nodes_of_six_are_all_named() {
    let v = verdicts(&fleet(&["pod-1", "pod-4", "pod-6"], None));
    let bad: Vec<&str> = v
        .iter()
        .filter(|v| v.health == Health::Failed)
        .map(|v| v.node.as_str())
        .collect();
    assert_eq!(bad, ["node-1", "node-4", "node-6"]);
}

//! Snapshots of the pods of every mode, and the example manifests in `deploy/examples/`: the
//! committed files must match what the typed builders make, byte for byte. After an intended
//! change, `RAILBENCH_BLESS=1 cargo test --release -p orchestrator --test manifests` rewrites
//! them; review the diff. `scripts/validate-manifests` checks every one of these files against
//! the Kubernetes 1.37 OpenAPI schema.

use std::path::{Path, PathBuf};

use orchestrator::modes::yaml::{example_options, examples, pairs_yaml};
use orchestrator::modes::{pod_pair, Mode, Placement, PROJECT_IMAGE};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn bless() -> bool {
    std::env::var_os("RAILBENCH_BLESS").is_some_and(|v| v == "1")
}

/// Compare `actual` with the committed file, or write it when blessing.
fn check(path: &Path, actual: &str) -> Result<(), String> {
    if bless() {
        std::fs::write(path, actual)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        return Ok(());
    }
    let expected = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if expected == actual {
        return Ok(());
    }
    let line = expected
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    Err(format!(
        "{} differs from what the builders make, from line {}:\n  committed: {:?}\n  now:       {:?}\n\
         (if the change is intended: RAILBENCH_BLESS=1 cargo test --release -p orchestrator --test manifests)",
        path.display(),
        line + 1,
        expected.lines().nth(line).unwrap_or("<end of file>"),
        actual.lines().nth(line).unwrap_or("<end of file>"),
    ))
}

/// The pods `railsweep run --mode M --nodes 10.140.66.66,10.140.82.106 -n rdma-hostnet` makes
/// for run 20261129T101500Z with the field reports' rails.
fn snapshot(mode: Mode) -> String {
    let place = Placement {
        run: "20261129T101500Z".into(),
        client_node: Some("10.140.66.66".into()),
        server_node: Some("10.140.82.106".into()),
    };
    let pair = pod_pair(mode, &example_options("rdma-hostnet"), &place)
        .expect("the example options suit every mode");
    pairs_yaml(&[pair]).expect("serializes")
}

#[test]
fn every_mode_matches_its_snapshot() {
    let dir = repo().join("orchestrator/tests/snapshots/manifests");
    let failures: Vec<String> = Mode::ALL
        .into_iter()
        .filter_map(|m| check(&dir.join(format!("{m}.yaml")), &snapshot(m)).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn deploy_examples_are_up_to_date() {
    let dir = repo().join("deploy/examples");
    let files = examples().expect("examples build");
    let mut failures: Vec<String> = files
        .iter()
        .filter_map(|(name, text)| check(&dir.join(name), text).err())
        .collect();
    // No stale example may stay behind.
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    for entry in std::fs::read_dir(&dir)
        .expect("deploy/examples exists")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") && !names.contains(&name.as_str()) {
            failures.push(format!(
                "deploy/examples/{name} is not generated any more: delete it"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn snapshots_say_what_each_mode_needs() {
    let host = snapshot(Mode::HostNetwork);
    assert!(
        host.contains("hostNetwork: true") && host.contains("dnsPolicy: ClusterFirstWithHostNet")
    );
    assert!(host.contains("privileged: true"));
    assert!(host.contains("# Pod Security: the namespace must allow privileged"));
    let crio = snapshot(Mode::HostNetworkCrio);
    assert!(
        crio.contains("runtimeClassName: runc-nohostdev") && !crio.contains("privileged: true")
    );
    assert!(crio.contains("/dev/infiniband/uverbs17,/dev/infiniband/rdma_cm"));
    assert!(crio.contains("- IPC_LOCK"));
    let ipvlan = snapshot(Mode::Ipvlan);
    assert!(ipvlan.contains("k8s.v1.cni.cncf.io/networks: rdma-ipvlan-0,rdma-ipvlan-1,"));
    assert!(
        ipvlan.contains("nvidia.com/hostdev: '16'")
            || ipvlan.contains("nvidia.com/hostdev: \"16\""),
        "{ipvlan}"
    );
    let sriov = snapshot(Mode::Sriov);
    assert!(sriov.contains("nvidia.com/sriov_rdma_rail15:"));
    // Node names that look like numbers stay strings.
    let docs: Vec<Value> = serde_saphyr::from_multiple(&host).expect("YAML");
    assert_eq!(
        docs[0]["spec"]["nodeSelector"]["kubernetes.io/hostname"],
        Value::String("10.140.82.106".into()),
        "{host}"
    );
}

/// `railsweep run --dry-run` prints exactly the snapshot: the command line reaches the same
/// typed pods as the library.
#[test]
fn dry_run_prints_the_snapshots() {
    let dir = repo().join("orchestrator/tests/snapshots/manifests");
    for mode in Mode::ALL {
        let m = mode.to_string();
        let mut args = vec![
            "run",
            "--dry-run",
            "--mode",
            m.as_str(),
            "--nodes",
            "10.140.66.66,10.140.82.106",
            "-n",
            "rdma-hostnet",
            "--run-id",
            "20261129T101500Z",
            "--uverbs",
            "0-17",
            "--networks",
            "ipvlan:rdma-ipvlan-{0..15}",
            "--rdma-resource",
            "ipvlan:nvidia.com/hostdev=16",
            "--networks",
            "sriov:sriov-rdma-rail-{0..15}",
            "--rdma-resource",
            "sriov:nvidia.com/sriov_rdma_rail{0..15}=1",
            "--image",
            PROJECT_IMAGE,
            "--image-pull-policy",
            "Never",
        ];
        let yaml = std::process::Command::new(env!("CARGO_BIN_EXE_railsweep"))
            .args(&args)
            .output()
            .expect("runs");
        assert_eq!(
            yaml.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&yaml.stderr)
        );
        let expected = std::fs::read_to_string(dir.join(format!("{m}.yaml"))).expect("snapshot");
        assert_eq!(
            String::from_utf8_lossy(&yaml.stdout),
            expected,
            "{m}: railsweep run --dry-run -o yaml"
        );
        args.extend(["-o", "json"]);
        let json = std::process::Command::new(env!("CARGO_BIN_EXE_railsweep"))
            .args(&args)
            .output()
            .expect("runs");
        let list: serde_json::Value =
            serde_json::from_slice(&json.stdout).expect("-o json is JSON");
        assert_eq!(list["kind"], "List");
        // The pods (after a dra run's ResourceClaimTemplate), server first.
        let pods: Vec<&serde_json::Value> = list["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|i| i["kind"] == "Pod")
            .collect();
        assert_eq!(
            pods[0]["metadata"]["name"],
            format!("railsweep-20261129t101500z-{m}-server")
        );
    }
    // A mode that lacks what it needs says what to give.
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(["run", "--dry-run", "--mode", "ipvlan"])
        .output()
        .expect("runs");
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("mode ipvlan needs --networks") && err.contains("rdma-ipvlan-{0..15}"),
        "{err}"
    );
}

/// `railsweep run DRY` (a `--dry-run` spelling) of one hostnetwork pair: nodes n1 and n2, run
/// id r1.
fn hostnetwork_run(dry: &str) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_railsweep"));
    c.args([
        "run",
        dry,
        "--mode",
        "hostnetwork",
        "--nodes",
        "n1,n2",
        "--run-id",
        "r1",
    ]);
    c
}

/// Issue 56: with no --image, the pods run Docker Hub's busybox pinned by digest (pulled if not
/// present; railsweep copies its rdmabw-portable in), or the image $RAILSWEEP_IMAGE names.
#[test]
fn the_default_image_is_busybox_pinned_by_digest() {
    let run = |env: Option<&str>| {
        let mut c = hostnetwork_run("--dry-run");
        c.env_remove("RAILSWEEP_IMAGE");
        if let Some(e) = env {
            c.env("RAILSWEEP_IMAGE", e);
        }
        let out = c.output().expect("runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let images = |yaml: &str| -> Vec<String> {
        yaml.lines()
            .filter_map(|l| l.trim().strip_prefix("image: "))
            .map(str::to_string)
            .collect()
    };
    let plain = run(None);
    let want = "docker.io/library/busybox:1.37.0@sha256:";
    assert_eq!(images(&plain).len(), 2, "{plain}");
    for i in images(&plain) {
        let digest = i
            .strip_prefix(want)
            .unwrap_or_else(|| panic!("{i} is not {want}..."));
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{i}"
        );
    }
    assert_eq!(
        plain.matches("imagePullPolicy: IfNotPresent").count(),
        2,
        "{plain}"
    );
    assert!(!plain.contains("imagePullPolicy: Never"), "{plain}");
    let mirrored = run(Some("mirror.example/library/busybox@sha256:00"));
    assert_eq!(
        images(&mirrored),
        ["mirror.example/library/busybox@sha256:00"; 2],
        "{mirrored}"
    );
}

/// Issue 33: kubectl's `--dry-run=client` was refused ("unexpected value 'client'"). It prints
/// as `--dry-run` does; `=none` creates; `=server` is refused naming what to use.
#[test]
fn dry_run_takes_kubectls_values() {
    let run = |dry: &str| {
        hostnetwork_run(dry)
            // rdmabw in the image: nothing to copy in, whatever this build has beside it.
            .args(["--rdmabw", "rdmabw"])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("runs")
    };
    let plain = run("--dry-run");
    let client = run("--dry-run=client");
    assert_eq!(
        client.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(client.stdout, plain.stdout);
    assert!(String::from_utf8_lossy(&client.stdout).contains("kind: Pod"));
    let server = run("--dry-run=server");
    assert_eq!(server.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&server.stderr).contains("no server-side dry run"));
    // =none is no dry run: railsweep goes for the cluster (here: no kubeconfig, exit 2).
    let none = run("--dry-run=none");
    assert_eq!(none.status.code(), Some(2));
    assert!(none.stdout.is_empty());
    assert!(String::from_utf8_lossy(&none.stderr).contains("kubeconfig"));
}

/// Issue 56: `compare --dry-run` printed the first mode's pods, then failed on the next mode
/// (half of it would be applied). Every mode is made before anything is printed: a mode that
/// lacks what it needs prints nothing; when all can be made, one JSON List holds them all.
#[test]
fn compare_dry_run_checks_every_mode_before_printing() {
    let compare = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_railsweep"))
            .args(["compare", "--dry-run", "--nodes", "n1,n2", "--run-id", "r1"])
            .args(extra)
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .output()
            .expect("runs")
    };
    let r = compare(&["--modes", "hostnetwork,ipvlan"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(
        r.stdout.is_empty(),
        "printed before the ipvlan mode failed:\n{}",
        String::from_utf8_lossy(&r.stdout)
    );
    assert!(
        err.contains("mode ipvlan") && err.contains("--networks"),
        "{err}"
    );
    let r = compare(&[
        "--modes",
        "hostnetwork,ipvlan",
        "--networks",
        "ipvlan:rdma-ipvlan-{0..1}",
        "--rdma-resource",
        "ipvlan:nvidia.com/hostdev=2",
        "-o",
        "json",
    ]);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let list: Value = serde_json::from_slice(&r.stdout).expect("one JSON List");
    let pods: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["kind"] == "Pod")
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(pods.len(), 4, "{pods:?}");
    assert!(pods.iter().any(|p| p.contains("-hostnetwork-")), "{pods:?}");
    assert!(pods.iter().any(|p| p.contains("-ipvlan-")), "{pods:?}");
}

/// The documents of deploy/FILE, as YAML values.
fn deploy_docs(file: &str) -> Vec<Value> {
    let path = repo().join("deploy").join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reads {}: {e}", path.display()));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// `kubectl apply -k deploy/` applies every manifest of deploy/ (not the examples), the
/// Namespace is declared once, in deploy/namespace.yaml, and every namespaced object of the
/// files is in the kustomization's namespace, the one the README's quick start uses.
/// (scripts/validate-manifests renders it with kubectl and checks what comes out.)
#[test]
fn kustomization_applies_every_deploy_file_in_one_namespace() {
    let k = &deploy_docs("kustomization.yaml")[0];
    let ns = k["namespace"]
        .as_str()
        .expect("kustomization has a namespace");
    assert_eq!(
        ns, "railbench",
        "the README's quick start says -n railbench"
    );
    let mut resources: Vec<&str> = k["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a file name"))
        .collect();
    resources.sort_unstable();
    let mut files: Vec<String> = std::fs::read_dir(repo().join("deploy"))
        .expect("deploy/ exists")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    files.sort_unstable();
    assert_eq!(
        resources, files,
        "deploy/kustomization.yaml's resources are deploy/*.yaml"
    );
    for file in &files {
        for doc in deploy_docs(file) {
            let kind = doc["kind"].as_str().expect("kind");
            let name = doc["metadata"]["name"].as_str().expect("name");
            if kind == "Namespace" {
                assert_eq!(
                    (file.as_str(), name),
                    ("namespace.yaml", ns),
                    "the Namespace is declared once, in deploy/namespace.yaml"
                );
            }
            if let Some(n) = doc["metadata"]["namespace"].as_str() {
                assert_eq!(n, ns, "deploy/{file}: {kind} {name}");
            }
        }
    }
    // The image kustomize rewrites is the one the CronJob names.
    let image = k["images"][0]["name"].as_str().expect("images[0].name");
    let cronjob = deploy_docs("fleet-job.yaml")
        .into_iter()
        .find(|d| d["kind"] == "CronJob")
        .expect("a CronJob");
    let named = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        ["image"]
        .as_str()
        .expect("image");
    assert!(
        named.starts_with(&format!("{image}:")),
        "{named} is not {image}:TAG"
    );
    // Not published in any registry: a registry someone else controls could serve that name.
    let policy = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        ["imagePullPolicy"]
        .as_str();
    assert_eq!(
        policy,
        Some("Never"),
        "the default image {named} is never pulled"
    );
}

/// The document of `kind` named `name` in deploy/FILE.
fn deploy_doc(file: &str, kind: &str, name: &str) -> Value {
    deploy_docs(file)
        .into_iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("deploy/{file} has no {kind} {name}"))
}

/// The expression of variable `name` of an admission policy.
fn variable(policy: &Value, name: &str) -> String {
    policy["spec"]["variables"]
        .as_array()
        .expect("variables")
        .iter()
        .find(|v| v["name"] == name)
        .and_then(|v| v["expression"].as_str())
        .unwrap_or_else(|| panic!("no variable {name}"))
        .to_string()
}

/// The admission policy `name` of deploy/fleet-job.yaml, enforced: its binding (of the same
/// name) denies what it refuses, and it fails closed (an error in a rule refuses too).
fn enforced_policy(name: &str) -> Value {
    let policy = deploy_doc("fleet-job.yaml", "ValidatingAdmissionPolicy", name);
    let binding = deploy_doc("fleet-job.yaml", "ValidatingAdmissionPolicyBinding", name);
    assert_eq!(binding["spec"]["policyName"], name);
    assert_eq!(
        binding["spec"]["validationActions"],
        serde_json::json!(["Deny"])
    );
    assert_eq!(policy["spec"]["failurePolicy"], "Fail");
    policy
}

/// Every CEL expression of an admission policy, as text.
fn expressions(policy: &Value) -> Vec<String> {
    let spec = &policy["spec"];
    ["matchConditions", "variables", "validations"]
        .iter()
        .flat_map(|k| spec[*k].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["expression"].as_str().map(str::to_string))
        .collect()
}

/// Issue 53, finding 4: the verdict policy allowed any `railbench.io/*` taint with any effect
/// (NoExecute evicts workloads cluster-wide). It names exactly the keys and the effect that
/// railsweep writes (orchestrator's fleet/verdicts.rs), and no prefix rule remains.
/// scripts/validate-manifests evaluates it on node updates (NoExecute refused); the cluster
/// test (deploy_cluster.rs) against a real API server.
#[test]
fn the_verdict_policy_allows_exactly_what_railsweep_writes() {
    use orchestrator::fleet::verdicts::{
        CHECKED_LABEL, EVIDENCE_ANNOTATION, LABEL, TAINT_EFFECT, TAINT_KEY,
    };
    let policy = deploy_doc(
        "fleet-job.yaml",
        "ValidatingAdmissionPolicy",
        "railsweep-verdicts",
    );
    assert_eq!(
        variable(&policy, "labelKeys"),
        format!("['{LABEL}', '{CHECKED_LABEL}']")
    );
    assert_eq!(
        variable(&policy, "annotationKeys"),
        format!("['{EVIDENCE_ANNOTATION}']")
    );
    let ours = format!("!(t.key == '{TAINT_KEY}' && t.effect == '{TAINT_EFFECT}')");
    for v in ["oldTaints", "newTaints"] {
        let e = variable(&policy, v);
        assert!(e.contains(&format!(".filter(t, {ours})")), "{v}: {e}");
    }
    assert_eq!(TAINT_EFFECT, "NoSchedule", "railsweep's taint never evicts");
    for e in expressions(&policy) {
        assert!(
            !e.contains("startsWith('railbench.io/')") && !e.contains("NoExecute"),
            "a rule wider than railsweep's keys: {e}"
        );
    }
    // The first admission policy of the file is this one (the node keys), the DeviceTaintRule
    // policy after it.
    let first = deploy_docs("fleet-job.yaml")
        .into_iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .expect("a policy");
    assert_eq!(first["metadata"]["name"], "railsweep-verdicts");
}

/// Issue 54, item 3: the verdict account's DRA rights are exactly what `--apply-verdicts` uses
/// (read the ResourceSlices; write, list and delete DeviceTaintRules), and the DeviceTaintRule
/// policy keeps it to railsweep's own rules (its managed-by label, before and after), with
/// railsweep's taint key and effect NoSchedule (NoExecute would evict the device's pods). The
/// namespace reaches the policy through the kustomization. scripts/validate-manifests
/// evaluates the policy on rule requests; the cluster test (fleet_verdicts.rs) writes and
/// deletes a rule with these grants against a real API server.
#[test]
fn the_verdict_account_may_write_only_railsweeps_device_taint_rules() {
    use orchestrator::fleet::verdicts::devicetaints::{
        MANAGED_BY, MANAGED_BY_LABEL, RULE_TAINT_KEY,
    };
    use orchestrator::fleet::verdicts::TAINT_EFFECT;
    let role = deploy_doc("fleet-job.yaml", "ClusterRole", "railsweep-verdicts");
    let texts = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|x| x.as_str().expect("text").to_string())
            .collect()
    };
    let rules: Vec<(Vec<String>, Vec<String>, Vec<String>)> = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            (
                texts(&r["apiGroups"]),
                texts(&r["resources"]),
                texts(&r["verbs"]),
            )
        })
        .collect();
    let want = |g: &str, r: &str, v: &[&str]| {
        (
            vec![g.to_string()],
            vec![r.to_string()],
            v.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        rules,
        [
            want("", "nodes", &["get", "patch"]),
            want("resource.k8s.io", "resourceslices", &["get", "list"]),
            want(
                "resource.k8s.io",
                "devicetaintrules",
                &["create", "get", "list", "patch", "delete"]
            ),
        ]
    );
    let policy = enforced_policy("railsweep-device-taints");
    let rr = &policy["spec"]["matchConstraints"]["resourceRules"][0];
    assert_eq!(texts(&rr["apiGroups"]), ["resource.k8s.io"]);
    assert_eq!(texts(&rr["operations"]), ["CREATE", "UPDATE", "DELETE"]);
    assert_eq!(texts(&rr["resources"]), ["devicetaintrules"]);
    let nodes_policy = deploy_doc(
        "fleet-job.yaml",
        "ValidatingAdmissionPolicy",
        "railsweep-verdicts",
    );
    assert_eq!(
        policy["spec"]["matchConditions"], nodes_policy["spec"]["matchConditions"],
        "the same account as the node policy"
    );
    assert_eq!(
        variable(&policy, "managedBy"),
        format!("'{MANAGED_BY_LABEL}'")
    );
    for v in ["oldOurs", "newOurs"] {
        let obj = if v == "oldOurs" {
            "oldObject"
        } else {
            "object"
        };
        assert!(
            variable(&policy, v).contains(&format!(
                "{obj}.metadata.labels[variables.managedBy] == '{MANAGED_BY}'"
            )),
            "{v}"
        );
    }
    assert!(variable(&policy, "newOurs").contains(&format!(
        "object.spec.taint.key == '{RULE_TAINT_KEY}' && object.spec.taint.effect == '{TAINT_EFFECT}'"
    )));
    for e in expressions(&policy) {
        assert!(!e.contains("NoExecute"), "{e}");
    }
    let k = &deploy_docs("kustomization.yaml")[0];
    let namespaced = k["replacements"]
        .as_array()
        .expect("replacements")
        .iter()
        .flat_map(|r| r["targets"].as_array().cloned().unwrap_or_default())
        .any(|t| {
            t["select"]["name"] == "railsweep-device-taints"
                && t["fieldPaths"][0] == "spec.matchConditions.[name=verdict-account].expression"
        });
    assert!(
        namespaced,
        "the kustomization's namespace reaches the policy"
    );
}

/// Issue 53, finding 4: the railsweep account (deploy/rbac.yaml) may create pods and exec into
/// pods where the fleet's account holds the verdict rights. The pod policy keeps it from
/// running a pod as railsweep-fleet and from exec'ing into the CronJob's pod, and the CronJob
/// meets that policy itself; neither account may make a Job or read a token or a Secret,
/// which the policy's rule (only the Job controller makes fleet pods) rests on.
#[test]
fn the_fleet_pod_policy_keeps_the_sweep_account_from_the_fleets_rights() {
    let k = &deploy_docs("kustomization.yaml")[0];
    let ns = k["namespace"].as_str().expect("namespace");
    let sweep_sa = deploy_doc("rbac.yaml", "ServiceAccount", "railsweep");
    let fleet_sa = deploy_doc("fleet-job.yaml", "ServiceAccount", "railsweep-fleet");
    let policy = enforced_policy("railsweep-fleet-pods");
    // What it sees: pod creation and every way into a running pod, in railsweep's namespace.
    let mc = &policy["spec"]["matchConstraints"];
    let rules: Vec<(Vec<String>, Vec<String>)> = mc["resourceRules"]
        .as_array()
        .expect("resourceRules")
        .iter()
        .map(|r| {
            let list = |k: &str| -> Vec<String> {
                r[k].as_array()
                    .expect("a list")
                    .iter()
                    .map(|v| v.as_str().expect("text").to_string())
                    .collect()
            };
            (list("operations"), list("resources"))
        })
        .collect();
    let covers = |op: &str, res: &str| {
        rules
            .iter()
            .any(|(o, r)| o.iter().any(|x| x == op) && r.iter().any(|x| x == res))
    };
    for (op, res) in [
        ("CREATE", "pods"),
        ("CONNECT", "pods/exec"),
        ("CONNECT", "pods/attach"),
        ("CONNECT", "pods/portforward"),
    ] {
        assert!(covers(op, res), "{op} {res} is not matched: {rules:?}");
    }
    let sel = &mc["namespaceSelector"]["matchExpressions"][0];
    assert_eq!(sel["key"], "kubernetes.io/metadata.name");
    assert_eq!(sel["values"][0].as_str(), Some(ns));
    // Whom it names: the two accounts of deploy/, in the namespace.
    let user = |sa: &Value| {
        format!(
            "'system:serviceaccount:{}:{}'",
            sa["metadata"]["namespace"].as_str().expect("namespace"),
            sa["metadata"]["name"].as_str().expect("name")
        )
    };
    assert_eq!(variable(&policy, "sweepUser"), user(&sweep_sa));
    assert_eq!(variable(&policy, "fleetUser"), user(&fleet_sa));
    assert!(user(&sweep_sa).contains(&format!(":{ns}:")));
    // The CronJob's pod is what the policy lets run as the fleet: its image, `railsweep
    // fleet`, one container, no hostPath, a Job named railsweep-fleet-*.
    let cronjob = deploy_doc("fleet-job.yaml", "CronJob", "railsweep-fleet");
    let pod = &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], fleet_sa["metadata"]["name"]);
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    assert!(pod.get("initContainers").is_none());
    let image = containers[0]["image"].as_str().expect("image");
    assert_eq!(variable(&policy, "fleetImage"), format!("'{image}'"));
    assert_eq!(containers[0]["command"][0], "railsweep");
    assert_eq!(containers[0]["command"][1], "fleet");
    for v in pod["volumes"].as_array().expect("volumes") {
        assert!(v.get("hostPath").is_none(), "{v:?}");
    }
    assert!(
        cronjob["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n == "railsweep-fleet"),
        "its Jobs are railsweep-fleet-*"
    );
    // Kept so by the kustomization: another namespace or image reaches the policy.
    let targets: Vec<String> = k["replacements"]
        .as_array()
        .expect("replacements")
        .iter()
        .flat_map(|r| r["targets"].as_array().cloned().unwrap_or_default())
        .filter(|t| t["select"]["name"] == "railsweep-fleet-pods")
        .flat_map(|t| t["fieldPaths"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    for path in [
        "spec.variables.[name=sweepUser].expression",
        "spec.variables.[name=fleetUser].expression",
        "spec.variables.[name=fleetImage].expression",
        "spec.matchConstraints.namespaceSelector.matchExpressions.0.values.0",
    ] {
        assert!(
            targets.iter().any(|t| t == path),
            "no replacement for {path}: {targets:?}"
        );
    }
    // Neither account may make a Job (the Job controller would then make a fleet pod for it),
    // edit the CronJob, mint a token, read a Secret or add a container to a running pod.
    for (file, role) in [
        ("rbac.yaml", "railsweep"),
        ("fleet-job.yaml", "railsweep-fleet"),
    ] {
        let r = deploy_doc(file, "Role", role);
        for rule in r["rules"].as_array().expect("rules") {
            for res in rule["resources"].as_array().expect("resources") {
                let res = res.as_str().expect("text");
                assert!(
                    ![
                        "jobs",
                        "cronjobs",
                        "serviceaccounts",
                        "serviceaccounts/token",
                        "secrets",
                        "pods/ephemeralcontainers",
                        "*"
                    ]
                    .contains(&res),
                    "deploy/{file}'s Role {role} grants {res}"
                );
            }
        }
    }
}

//! What deploy/ ships, against the real API server (`scripts/cluster`): the account that `run`
//! and `compare` use (deploy/rbac.yaml) cannot patch a node at all; the fleet's account
//! (deploy/fleet-job.yaml: its ClusterRole railsweep-verdicts, held by its
//! ValidatingAdmissionPolicy) may change a node's labels, annotations and taints under
//! railbench.io/ and nothing else (exactly railsweep's keys, its taint NoSchedule only), and
//! write, change and delete only railsweep's own DeviceTaintRules (railsweep-device-taints);
//! the CronJob's pod passes Pod Security's `restricted` level; deploy/rbac.yaml's account
//! cannot run a pod as the fleet's account nor exec into the fleet's pods
//! (railsweep-fleet-pods). Each test patches a Node object (or a DeviceTaintRule on a device
//! of no node) of its own, with no agent behind it, so the tests run beside the others.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::testcluster::{shipped, shipped_named, TestCluster};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount, Taint};
use k8s_openapi::api::resource::v1::DeviceTaintRule;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Config};
use serde_json::{json, Value};

/// A key of another owner on the test node: a label, an annotation and a taint.
const OTHER: &str = "example.com/keep";

/// A Node object `name` (no agent) with a label, an annotation and a taint of another owner.
async fn node(c: &TestCluster, name: &str) -> Api<Node> {
    let api: Api<Node> = Api::all(c.client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": { OTHER: "yes" },
            "annotations": { OTHER: "kept" },
        },
        "spec": { "taints": [{ "key": OTHER, "value": "x", "effect": "NoSchedule" }] },
    }))
    .expect("a Node");
    api.create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("creates node {name}: {e}"));
    api
}

/// A client with the credentials of the kubeconfig at `path`.
async fn client_of(path: &Path) -> Client {
    let config = Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(path).expect("reads the kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("kubeconfig resolves");
    Client::try_from(config).expect("client")
}

/// The test cluster, a namespace of this test's own (its name from `prefix`), and where the
/// test's kubeconfig for it goes (the account's, written by the test).
async fn test_namespace(prefix: &str) -> (TestCluster, String, PathBuf) {
    let c = TestCluster::get().await;
    let ns = c.namespace(prefix, &[]).await;
    let kc = std::env::temp_dir().join(format!("railbench-{ns}.kubeconfig"));
    (c, ns, kc)
}

/// The fleet's service account as deploy/fleet-job.yaml ships it, created in namespace `ns`.
async fn fleet_account(c: &TestCluster, ns: &str) {
    let mut sa: ServiceAccount = shipped("fleet-job.yaml", "ServiceAccount");
    sa.metadata.namespace = None;
    Api::<ServiceAccount>::namespaced(c.client.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .expect("creates the fleet's service account");
}

/// Returns once the admission policy `name` is enforced (a new policy is, a moment after it is
/// made): when `dry_run` is refused by a ValidatingAdmissionPolicy, tried for 30 s at most.
async fn until_enforced<F, Fut>(name: &str, mut dry_run: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    for _ in 0..150 {
        if let Err(kube::Error::Api(e)) = dry_run().await {
            assert!(e.message.contains("ValidatingAdmissionPolicy"), "{e:?}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "{name} is not enforced after 30 s (is the API server's ValidatingAdmissionPolicy \
         admission plugin on?)"
    );
}

/// Merge-patch node `name` through `api` (a dry run with `dry`).
async fn patch(api: &Api<Node>, name: &str, p: &Value, dry: bool) -> Result<(), kube::Error> {
    let pp = PatchParams {
        field_manager: Some("railsweep".into()),
        dry_run: dry,
        ..PatchParams::default()
    };
    api.patch(name, &pp, &Patch::Merge(p)).await.map(|_| ())
}

/// Patch node `name`'s taints to `edit(current)`, with the node's resourceVersion as a
/// precondition (as railsweep does), again on a conflict: the node-lifecycle controller may
/// taint an agent-less node meanwhile.
async fn patch_taints(
    api: &Api<Node>,
    name: &str,
    edit: impl Fn(&mut Vec<Taint>),
) -> Result<(), kube::Error> {
    for _ in 0..5 {
        let n = api.get(name).await?;
        let mut taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
        edit(&mut taints);
        let p = json!({
            "metadata": { "resourceVersion": n.metadata.resource_version },
            "spec": { "taints": taints },
        });
        match patch(api, name, &p, false).await {
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            other => return other,
        }
    }
    panic!("node {name}: 5 conflicts in a row")
}

/// The refusal of the policy, with the message of the rule that refused.
fn refused_by_policy(r: Result<(), kube::Error>, rule: &str, what: &str) {
    match r {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{what}: {e:?}");
            assert!(
                e.message.contains("ValidatingAdmissionPolicy") && e.message.contains(rule),
                "{what}: refused by the policy's rule `{rule}`: {}",
                e.message
            );
        }
        other => panic!("{what}: admitted, must be refused: {other:?}"),
    }
}

/// Node `rbac-NS` for the tests of namespace `ns`: its name, the admin's nodes API, and the
/// nodes API as the account of kubeconfig `kc`.
async fn rbac_node(c: &TestCluster, ns: &str, kc: &Path) -> (String, Api<Node>, Api<Node>) {
    let name = format!("rbac-{ns}");
    let admin = node(c, &name).await;
    (name, admin, Api::all(client_of(kc).await))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_and_compare_account_cannot_patch_nodes() {
    let (c, ns, kc) = test_namespace("rbac-run").await;
    c.railsweep_kubeconfig_with_nodes(&ns, &kc).await;
    let (name, admin, api) = rbac_node(&c, &ns, &kc).await;
    // The token works: it reads nodes (fleet --nodes SELECTOR lists them).
    api.get(&name).await.expect("reads the node");
    for p in [
        json!({ "metadata": { "labels": { "railbench.io/rails": "ok" } } }),
        json!({ "spec": { "unschedulable": true } }),
    ] {
        match patch(&api, &name, &p, false).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 403, "{p}: {e:?}");
                assert!(
                    e.message.contains("cannot patch resource \"nodes\""),
                    "refused by RBAC: {}",
                    e.message
                );
            }
            other => panic!("{p}: deploy/rbac.yaml's account patched a node: {other:?}"),
        }
    }
    let _ = admin.delete(&name, &DeleteParams::default()).await;
    let _ = std::fs::remove_file(&kc);
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verdict_account_changes_only_railbench_keys() {
    let (c, ns, kc) = test_namespace("rbac-verdicts").await;
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let (name, admin, api) = rbac_node(&c, &ns, &kc).await;

    let other_label = json!({ "metadata": { "labels": { "example.com/other": "x" } } });
    until_enforced("railsweep-verdicts", || {
        patch(&api, &name, &other_label, true)
    })
    .await;

    // Admitted: railsweep's own keys, set and removed.
    let ours = json!({
        "metadata": {
            "labels": { "railbench.io/rails": "failed", "railbench.io/rails-checked": "2026-12-04" },
            "annotations": { "railbench.io/rails-evidence": "rail 1: 12 % of the fleet median" },
        }
    });
    patch(&api, &name, &ours, false)
        .await
        .expect("railbench.io/ labels and annotation admitted");
    patch_taints(&api, &name, |t| {
        t.push(Taint {
            key: "railbench.io/bad-rails".into(),
            value: Some("failed".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        })
    })
    .await
    .expect("the railbench.io/ taint admitted");
    patch_taints(&api, &name, |t| {
        t.retain(|t| t.key != "railbench.io/bad-rails")
    })
    .await
    .expect("the railbench.io/ taint's removal admitted");
    let unset = json!({ "metadata": { "labels": { "railbench.io/rails-checked": null } } });
    patch(&api, &name, &unset, false)
        .await
        .expect("a railbench.io/ label's removal admitted");

    // Refused: any other key, added, changed or removed, and cordoning; issue 53, finding 4:
    // another label or annotation under railbench.io/.
    for (kind, key, value, what) in [
        (
            "labels",
            "example.com/other",
            json!("x"),
            "a new label of another owner",
        ),
        (
            "labels",
            OTHER,
            json!("no"),
            "another owner's label changed",
        ),
        (
            "labels",
            OTHER,
            Value::Null,
            "another owner's label removed",
        ),
        (
            "annotations",
            "example.com/other",
            json!("x"),
            "a new annotation of another owner",
        ),
        (
            "annotations",
            OTHER,
            Value::Null,
            "another owner's annotation removed",
        ),
        (
            "labels",
            "railbench.io/other",
            json!("x"),
            "another label under railbench.io/",
        ),
        (
            "annotations",
            "railbench.io/other",
            json!("x"),
            "another annotation under railbench.io/",
        ),
    ] {
        let doc = json!({ "metadata": { kind: { key: value } } });
        let rule = format!("may change only {kind} under railbench.io/");
        refused_by_policy(patch(&api, &name, &doc, false).await, &rule, what);
    }
    let cordon = json!({ "spec": { "unschedulable": true } });
    refused_by_policy(
        patch(&api, &name, &cordon, false).await,
        "may not cordon or uncordon a node",
        "cordon",
    );
    let taints = "may change only taints under railbench.io/";
    refused_by_policy(
        patch_taints(&api, &name, |t| {
            t.push(Taint {
                key: "example.com/other".into(),
                effect: "NoExecute".into(),
                ..Taint::default()
            })
        })
        .await,
        taints,
        "a taint of another owner",
    );
    refused_by_policy(
        patch_taints(&api, &name, |t| t.retain(|t| t.key != OTHER)).await,
        taints,
        "another owner's taint removed",
    );
    // Issue 53, finding 4: railsweep's key with another effect (NoExecute evicts workloads),
    // another key under railbench.io/.
    for (key, effect) in [
        ("railbench.io/bad-rails", "NoExecute"),
        ("railbench.io/bad-rails", "PreferNoSchedule"),
        ("railbench.io/drain", "NoSchedule"),
    ] {
        refused_by_policy(
            patch_taints(&api, &name, |t| {
                t.push(Taint {
                    key: key.into(),
                    value: Some("1".into()),
                    effect: effect.into(),
                    time_added: None,
                })
            })
            .await,
            taints,
            &format!("taint {key}:{effect}"),
        );
    }

    // What the admin sees: railsweep's label, the other owner's keys untouched.
    let n = admin.get(&name).await.expect("gets the node");
    let l = n.metadata.labels.unwrap_or_default();
    assert_eq!(
        l.get("railbench.io/rails").map(String::as_str),
        Some("failed")
    );
    assert!(!l.contains_key("railbench.io/rails-checked"), "{l:?}");
    assert_eq!(l.get(OTHER).map(String::as_str), Some("yes"), "{l:?}");
    assert!(!l.contains_key("example.com/other"), "{l:?}");
    let a = n.metadata.annotations.unwrap_or_default();
    assert_eq!(a.get(OTHER).map(String::as_str), Some("kept"), "{a:?}");
    let spec = n.spec.unwrap_or_default();
    assert_ne!(spec.unschedulable, Some(true));
    let keys: Vec<String> = spec
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert!(keys.iter().any(|k| k == OTHER), "{keys:?}");
    assert!(
        !keys
            .iter()
            .any(|k| k.starts_with("railbench.io/") || k == "example.com/other"),
        "{keys:?}"
    );

    let _ = admin.delete(&name, &DeleteParams::default()).await;
    let _ = std::fs::remove_file(&kc);
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cronjobs_pod_passes_the_restricted_pod_security_level() {
    let c = TestCluster::get().await;
    let ns = c
        .namespace(
            "deploy-restricted",
            &[("pod-security.kubernetes.io/enforce", "restricted")],
        )
        .await;
    fleet_account(&c, &ns).await;
    let cj: Value = shipped("fleet-job.yaml", "CronJob");
    let template = &cj["spec"]["jobTemplate"]["spec"]["template"];
    let pod = |template: &Value| -> Pod {
        let mut v = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"].clone(),
                            "spec": template["spec"].clone() });
        v["metadata"]["name"] = "railsweep-fleet".into();
        serde_json::from_value(v).expect("a Pod")
    };
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    pods.create(&dry, &pod(template))
        .await
        .expect("the CronJob's pod is admitted at Pod Security level restricted");
    let spec = &template["spec"]["containers"][0]["securityContext"];
    assert_eq!(spec["readOnlyRootFilesystem"], json!(true), "{spec}");
    // The check can fail: without its seccomp profile the same pod is refused.
    let mut loose = template.clone();
    loose["spec"]["securityContext"]
        .as_object_mut()
        .expect("a pod securityContext")
        .remove("seccompProfile");
    match pods.create(&dry, &pod(&loose)).await {
        Err(kube::Error::Api(e)) => assert!(
            e.message
                .contains("violates PodSecurity \"restricted:latest\"")
                && e.message.contains("seccompProfile"),
            "{}",
            e.message
        ),
        other => panic!("a pod without a seccomp profile was admitted at restricted: {other:?}"),
    }
    c.delete_namespace(&ns).await;
}

/// Applies every object of deploy/`file` as it is (its names and namespace untouched), as
/// `kubectl apply --server-side -f deploy/FILE` does: again on a later run, it changes nothing.
async fn apply_as_shipped(c: &TestCluster, file: &str) {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let path = format!("{}/../deploy/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reads {path}: {e}"));
    for obj in crate::support::testcluster::yaml_docs(&text) {
        let (api_version, kind) = (
            obj["apiVersion"].as_str().expect("apiVersion"),
            obj["kind"].as_str().expect("kind"),
        );
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        let name = obj["metadata"]["name"]
            .as_str()
            .expect("a name")
            .to_string();
        let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(c.client.clone(), ns, &ar),
            None => Api::all_with(c.client.clone(), &ar),
        };
        api.patch(
            &name,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("applies deploy/{file}'s {kind} {name}: {e}"));
    }
}

/// Whether `r` is the API server's 403.
fn forbidden<T: std::fmt::Debug>(r: Result<T, kube::Error>, what: &str) {
    match r {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{what}: {e:?}"),
        other => panic!("{what}: deploy/rbac.yaml's account was let: {other:?}"),
    }
}

/// The README's quick start as written, with deploy/ applied as it is: `kubectl apply -f
/// deploy/namespace.yaml -f deploy/rbac.yaml`, `kubectl -n railbench create token railsweep`,
/// then `railsweep run -n railbench --client-pod A --server-pod B --tclass 41` with that token
/// (`--inject`, the README's way for pods without rdmabw in their image, copying the fake): every
/// rail is measured, exit 0. The same token is refused what deploy/rbac.yaml does not grant:
/// railsweep on pods of another namespace (exit 2, the server's 403 in kubectl's words), and at
/// the API server, secrets, pods elsewhere, deleting the namespace, writing a node. The pods are
/// named after this process (A and B could be left from an earlier run); `railbench` stays, as
/// deploy/ leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_quick_start_works_with_deploys_account_as_applied() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::ListParams;
    let c = TestCluster::get().await;
    for file in ["namespace.yaml", "rbac.yaml"] {
        apply_as_shipped(&c, file).await;
    }
    let ns = "railbench";
    c.default_service_account(ns).await;
    let f = crate::support::fake::Fake::new(2);
    let (a, b) = (
        format!("quick-a-{}", std::process::id()),
        format!("quick-b-{}", std::process::id()),
    );
    c.pod(ns, &a, "node-a", false, "rdmabw").await;
    c.pod(ns, &b, "node-b", false, "rdmabw").await;
    let token = c.service_account_token(ns, "railsweep").await;
    let kc = f.file("kubeconfig");
    c.write_token_kubeconfig(ns, &token, &kc);
    let kc_s = kc.display().to_string();
    let fake = f.path().display().to_string();
    let railsweep = |namespace: &str, csv: &std::path::Path| {
        let csv_s = csv.display().to_string();
        let args = [
            "run",
            "-n",
            namespace,
            "--client-pod",
            &a,
            "--server-pod",
            &b,
            "--tclass",
            "41",
            "--kubeconfig",
            &kc_s,
            "--inject",
            "--inject-binary",
            &fake,
            "--output-file",
            &csv_s,
        ]
        .map(str::to_string);
        async move {
            tokio::process::Command::new(env!("CARGO_BIN_EXE_railsweep"))
                .args(args)
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .expect("railsweep runs")
        }
    };
    let csv = f.file("quick.csv");
    let r = railsweep(ns, &csv).await;
    let err = String::from_utf8_lossy(&r.stderr).into_owned();
    assert_eq!(r.status.code(), Some(0), "{err}");
    let rows = results::read_path(&csv).expect("reads the results");
    assert_eq!(rows.len(), 2, "{err}");
    for row in &rows {
        assert_eq!(row.status, results::RailStatus::Ok, "{row:?}");
        assert_eq!(row.client_pod.as_deref(), Some(a.as_str()));
        assert_eq!(
            (row.client_node.as_str(), row.server_node.as_str()),
            ("node-a", "node-b")
        );
    }

    // Pods of another namespace: railsweep says the server's 403 as kubectl would, and exits 2.
    let r = railsweep("default", &f.file("default.csv")).await;
    let err = String::from_utf8_lossy(&r.stderr).into_owned();
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("Error from server (Forbidden)"), "{err}");
    assert!(
        err.contains("cannot get resource \"pods\"") && err.contains("\"default\""),
        "{err}"
    );
    assert!(
        !err.contains("Status {") && !err.contains("ApiError"),
        "{err}"
    );

    // What deploy/rbac.yaml grants, and what it does not (dry runs: nothing changes if let).
    let user = client_of(&kc).await;
    let pods: Api<Pod> = Api::namespaced(user.clone(), ns);
    pods.list(&ListParams::default())
        .await
        .expect("lists pods in railbench");
    Api::<Node>::all(user.clone())
        .list(&ListParams::default())
        .await
        .expect("lists nodes (fleet --nodes SELECTOR)");
    forbidden(
        Api::<Secret>::namespaced(user.clone(), ns)
            .list(&ListParams::default())
            .await,
        "list secrets in railbench",
    );
    let dry = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    forbidden(
        Api::<k8s_openapi::api::core::v1::Namespace>::all(user.clone())
            .delete(ns, &dry)
            .await,
        "delete namespace railbench",
    );
    let pod: Pod = pods.get(&a).await.expect("gets its pod");
    let mut elsewhere = Pod {
        metadata: kube::api::ObjectMeta {
            name: Some(a.clone()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: pod.spec,
        status: None,
    };
    if let Some(s) = elsewhere.spec.as_mut() {
        s.node_name = None;
    }
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    forbidden(
        Api::<Pod>::namespaced(user.clone(), "default")
            .create(&pp, &elsewhere)
            .await,
        "create a pod in default",
    );
    forbidden(
        Api::<Node>::all(user)
            .patch(
                "node-a",
                &PatchParams {
                    dry_run: true,
                    ..PatchParams::default()
                },
                &Patch::Merge(json!({ "metadata": { "labels": { "railbench.io/rails": "ok" } } })),
            )
            .await,
        "patch node node-a",
    );

    let admin: Api<Pod> = Api::namespaced(c.client.clone(), ns);
    for p in [&a, &b] {
        let _ = admin.delete(p, &DeleteParams::default()).await;
    }
}

/// deploy/fleet-job.yaml's pod policy (railsweep-fleet-pods) and its binding, made for `ns`: its
/// namespace and the two accounts' user names are `ns`'s (cluster-wide objects named after
/// `ns`). The API server enforces a new policy a moment later, not at once.
async fn fleet_pod_policy(c: &TestCluster, ns: &str) {
    let name = format!("railsweep-fleet-pods-{ns}");
    let mut policy: Value = shipped_named(
        "fleet-job.yaml",
        "ValidatingAdmissionPolicy",
        "railsweep-fleet-pods",
    );
    policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"] =
        json!([ns]);
    for v in policy["spec"]["variables"]
        .as_array_mut()
        .expect("variables")
    {
        let account = match v["name"].as_str() {
            Some("sweepUser") => "railsweep",
            Some("fleetUser") => "railsweep-fleet",
            _ => continue,
        };
        v["expression"] = format!("'system:serviceaccount:{ns}:{account}'").into();
    }
    let binding: Value = shipped_named(
        "fleet-job.yaml",
        "ValidatingAdmissionPolicyBinding",
        "railsweep-fleet-pods",
    );
    c.admission_policy(&name, policy, binding).await;
}

/// A pod of railsweep's shape in `ns`: `sleep infinity`, no token, as `account`.
fn plain_pod(name: &str, account: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "serviceAccountName": account,
            "automountServiceAccountToken": false,
            "nodeName": "node-a",
            "containers": [{ "name": "rdmabw", "image": "railbench/rdmabw:0.1.0",
                             "imagePullPolicy": "Never", "command": ["sleep", "infinity"] }],
        },
    }))
    .expect("a Pod")
}

/// Issue 53, finding 4: deploy/rbac.yaml's account may create pods and exec into pods in the
/// namespace where the fleet's account holds the verdict rights. With the pod policy it can
/// neither run a pod as railsweep-fleet nor exec into a railsweep-fleet-* pod, nor mount a
/// hostPath; its own pods and exec into them still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_account_cannot_reach_the_fleets_rights() {
    use orchestrator::runner::{KubeRunner, Runner};
    let (c, ns, kc) = test_namespace("fleet-pods").await;
    c.railsweep_kubeconfig(&ns, None, &kc).await;
    fleet_account(&c, &ns).await;
    // The fleet's pod (its name as a CronJob's Job gives it), made by the administrator
    // before the policy: the one to exec into.
    let fleet_pod = "railsweep-fleet-29412345-x7k2q";
    c.pod(&ns, fleet_pod, "node-a", false, "railsweep").await;
    c.pod(&ns, "sweep-own", "node-a", false, "rdmabw").await;
    fleet_pod_policy(&c, &ns).await;
    let user = client_of(&kc).await;
    let pods: Api<Pod> = Api::namespaced(user.clone(), &ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let as_fleet = plain_pod("as-fleet", Some("railsweep-fleet"));
    until_enforced("railsweep-fleet-pods", || {
        let (pods, dry, pod) = (&pods, &dry, &as_fleet);
        async move { pods.create(dry, pod).await.map(|_| ()) }
    })
    .await;
    refused_by_policy(
        pods.create(&dry, &as_fleet).await.map(|_| ()),
        "a pod runs as railsweep-fleet only as the fleet CronJob's",
        "a pod as railsweep-fleet by the railsweep account",
    );
    let mut host_path = plain_pod("host-path", None);
    if let Some(s) = host_path.spec.as_mut() {
        s.volumes = Some(vec![serde_json::from_value(
            json!({ "name": "h", "hostPath": { "path": "/var/lib/kubelet" } }),
        )
        .expect("a volume")]);
    }
    refused_by_policy(
        pods.create(&dry, &host_path).await.map(|_| ()),
        "mount no hostPath volume",
        "a hostPath volume",
    );
    // Its own kind of pod is admitted.
    pods.create(&dry, &plain_pod("own", None))
        .await
        .expect("the railsweep account's own pod is admitted");
    // Exec: into the fleet's pod refused, into its own pod let.
    let r = KubeRunner::from_client(user, &ns, "test", None);
    let into_fleet = r.exec(fleet_pod, &["true".to_string()], None).await;
    assert!(
        into_fleet.is_err(),
        "the railsweep account exec'd into {fleet_pod}: {into_fleet:?}"
    );
    r.exec("sweep-own", &["true".to_string()], None)
        .await
        .expect("the railsweep account execs into its own pod");
    let admin: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    for p in [fleet_pod, "sweep-own"] {
        let _ = admin.delete(p, &DeleteParams::default()).await;
    }
    let _ = std::fs::remove_file(&kc);
    c.delete_namespace(&ns).await;
}

/// A DeviceTaintRule `name` on a device of no node, labelled as railsweep's with `ours`.
fn taint_rule(name: &str, ours: bool, key: &str, effect: &str) -> DeviceTaintRule {
    let labels = if ours {
        json!({ "app.kubernetes.io/managed-by": "railsweep", "railbench.io/rail": "1" })
    } else {
        json!({ "team": "ops" })
    };
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "deviceSelector": { "driver": "dra.net", "pool": "no-such-node", "device": "net2" },
            "taint": { "key": key, "value": "degraded", "effect": effect },
        },
    }))
    .expect("a DeviceTaintRule")
}

/// Issue 54, item 3: deploy/fleet-job.yaml's verdict account and DeviceTaintRules, against the
/// real API server: railsweep's own rule (its label, railbench.io/bad-rail, NoSchedule) is
/// created, changed and deleted; a rule with NoExecute, another key or without railsweep's
/// label is refused, and so is changing or deleting another owner's rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verdict_account_writes_and_deletes_only_railsweeps_device_taint_rules() {
    let (c, ns, kc) = test_namespace("rbac-taintrules").await;
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let admin: Api<DeviceTaintRule> = Api::all(c.client.clone());
    let api: Api<DeviceTaintRule> = Api::all(client_of(&kc).await);
    let (key, ours_msg, write_msg) = (
        "railbench.io/bad-rail",
        "may change or delete only its own DeviceTaintRules",
        "may write only DeviceTaintRules labelled app.kubernetes.io/managed-by=railsweep",
    );
    let create = |r: DeviceTaintRule, dry: bool| {
        let api = api.clone();
        async move {
            let pp = PostParams {
                dry_run: dry,
                ..PostParams::default()
            };
            api.create(&pp, &r).await.map(|_| ())
        }
    };
    let evicting = taint_rule(&format!("{ns}-noexecute"), true, key, "NoExecute");
    until_enforced("railsweep-device-taints", || create(evicting.clone(), true)).await;
    refused_by_policy(
        create(evicting, false).await,
        write_msg,
        "railsweep's key with NoExecute",
    );
    refused_by_policy(
        create(
            taint_rule(
                &format!("{ns}-other-key"),
                true,
                "railbench.io/drain",
                "NoSchedule",
            ),
            false,
        )
        .await,
        write_msg,
        "another key",
    );
    refused_by_policy(
        create(
            taint_rule(&format!("{ns}-unlabelled"), false, key, "NoSchedule"),
            false,
        )
        .await,
        write_msg,
        "without railsweep's label",
    );
    // Admitted: railsweep's own rule, created, changed, deleted.
    let ours = format!("{ns}-ours");
    create(taint_rule(&ours, true, key, "NoSchedule"), false)
        .await
        .expect("railsweep's rule admitted");
    let pp = PatchParams::apply("railsweep").force();
    let mut failed = taint_rule(&ours, true, key, "NoSchedule");
    failed.spec.taint.value = Some("failed".into());
    api.patch(&ours, &pp, &Patch::Apply(&failed))
        .await
        .expect("railsweep's rule changed");
    api.delete(&ours, &DeleteParams::default())
        .await
        .expect("railsweep's rule deleted");
    // Another owner's rule: readable, not changed, not deleted.
    let theirs = format!("{ns}-theirs");
    admin
        .create(
            &PostParams::default(),
            &taint_rule(&theirs, false, "example.com/maintenance", "NoSchedule"),
        )
        .await
        .expect("the admin creates a rule");
    api.get(&theirs).await.expect("reads another owner's rule");
    refused_by_policy(
        api.delete(&theirs, &DeleteParams::default())
            .await
            .map(|_| ()),
        ours_msg,
        "another owner's rule deleted",
    );
    refused_by_policy(
        api.patch(
            &theirs,
            &pp,
            &Patch::Apply(&taint_rule(&theirs, true, key, "NoSchedule")),
        )
        .await
        .map(|_| ()),
        ours_msg,
        "another owner's rule taken over",
    );
    admin
        .delete(&theirs, &DeleteParams::default())
        .await
        .expect("the admin deletes its rule");
    c.delete_namespace(&ns).await;
}

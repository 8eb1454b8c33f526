//! The real Kubernetes control plane that `scripts/cluster up` starts: kube-apiserver, etcd,
//! kube-scheduler and kube-controller-manager built from Kubernetes' own modules, and this
//! project's node agents, whose pods run their commands on this machine. `scripts/test` starts
//! it before the tests and names its admin kubeconfig in `RAILBENCH_TEST_KUBECONFIG`. Each
//! test works in a namespace of its own, so tests share the cluster without seeing each other.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Namespace, Pod, PodSpec, ServiceAccount, Toleration,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta,
    PostParams,
};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config};

/// The environment variable `scripts/test` sets to the cluster's admin kubeconfig.
pub const KUBECONFIG_ENV: &str = "RAILBENCH_TEST_KUBECONFIG";

/// The master every test network's CNI config names: a veth made by `scripts/cluster up --link`.
pub const MASTER: &str = "tcrail0";

pub struct TestCluster {
    /// The admin kubeconfig (system:masters).
    pub kubeconfig: PathBuf,
    pub client: Client,
}

impl TestCluster {
    /// The running cluster. Fails the test, naming the fix, where none was started: a test of
    /// railsweep's Kubernetes behaviour never passes without meeting the real components.
    pub async fn get() -> TestCluster {
        let kubeconfig = PathBuf::from(std::env::var(KUBECONFIG_ENV).unwrap_or_else(|_| {
            panic!(
                "{KUBECONFIG_ENV} is not set: these tests need the real control plane. Start it with \
                 `scripts/cluster up --node node-a --node node-b` and export {KUBECONFIG_ENV}=<the kubeconfig it prints> \
                 (scripts/test does both)"
            )
        }));
        let config = Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).expect("reads the kubeconfig"),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("kubeconfig resolves");
        let client = Client::try_from(config).expect("client");
        TestCluster { kubeconfig, client }
    }

    /// A new namespace `PREFIX-N-PID`, with `labels` (Pod Security levels, for one): its name.
    pub async fn namespace(&self, prefix: &str, labels: &[(&str, &str)]) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}-{}-{}",
            N.fetch_add(1, Ordering::Relaxed),
            std::process::id()
        );
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("creates the namespace");
        self.default_service_account(&name).await;
        name
    }

    /// Waits up to 30 s for namespace `ns`'s default service account, which pods need and the
    /// controller-manager's service-account controller makes; panics without it.
    pub async fn default_service_account(&self, ns: &str) {
        let sa: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let ready = tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(sa, "default", |s: Option<&_>| s.is_some()),
        )
        .await;
        assert!(
            matches!(ready, Ok(Ok(_))),
            "namespace {ns}: no default service account after 30 s (is kube-controller-manager running?)"
        );
    }

    /// Creates pod `name` in `ns` on `node` (a `sleep infinity` container named `container`),
    /// and waits until the node agent reports it Running.
    pub async fn pod(
        &self,
        ns: &str,
        name: &str,
        node: &str,
        host_network: bool,
        container: &str,
    ) -> Pod {
        self.create_running(ns, test_pod(name, node, host_network, container))
            .await
    }

    /// A pod as [`TestCluster::pod`] makes, with the label `key=value`.
    pub async fn labelled_pod(&self, ns: &str, name: &str, node: &str, label: (&str, &str)) -> Pod {
        let mut pod = test_pod(name, node, false, "rdmabw");
        pod.metadata.labels = Some(BTreeMap::from([(label.0.to_string(), label.1.to_string())]));
        self.create_running(ns, pod).await
    }

    /// A pod as [`TestCluster::pod`] makes, every exec in which the node agent starts `delay`
    /// late (its annotation `testcluster.railbench/exec-delay`), as a node under load does.
    pub async fn pod_with_slow_execs(&self, ns: &str, name: &str, node: &str, delay: &str) -> Pod {
        let mut pod = test_pod(name, node, false, "rdmabw");
        pod.metadata.annotations = Some(BTreeMap::from([(
            "testcluster.railbench/exec-delay".to_string(),
            delay.to_string(),
        )]));
        self.create_running(ns, pod).await
    }

    /// A pod on `node`'s host network that declares host port `port`, Running; with
    /// `hold: Some(s)` it ignores SIGTERM and has a grace period of `s` seconds (the node
    /// agent's most is 10), so that a delete leaves it Terminating, and running, that long.
    pub async fn pod_with_host_port(
        &self,
        ns: &str,
        name: &str,
        node: &str,
        port: u16,
        hold: Option<i64>,
    ) -> Pod {
        let mut pod = test_pod(name, node, true, "holder");
        if let (Some(secs), Some(spec)) = (hold, pod.spec.as_mut()) {
            spec.termination_grace_period_seconds = Some(secs);
            spec.containers[0].command = Some(
                ["sh", "-c", "trap '' TERM; exec sleep infinity"]
                    .map(String::from)
                    .to_vec(),
            );
        }
        if let Some(spec) = pod.spec.as_mut() {
            spec.containers[0].ports = Some(vec![ContainerPort {
                container_port: i32::from(port),
                host_port: Some(i32::from(port)),
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            }]);
        }
        self.create_running(ns, pod).await
    }

    /// The names of the pods railsweep made in `ns` that are not being deleted, sorted.
    pub async fn pods_left(&self, ns: &str) -> Vec<String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let lp = ListParams::default().labels("app.kubernetes.io/managed-by=railsweep");
        let mut names: Vec<String> = pods
            .list(&lp)
            .await
            .expect("lists")
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.name)
            .collect();
        names.sort();
        names
    }

    /// Deletes namespace `ns` (and so its pods); does not wait.
    pub async fn delete_namespace(&self, ns: &str) {
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(ns, &DeleteParams::default())
            .await;
    }

    async fn create_running(&self, ns: &str, pod: Pod) -> Pod {
        let name = pod.metadata.name.clone().expect("named");
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("creates the pod");
        let running = tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(pods.clone(), &name, conditions::is_pod_running()),
        )
        .await;
        assert!(
            matches!(running, Ok(Ok(_))),
            "pod {ns}/{name} not Running after 60 s"
        );
        pods.get(&name).await.expect("gets the pod")
    }

    /// A service account in `ns` bound to a Role of `rules`, and a kubeconfig with its token;
    /// the token.
    pub async fn token_kubeconfig(
        &self,
        ns: &str,
        rules: Vec<PolicyRule>,
        path: &std::path::Path,
    ) -> String {
        let meta = |name: &str| ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..ObjectMeta::default()
        };
        let first_rule = rules.first().cloned();
        let pp = PostParams::default();
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        sas.create(
            &pp,
            &ServiceAccount {
                metadata: meta("railsweep"),
                ..ServiceAccount::default()
            },
        )
        .await
        .expect("creates the service account");
        Api::<Role>::namespaced(self.client.clone(), ns)
            .create(
                &pp,
                &Role {
                    metadata: meta("railsweep"),
                    rules: Some(rules),
                },
            )
            .await
            .expect("creates the role");
        Api::<RoleBinding>::namespaced(self.client.clone(), ns)
            .create(
                &pp,
                &RoleBinding {
                    metadata: meta("railsweep"),
                    role_ref: RoleRef {
                        api_group: Some("rbac.authorization.k8s.io".into()),
                        kind: "Role".into(),
                        name: "railsweep".into(),
                    },
                    subjects: Some(vec![railsweep_subject(ns)]),
                },
            )
            .await
            .expect("binds the role");
        self.await_authorized(ns, Some(ns), first_rule.as_ref())
            .await;
        let token = self.service_account_token(ns, "railsweep").await;
        self.write_token_kubeconfig(ns, &token, path);
        token
    }

    /// A token of service account `sa` in `ns`, as `kubectl -n NS create token SA` gives.
    pub async fn service_account_token(&self, ns: &str, sa: &str) -> String {
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let tr = sas
            .create_token_request(
                sa,
                &PostParams::default(),
                &TokenRequest {
                    metadata: ObjectMeta::default(),
                    spec: Some(TokenRequestSpec {
                        audiences: Some(vec![]),
                        expiration_seconds: Some(3600),
                        ..TokenRequestSpec::default()
                    }),
                    status: None,
                },
            )
            .await
            .unwrap_or_else(|e| panic!("issues a token for {ns}/{sa}: {e}"));
        tr.status.expect("a token").token.expect("a token")
    }

    pub fn write_token_kubeconfig(&self, ns: &str, token: &str, path: &std::path::Path) {
        let admin = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("reads");
        let cluster = admin.clusters[0].cluster.clone().expect("cluster");
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: railbench-lab\n  cluster:\n    server: {}\n    certificate-authority-data: {}\n\
                 users:\n- name: railsweep\n  user:\n    token: {token}\ncontexts:\n- name: railbench-lab\n  context:\n    cluster: railbench-lab\n    user: railsweep\n    namespace: {ns}\n\
                 current-context: railbench-lab\n",
                cluster.server.expect("server"),
                cluster.certificate_authority_data.expect("CA data"),
            ),
        )
        .expect("writes");
    }

    /// A kubeconfig for namespace `ns` with the token of a service account bound to the Role
    /// that deploy/rbac.yaml ships (what the README says railsweep needs), less the rules for
    /// `without` (a resource name, to show what a missing grant gives).
    pub async fn railsweep_kubeconfig(
        &self,
        ns: &str,
        without: Option<&str>,
        path: &std::path::Path,
    ) -> PathBuf {
        let role: Role = shipped_rbac("Role");
        let mut rules = role.rules.expect("deploy/rbac.yaml's Role has rules");
        if let Some(res) = without {
            for r in &mut rules {
                if let Some(list) = r.resources.as_mut() {
                    list.retain(|x| x != res);
                }
            }
            rules.retain(|r| r.resources.as_ref().is_some_and(|l| !l.is_empty()));
        }
        let _ = self.token_kubeconfig(ns, rules, path).await;
        path.to_path_buf()
    }

    /// [`TestCluster::railsweep_kubeconfig`] with deploy/rbac.yaml's ClusterRole too (nodes
    /// `list`, for `fleet --nodes SELECTOR`), bound to the same service account.
    pub async fn railsweep_kubeconfig_with_nodes(
        &self,
        ns: &str,
        path: &std::path::Path,
    ) -> PathBuf {
        let kc = self.railsweep_kubeconfig(ns, None, path).await;
        self.bind_cluster_role(ns, shipped_rbac("ClusterRole"))
            .await;
        kc
    }

    /// A kubeconfig for namespace `ns` with the token of a service account that holds
    /// exactly deploy/fleet-job.yaml's Role and ClusterRoles (what its CronJob runs with: the
    /// nodes' list and the verdict rights), held by its ValidatingAdmissionPolicy; the token
    /// too, for an in-cluster run.
    pub async fn fleet_job_kubeconfig(&self, ns: &str, path: &std::path::Path) -> String {
        let role: Role = shipped("fleet-job.yaml", "Role");
        let rules = role.rules.expect("deploy/fleet-job.yaml's Role has rules");
        let token = self.token_kubeconfig(ns, rules, path).await;
        for name in ["railsweep-fleet-nodes", "railsweep-verdicts"] {
            self.bind_cluster_role(ns, shipped_named("fleet-job.yaml", "ClusterRole", name))
                .await;
        }
        self.verdict_policy(ns).await;
        token
    }

    /// deploy/fleet-job.yaml's ValidatingAdmissionPolicies of the verdict account (its node
    /// keys, and its DeviceTaintRules) and their bindings, made for `ns`'s railsweep service
    /// account instead of railbench's railsweep-fleet (cluster-wide objects named after `ns`).
    /// The API server enforces a new policy a moment later, not at once.
    pub async fn verdict_policy(&self, ns: &str) {
        let shipped_user = "system:serviceaccount:railbench:railsweep-fleet";
        for shipped_name in ["railsweep-verdicts", "railsweep-device-taints"] {
            let name = format!("{shipped_name}-{ns}");
            let mut policy: serde_json::Value =
                shipped_named("fleet-job.yaml", "ValidatingAdmissionPolicy", shipped_name);
            let cond = &mut policy["spec"]["matchConditions"][0]["expression"];
            let expr = cond.as_str().expect("a matchCondition").to_string();
            assert!(
                expr.contains(shipped_user),
                "the policy names {shipped_user}: {expr}"
            );
            *cond = expr
                .replace(
                    shipped_user,
                    &format!("system:serviceaccount:{ns}:railsweep"),
                )
                .into();
            let binding = shipped_named(
                "fleet-job.yaml",
                "ValidatingAdmissionPolicyBinding",
                shipped_name,
            );
            self.admission_policy(&name, policy, binding).await;
        }
    }

    /// Creates a ValidatingAdmissionPolicy and its binding (made from deploy/'s), both renamed
    /// `name` (cluster-wide objects).
    pub async fn admission_policy(
        &self,
        name: &str,
        mut policy: serde_json::Value,
        mut binding: serde_json::Value,
    ) {
        policy["metadata"]["name"] = name.into();
        binding["metadata"]["name"] = name.into();
        binding["spec"]["policyName"] = name.into();
        for (kind, obj) in [
            ("ValidatingAdmissionPolicy", policy),
            ("ValidatingAdmissionPolicyBinding", binding),
        ] {
            let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
            let ar = ApiResource::from_gvk(&gvk);
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            let obj: DynamicObject = serde_json::from_value(obj).expect("a DynamicObject");
            api.create(&PostParams::default(), &obj)
                .await
                .unwrap_or_else(|e| panic!("creates {kind} {name}: {e}"));
        }
    }

    /// The API server's host and port, and its CA certificate as the kubeconfig holds it
    /// (base64 of the PEM), from the admin kubeconfig.
    pub fn server(&self) -> (String, String, String) {
        let admin = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("reads");
        let cluster = admin.clusters[0].cluster.clone().expect("cluster");
        let url = cluster.server.expect("server");
        let hostport = url
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string();
        let (host, port) = hostport.rsplit_once(':').expect("host:port");
        (
            host.to_string(),
            port.to_string(),
            cluster.certificate_authority_data.expect("CA data"),
        )
    }

    /// `role` as a ClusterRole of its own for `ns`, bound to `ns`'s railsweep service account.
    pub async fn bind_cluster_role(&self, ns: &str, mut role: ClusterRole) {
        let name = format!(
            "{}-{ns}",
            role.metadata
                .name
                .clone()
                .unwrap_or_else(|| "railsweep".into())
        );
        role.metadata.name = Some(name.clone());
        let first_rule = role.rules.as_ref().and_then(|r| r.first().cloned());
        let pp = PostParams::default();
        Api::<ClusterRole>::all(self.client.clone())
            .create(&pp, &role)
            .await
            .expect("creates the ClusterRole");
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name,
            },
            subjects: Some(vec![railsweep_subject(ns)]),
        };
        Api::<ClusterRoleBinding>::all(self.client.clone())
            .create(&pp, &binding)
            .await
            .expect("binds the ClusterRole");
        self.await_authorized(ns, None, first_rule.as_ref()).await;
    }

    /// Wait until the API server's authorizer lets `ns`'s railsweep service account do what
    /// `rule` allows (its first verb on its first resource; in `namespace`, or cluster-wide):
    /// RBAC applies a new binding from its informer's cache, a moment after the create returns,
    /// and a railsweep started at once was once told Forbidden. Asked as the admin, by a
    /// SubjectAccessReview; at most 20 s.
    async fn await_authorized(&self, ns: &str, namespace: Option<&str>, rule: Option<&PolicyRule>) {
        let Some(rule) = rule else { return };
        let (Some(verb), Some(resource)) = (
            rule.verbs.first(),
            rule.resources.as_ref().and_then(|r| r.first()),
        ) else {
            return;
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(format!("system:serviceaccount:{ns}:railsweep")),
                groups: Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                    "system:authenticated".into(),
                ]),
                resource_attributes: Some(ResourceAttributes {
                    namespace: namespace.map(str::to_string),
                    verb: Some(verb.clone()),
                    group: rule.api_groups.as_ref().and_then(|g| g.first().cloned()),
                    resource: Some(resource.split('/').next().unwrap_or(resource).to_string()),
                    subresource: resource.split_once('/').map(|(_, s)| s.to_string()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let end = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let allowed = reviews
                .create(&PostParams::default(), &review)
                .await
                .ok()
                .and_then(|r| r.status)
                .is_some_and(|s| s.allowed);
            if allowed {
                return;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "the railsweep service account of {ns} is still not allowed to {verb} {resource} 20 s after its binding"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A kubeconfig like the admin's whose context defaults to `ns`, written to `path`.
    pub fn kubeconfig_in(&self, ns: &str, path: &std::path::Path) -> PathBuf {
        let text = std::fs::read_to_string(&self.kubeconfig).expect("reads the kubeconfig");
        std::fs::write(
            path,
            text.replace("namespace: default", &format!("namespace: {ns}")),
        )
        .expect("writes");
        path.to_path_buf()
    }

    /// The rail networks of [`crate::support::kube::MODE_OPTIONS`], as
    /// NetworkAttachmentDefinitions in `ns`: `rdma-ipvlan-0..15` and `sriov-rdma-rail-0..1`.
    /// Each is the IPvlan report's chain (its CNI plugins, with tuning's ARP sysctls and sbr)
    /// with two changes this machine needs: macvlan for ipvlan (the build machine's kernel has
    /// no ipvlan; the lab's has) and host-local for NVIDIA's IPAM. `pool` (a CNI name and a
    /// size) gives every network one shared host-local pool of that many addresses, as the
    /// report's 16 networks share one NVIDIA IPAM pool.
    pub async fn networks(&self, ns: &str, pool: Option<(&str, u8)>) {
        let mut nets: Vec<(String, String)> = (0..16)
            .map(|i| (format!("rdma-ipvlan-{i}"), format!("10.56.{i}.0/24")))
            .collect();
        nets.extend((0..2).map(|i| (format!("sriov-rdma-rail-{i}"), format!("10.57.{i}.0/24"))));
        for (name, subnet) in nets {
            let (cni_name, range) = match pool {
                Some((pool, size)) => (
                    pool.to_string(),
                    serde_json::json!([[{ "subnet": "10.58.0.0/24", "rangeStart": "10.58.0.1",
                                           "rangeEnd": format!("10.58.0.{size}") }]]),
                ),
                None => (name.clone(), serde_json::json!([[{ "subnet": subnet }]])),
            };
            let config = serde_json::json!({
                "cniVersion": "1.0.0",
                "name": cni_name,
                "plugins": [
                    { "type": "macvlan", "master": MASTER, "mode": "bridge",
                      "ipam": { "type": "host-local", "ranges": range } },
                    { "type": "tuning", "sysctl": {
                        "net.ipv4.conf.all.rp_filter": "0",
                        "net.ipv4.conf.IFNAME.arp_announce": "2",
                        "net.ipv4.conf.IFNAME.arp_filter": "1",
                        "net.ipv4.conf.IFNAME.arp_ignore": "1",
                        "net.ipv4.conf.IFNAME.rp_filter": "0",
                        "net.ipv4.conf.IFNAME.accept_local": "1" } },
                    { "type": "sbr", "addSourceHints": true }
                ]
            });
            self.network_attachment(ns, &name, &config.to_string())
                .await;
        }
    }

    /// Creates NetworkAttachmentDefinition `name` in `ns` with CNI config `config`.
    pub async fn network_attachment(&self, ns: &str, name: &str, config: &str) {
        let gvk = GroupVersionKind::gvk("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "network-attachment-definitions");
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
        let obj =
            DynamicObject::new(name, &ar).data(serde_json::json!({ "spec": { "config": config } }));
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("creates NetworkAttachmentDefinition {ns}/{name}: {e}"));
    }

    /// RuntimeClass `name` (cluster-wide), made once for every test that needs it.
    pub async fn runtime_class(&self, name: &str) {
        let rc = RuntimeClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            handler: name.into(),
            ..RuntimeClass::default()
        };
        match Api::<RuntimeClass>::all(self.client.clone())
            .create(&PostParams::default(), &rc)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creates RuntimeClass {name}: {e}"),
        }
    }
}

impl TestCluster {
    /// DeviceClass `name` (cluster-wide) of every device of `driver`, made once for every test
    /// that needs it: what a DRA driver's installation creates.
    pub async fn device_class(&self, name: &str, driver: &str) {
        use k8s_openapi::api::resource::v1::{
            CELDeviceSelector, DeviceClass, DeviceClassSpec, DeviceSelector,
        };
        let class = DeviceClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(DeviceClassSpec {
                selectors: Some(vec![DeviceSelector {
                    cel: Some(CELDeviceSelector {
                        expression: format!("device.driver == \"{driver}\""),
                    }),
                }]),
                ..DeviceClassSpec::default()
            }),
        };
        match Api::<DeviceClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creates DeviceClass {name}: {e}"),
        }
    }
}

/// A `sleep infinity` pod pinned to `node`, tolerating the test nodes' GPU taint.
fn test_pod(name: &str, node: &str, host_network: bool, container: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_selector: Some(BTreeMap::from([(
                "kubernetes.io/hostname".to_string(),
                node.to_string(),
            )])),
            host_network: host_network.then_some(true),
            tolerations: Some(vec![Toleration {
                key: Some("nvidia.com/gpu".into()),
                operator: Some("Exists".into()),
                ..Toleration::default()
            }]),
            containers: vec![Container {
                name: container.into(),
                image: Some("debian:trixie-slim".into()),
                command: Some(vec!["sleep".into(), "infinity".into()]),
                ..Container::default()
            }],
            termination_grace_period_seconds: Some(1),
            ..PodSpec::default()
        }),
        status: None,
    }
}

pub fn rule(resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..PolicyRule::default()
    }
}

/// The document of `kind` in deploy/rbac.yaml, what the README says railsweep needs.
fn shipped_rbac<T: serde::de::DeserializeOwned>(kind: &str) -> T {
    shipped("rbac.yaml", kind)
}

/// The documents of a YAML stream (empty ones left out), as JSON values.
pub fn yaml_docs(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("YAML: {e}"))
}

/// The document of `kind` in deploy/FILE.
pub fn shipped<T: serde::de::DeserializeOwned>(file: &str, kind: &str) -> T {
    let path = format!("{}/../deploy/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reads {path}: {e}"));
    for v in yaml_docs(&text) {
        if v.get("kind").and_then(|k| k.as_str()) == Some(kind) {
            return serde_json::from_value(v)
                .unwrap_or_else(|e| panic!("deploy/{file}'s {kind}: {e}"));
        }
    }
    panic!("deploy/{file} has no {kind}")
}

/// The document of `kind` named `name` in deploy/FILE.
pub fn shipped_named<T: serde::de::DeserializeOwned>(file: &str, kind: &str, name: &str) -> T {
    let path = format!("{}/../deploy/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reads {path}: {e}"));
    for v in yaml_docs(&text) {
        if v.get("kind").and_then(|k| k.as_str()) == Some(kind)
            && v.get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(|n| n.as_str())
                == Some(name)
        {
            return serde_json::from_value(v)
                .unwrap_or_else(|e| panic!("deploy/{file}'s {kind} {name}: {e}"));
        }
    }
    panic!("deploy/{file} has no {kind} named {name}")
}

/// The service account `railsweep` of `ns`, as a binding's subject.
fn railsweep_subject(ns: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: "railsweep".into(),
        namespace: Some(ns.into()),
        ..Subject::default()
    }
}

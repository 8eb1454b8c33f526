//! A simulated cluster behind the test API server: pods that railsweep creates are admitted
//! (Pod Security, RuntimeClass), scheduled onto named nodes (resources, host ports, taints),
//! admitted by a kubelet (Topology Manager), given their networks (IPAM) and image, and then
//! run: their exec goes to the node's network namespace of this machine, as for the fixed
//! pods. Each step writes the Pod status and the Events a real cluster writes, in its words,
//! so that railsweep's explanations are tested against what a cluster says.
//!
//! It serves create, get, list (label and field selectors), watch and delete of pods, list
//! of events, and get and list (label and field selectors) of the nodes. A watch is answered as soon as something newer than its `resourceVersion`
//! exists (or after a few seconds with nothing), and the client watches again from there: a
//! real API server may end a watch at any time, and kube-rs's watcher carries on.
//!
//! Nodes: `NAME[,netns=NS|-][,ip=IP][,cap=RESOURCE=N]...[,taint=KEY[=VALUE]:EFFECT]...
//! [,numa=K][,ipam=N][,port=P]...[,label=KEY[=VALUE]]...[,cordoned]`: capacity of extended
//! resources, taints, node labels (`kubernetes.io/hostname` is always set), `cordoned` for
//! `spec.unschedulable`, `numa=K` for a
//! Topology Manager with policy `restricted` over K NUMA nodes sharing each resource evenly,
//! `ipam=N` addresses per node in the pool `rdma-ipvlan-pool` (one per network of a pod), and
//! host ports something else on the node already uses.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use http_body_util::BodyExt;
use hyper::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::{error, json_response, Body, TestPod};

/// One node of the simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node name (`kubernetes.io/hostname`).
    pub name: String,
    /// Network namespace its pods' commands run in; `None`: this machine's own.
    pub netns: Option<String>,
    /// The node's (and its pods') address.
    pub ip: Option<String>,
    /// Allocatable extended resources.
    pub capacity: BTreeMap<String, u64>,
    /// Taints: key, value, effect.
    pub taints: Vec<(String, String, String)>,
    /// NUMA nodes of a Topology Manager with policy `restricted`.
    pub numa: Option<u64>,
    /// Addresses of the IP pool on this node.
    pub ipam: Option<u64>,
    /// Host ports already in use on the node.
    pub used_ports: Vec<i32>,
    /// Node labels (besides `kubernetes.io/hostname`).
    pub labels: BTreeMap<String, String>,
    /// `spec.unschedulable` (cordoned).
    pub cordoned: bool,
}

impl NodeSpec {
    /// Parse a node spec (see the module documentation).
    pub fn parse(spec: &str) -> Result<NodeSpec, String> {
        let mut parts = spec.split(',');
        let name = parts
            .next()
            .filter(|n| !n.is_empty())
            .ok_or("empty node spec")?;
        let mut n = NodeSpec {
            name: name.to_string(),
            netns: None,
            ip: None,
            capacity: BTreeMap::new(),
            taints: vec![],
            numa: None,
            ipam: None,
            used_ports: vec![],
            labels: BTreeMap::new(),
            cordoned: false,
        };
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("`{v}` is not a number in `{spec}`"))
        };
        for p in parts {
            match p.split_once('=') {
                Some(("netns", "-")) => n.netns = None,
                Some(("netns", v)) => n.netns = Some(v.to_string()),
                Some(("ip", v)) => n.ip = Some(v.to_string()),
                Some(("cap", v)) => {
                    let (r, q) = v
                        .rsplit_once('=')
                        .ok_or(format!("cap=RESOURCE=N in `{spec}`"))?;
                    n.capacity.insert(r.to_string(), num(q)?);
                }
                Some(("taint", v)) => {
                    let (kv, effect) = v
                        .rsplit_once(':')
                        .ok_or(format!("taint=KEY[=VALUE]:EFFECT in `{spec}`"))?;
                    let (k, val) = kv.split_once('=').unwrap_or((kv, ""));
                    n.taints
                        .push((k.to_string(), val.to_string(), effect.to_string()));
                }
                Some(("numa", v)) => n.numa = Some(num(v)?.max(1)),
                Some(("ipam", v)) => n.ipam = Some(num(v)?),
                Some(("port", v)) => n.used_ports.push(num(v)? as i32),
                Some(("label", v)) => {
                    let (k, val) = v.split_once('=').unwrap_or((v, ""));
                    n.labels.insert(k.to_string(), val.to_string());
                }
                None if p == "cordoned" => n.cordoned = true,
                _ => return Err(format!("unknown node option `{p}` in `{spec}`")),
            }
        }
        Ok(n)
    }
}

/// What the simulated cluster is made of.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// The nodes.
    pub nodes: Vec<NodeSpec>,
    /// The Pod Security level the namespace enforces (`baseline`, `restricted`), if any.
    pub pod_security: Option<String>,
    /// RuntimeClasses that exist.
    pub runtime_classes: Vec<String>,
    /// Images that cannot be pulled.
    pub pull_fails: Vec<String>,
    /// Time between two steps of a pod's start.
    pub step: Duration,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            nodes: vec![],
            pod_security: None,
            runtime_classes: vec!["runc-nohostdev".into()],
            pull_fails: vec![],
            step: Duration::from_millis(40),
        }
    }
}

/// A change a watch can see.
#[derive(Debug, Clone)]
struct Change {
    rv: u64,
    kind: &'static str,
    object: Value,
}

#[derive(Debug, Default)]
struct State {
    rv: u64,
    pods: BTreeMap<String, Pod>,
    history: Vec<Change>,
    events: Vec<Value>,
}

/// The simulated cluster.
#[derive(Debug)]
pub struct Cluster {
    spec: ClusterSpec,
    namespace: String,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    verbose: bool,
}

fn now() -> String {
    results::rfc3339_utc(SystemTime::now())
}

/// A node's labels: its own and `kubernetes.io/hostname`.
fn node_labels(n: &NodeSpec) -> BTreeMap<String, String> {
    let mut l = n.labels.clone();
    l.insert("kubernetes.io/hostname".into(), n.name.clone());
    l
}

/// A node as the API serves it: labels, taints, capacity, address, Ready.
fn node_value(n: &NodeSpec) -> Value {
    let capacity: BTreeMap<&String, String> =
        n.capacity.iter().map(|(k, v)| (k, v.to_string())).collect();
    let taints: Vec<Value> = n
        .taints
        .iter()
        .map(|(k, v, e)| json!({ "key": k, "value": if v.is_empty() { Value::Null } else { json!(v) }, "effect": e }))
        .collect();
    let mut addresses = vec![json!({ "type": "Hostname", "address": n.name })];
    if let Some(ip) = &n.ip {
        addresses.insert(0, json!({ "type": "InternalIP", "address": ip }));
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": n.name, "uid": format!("node-{}", n.name), "resourceVersion": "1",
                      "labels": node_labels(n) },
        "spec": { "taints": taints, "unschedulable": if n.cordoned { json!(true) } else { Value::Null } },
        "status": { "capacity": capacity, "allocatable": capacity, "addresses": addresses,
                    "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady" }] },
    })
}

fn pod_value(p: &Pod) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}

/// `k=v,k2=v2` (and bare `k`: the label exists) against a pod's labels.
fn labels_match(selector: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
    selector
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => {
                labels.and_then(|l| l.get(k.trim_end_matches('='))) == Some(&v.to_string())
            }
            None => labels.is_some_and(|l| l.contains_key(term)),
        })
}

/// `metadata.name=X`, `spec.nodeName=X` (comma-separated) against a pod.
fn pod_fields_match(selector: &str, p: &Pod) -> bool {
    selector
        .split(',')
        .filter(|s| !s.is_empty())
        .all(|term| match term.split_once('=') {
            Some(("metadata.name", v)) => p.metadata.name.as_deref() == Some(v),
            Some(("metadata.namespace", v)) => p.metadata.namespace.as_deref() == Some(v),
            Some(("spec.nodeName", v)) => {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(v)
            }
            _ => true,
        })
}

fn query_map(query: &str) -> BTreeMap<String, String> {
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

impl Cluster {
    /// A cluster serving `namespace`.
    pub fn new(spec: ClusterSpec, namespace: &str, verbose: bool) -> Arc<Cluster> {
        Arc::new(Cluster {
            spec,
            namespace: namespace.to_string(),
            state: Mutex::new(State {
                rv: 1,
                ..State::default()
            }),
            changed: watch::channel(1).0,
            verbose,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record a change of `name` (or its removal) and wake the watches.
    fn commit(&self, st: &mut State, kind: &'static str, mut pod: Pod) {
        st.rv += 1;
        pod.metadata.resource_version = Some(st.rv.to_string());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let rv = st.rv;
        st.history.push(Change {
            rv,
            kind,
            object: pod_value(&pod),
        });
        if kind == "DELETED" {
            st.pods.remove(&name);
        } else {
            st.pods.insert(name, pod);
        }
        self.changed.send_replace(rv);
    }

    fn event(
        &self,
        st: &mut State,
        pod: &Pod,
        type_: &str,
        reason: &str,
        component: &str,
        message: &str,
    ) {
        st.rv += 1;
        let name = pod.metadata.name.clone().unwrap_or_default();
        if self.verbose {
            eprintln!("kube-testserver: event {name}: {type_} {reason}: {message}");
        }
        st.events.push(json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": { "name": format!("{name}.{:x}", st.rv), "namespace": self.namespace,
                          "resourceVersion": st.rv.to_string() },
            "involvedObject": { "apiVersion": "v1", "kind": "Pod", "namespace": self.namespace, "name": name,
                                "uid": pod.metadata.uid },
            "reason": reason, "message": message, "type": type_,
            "source": { "component": component }, "reportingComponent": component,
            "firstTimestamp": now(), "lastTimestamp": now(), "count": 1,
        }));
    }

    /// The fixed-pod view of a created pod, for exec: its node's namespace and address.
    pub fn test_pod(&self, ns: &str, name: &str) -> Option<TestPod> {
        if ns != self.namespace {
            return None;
        }
        let st = self.lock();
        let p = st.pods.get(name)?;
        let spec = p.spec.as_ref()?;
        let node = self
            .spec
            .nodes
            .iter()
            .find(|n| Some(&n.name) == spec.node_name.as_ref())?;
        Some(TestPod {
            name: name.to_string(),
            netns: node.netns.clone(),
            node: node.name.clone(),
            ip: node.ip.clone(),
            host_network: spec.host_network == Some(true),
            container: spec
                .containers
                .first()
                .map(|c| c.name.clone())
                .unwrap_or_default(),
        })
    }

    /// Serve the request if it is the cluster's; `None` leaves it to the fixed pods.
    pub async fn route(
        self: &Arc<Self>,
        req: &mut Request<hyper::body::Incoming>,
        segs: &[&str],
        query: &str,
        fixed: &[Value],
    ) -> Option<Response<Body>> {
        let method = req.method().clone();
        match (method, segs) {
            (Method::POST, ["api", "v1", "namespaces", ns, "pods"]) => {
                let body = match req.body_mut().collect().await {
                    Ok(b) => b.to_bytes(),
                    Err(e) => {
                        return Some(error(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string()))
                    }
                };
                Some(self.create(ns, &body))
            }
            (Method::GET, ["api", "v1", "namespaces", ns, "pods", name])
                if *ns == self.namespace =>
            {
                let st = self.lock();
                st.pods
                    .get(*name)
                    .map(|p| json_response(StatusCode::OK, &pod_value(p)))
            }
            (Method::DELETE, ["api", "v1", "namespaces", ns, "pods", name])
                if *ns == self.namespace =>
            {
                Some(self.delete(name))
            }
            (Method::GET, ["api", "v1", "namespaces", ns, "pods"]) => {
                Some(self.list_or_watch(Some(ns), query, fixed).await)
            }
            (Method::GET, ["api", "v1", "pods"]) => {
                Some(self.list_or_watch(None, query, fixed).await)
            }
            (Method::GET, ["api", "v1", "namespaces", ns, "events"]) => {
                Some(self.events(ns, query))
            }
            (Method::GET, ["api", "v1", "nodes"]) => Some(self.nodes(query)),
            (Method::GET, ["api", "v1", "nodes", name]) => {
                Some(match self.spec.nodes.iter().find(|n| n.name == *name) {
                    Some(n) => json_response(StatusCode::OK, &node_value(n)),
                    None => error(
                        StatusCode::NOT_FOUND,
                        "NotFound",
                        &format!("nodes \"{name}\" not found"),
                    ),
                })
            }
            _ => None,
        }
    }

    /// `GET /api/v1/nodes` with `labelSelector` and `fieldSelector=metadata.name=X` (no watch).
    fn nodes(&self, query: &str) -> Response<Body> {
        let q = query_map(query);
        if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "the test server does not watch nodes",
            );
        }
        let labels = q.get("labelSelector").cloned().unwrap_or_default();
        let fields = q.get("fieldSelector").cloned().unwrap_or_default();
        let items: Vec<Value> =
            self.spec
                .nodes
                .iter()
                .filter(|n| labels_match(&labels, Some(&node_labels(n))))
                .filter(|n| {
                    fields.split(',').filter(|s| !s.is_empty()).all(|term| {
                        match term.split_once('=') {
                            Some(("metadata.name", v)) => n.name == v,
                            _ => true,
                        }
                    })
                })
                .map(node_value)
                .collect();
        json_response(
            StatusCode::OK,
            &json!({ "kind": "NodeList", "apiVersion": "v1", "metadata": { "resourceVersion": "1" }, "items": items }),
        )
    }

    fn events(&self, ns: &str, query: &str) -> Response<Body> {
        let q = query_map(query);
        let sel = q.get("fieldSelector").cloned().unwrap_or_default();
        let st = self.lock();
        let items: Vec<Value> = st
            .events
            .iter()
            .filter(|e| ns == self.namespace && e["metadata"]["namespace"] == ns)
            .filter(|e| {
                sel.split(',')
                    .filter(|s| !s.is_empty())
                    .all(|term| match term.split_once('=') {
                        Some(("involvedObject.name", v)) => e["involvedObject"]["name"] == v,
                        Some(("involvedObject.uid", v)) => e["involvedObject"]["uid"] == v,
                        Some(("involvedObject.kind", v)) => e["involvedObject"]["kind"] == v,
                        _ => true,
                    })
            })
            .cloned()
            .collect();
        json_response(
            StatusCode::OK,
            &json!({ "kind": "EventList", "apiVersion": "v1",
                     "metadata": { "resourceVersion": st.rv.to_string() }, "items": items }),
        )
    }

    async fn list_or_watch(
        self: &Arc<Self>,
        ns: Option<&str>,
        query: &str,
        fixed: &[Value],
    ) -> Response<Body> {
        let q = query_map(query);
        let fields = q.get("fieldSelector").cloned().unwrap_or_default();
        let labels = q.get("labelSelector").cloned().unwrap_or_default();
        let ours = ns.is_none_or(|n| n == self.namespace);
        let keep = |p: &Pod| {
            ours && pod_fields_match(&fields, p)
                && labels_match(&labels, p.metadata.labels.as_ref())
        };
        let watching = q.get("watch").is_some_and(|w| w == "true" || w == "1");
        if !watching {
            let st = self.lock();
            let mut items: Vec<Value> = fixed
                .iter()
                .filter(|v| serde_json::from_value::<Pod>((*v).clone()).is_ok_and(|p| keep(&p)))
                .cloned()
                .collect();
            items.extend(st.pods.values().filter(|p| keep(p)).map(pod_value));
            return json_response(
                StatusCode::OK,
                &json!({ "kind": "PodList", "apiVersion": "v1",
                         "metadata": { "resourceVersion": st.rv.to_string() }, "items": items }),
            );
        }
        let since: u64 = q
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let limit = q
            .get("timeoutSeconds")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(5)
            .min(5);
        let mut rx = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(limit);
        loop {
            let lines: Vec<String> = {
                let st = self.lock();
                st.history
                    .iter()
                    .filter(|c| c.rv > since)
                    .filter(|c| {
                        serde_json::from_value::<Pod>(c.object.clone()).is_ok_and(|p| keep(&p))
                    })
                    .map(|c| json!({ "type": c.kind, "object": c.object }).to_string())
                    .collect()
            };
            if !lines.is_empty() {
                let mut r = Response::new(http_body_util::Full::new(hyper::body::Bytes::from(
                    lines.join("\n") + "\n",
                )));
                r.headers_mut().insert(
                    "content-type",
                    hyper::header::HeaderValue::from_static("application/json"),
                );
                return r;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return json_response_lines("");
            }
        }
    }

    fn create(self: &Arc<Self>, ns: &str, body: &[u8]) -> Response<Body> {
        if ns != self.namespace {
            return error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("namespaces \"{ns}\" not found"),
            );
        }
        let mut pod: Pod = match serde_json::from_slice(body) {
            Ok(p) => p,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &format!("the pod does not decode: {e}"),
                )
            }
        };
        let Some(name) = pod.metadata.name.clone() else {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                "Pod \"\" is invalid: metadata.name: Required value",
            );
        };
        if let Some(level) = &self.spec.pod_security {
            let why = pod_security_violations(&pod, level == "restricted");
            if !why.is_empty() {
                return error(
                    StatusCode::FORBIDDEN,
                    "Forbidden",
                    &format!(
                        "pods \"{name}\" is forbidden: violates PodSecurity \"{level}:latest\": {}",
                        why.join(", ")
                    ),
                );
            }
        }
        if let Some(rc) = pod.spec.as_ref().and_then(|s| s.runtime_class_name.clone()) {
            if !self.spec.runtime_classes.contains(&rc) {
                return error(
                    StatusCode::FORBIDDEN,
                    "Forbidden",
                    &format!("pods \"{name}\" is forbidden: pod rejected: RuntimeClass \"{rc}\" not found"),
                );
            }
        }
        let mut st = self.lock();
        if st.pods.contains_key(&name) {
            return error(
                StatusCode::CONFLICT,
                "AlreadyExists",
                &format!("pods \"{name}\" already exists"),
            );
        }
        pod.metadata.namespace = Some(ns.to_string());
        pod.metadata.uid = Some(format!("00000000-0000-4000-8000-{:012x}", st.rv + 0x1000));
        pod.metadata.creation_timestamp = serde_json::from_value(json!(now())).ok();
        pod.status = serde_json::from_value(json!({ "phase": "Pending" })).ok();
        self.commit(&mut st, "ADDED", pod);
        let created = st.pods.get(&name).map(pod_value).unwrap_or(Value::Null);
        drop(st);
        let me = self.clone();
        tokio::spawn(async move { me.start(name).await });
        json_response(StatusCode::CREATED, &created)
    }

    fn delete(self: &Arc<Self>, name: &str) -> Response<Body> {
        let mut st = self.lock();
        let Some(mut pod) = st.pods.get(name).cloned() else {
            return error(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("pods \"{name}\" not found"),
            );
        };
        if pod.metadata.deletion_timestamp.is_none() {
            pod.metadata.deletion_timestamp = serde_json::from_value(json!(now())).ok();
            pod.metadata.deletion_grace_period_seconds = Some(1);
            self.commit(&mut st, "MODIFIED", pod.clone());
            let me = self.clone();
            let n = name.to_string();
            tokio::spawn(async move {
                tokio::time::sleep(me.spec.step * 3).await;
                let mut st = me.lock();
                if let Some(p) = st.pods.get(&n).cloned() {
                    me.commit(&mut st, "DELETED", p);
                }
            });
        }
        let v = st.pods.get(name).map(pod_value).unwrap_or(Value::Null);
        json_response(StatusCode::OK, &v)
    }

    /// Change pod `name` with `f`, unless it is being deleted; false when it is gone.
    fn update(&self, name: &str, f: impl FnOnce(&mut State, &mut Pod)) -> bool {
        let mut st = self.lock();
        let Some(mut pod) = st.pods.get(name).cloned() else {
            return false;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            return false;
        }
        f(&mut st, &mut pod);
        self.commit(&mut st, "MODIFIED", pod);
        true
    }

    fn set_status(pod: &mut Pod, status: Value) {
        pod.status = serde_json::from_value(status).ok();
    }

    /// The pods that hold resources on `node` (bound, not failed, not `except`).
    fn pods_on(st: &State, node: &str, except: &str) -> Vec<Pod> {
        st.pods
            .values()
            .filter(|p| p.metadata.name.as_deref() != Some(except))
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Failed"))
            .cloned()
            .collect()
    }

    /// The scheduler's verdict for one node: `None` fits, else its reason.
    fn misfit(&self, st: &State, node: &NodeSpec, pod: &Pod, name: &str) -> Option<String> {
        let spec = pod.spec.as_ref()?;
        if let Some(want) = spec
            .node_selector
            .as_ref()
            .and_then(|s| s.get("kubernetes.io/hostname"))
        {
            if *want != node.name {
                return Some("node(s) didn't match Pod's node affinity/selector".into());
            }
        }
        for (k, v, effect) in &node.taints {
            let tolerated = spec.tolerations.iter().flatten().any(|t| {
                t.key.as_deref() == Some(k.as_str())
                    && t.effect.as_deref().is_none_or(|e| e == effect)
                    && (t.operator.as_deref() == Some("Exists")
                        || t.value.as_deref().unwrap_or("") == v)
            });
            if !tolerated {
                return Some(format!("node(s) had untolerated taint {{{k}: {v}}}"));
            }
        }
        let others = Self::pods_on(st, &node.name, name);
        for (res, want) in limits(pod) {
            let used: u64 = others
                .iter()
                .map(|p| limits(p).get(&res).copied().unwrap_or(0))
                .sum();
            let cap = node.capacity.get(&res).copied().unwrap_or(0);
            if used + want > cap {
                return Some(format!("Insufficient {res}"));
            }
        }
        let taken: Vec<i32> = others
            .iter()
            .flat_map(host_ports)
            .chain(node.used_ports.iter().copied())
            .collect();
        if host_ports(pod).iter().any(|p| taken.contains(p)) {
            return Some("node(s) didn't have free ports for the requested pod ports".into());
        }
        None
    }

    async fn start(self: Arc<Self>, name: String) {
        let step = self.spec.step;
        tokio::time::sleep(step).await;
        // --- the scheduler.
        let (node, verdict) = {
            let st = self.lock();
            let Some(pod) = st.pods.get(&name).cloned() else {
                return;
            };
            let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
            let mut fit = None;
            for n in &self.spec.nodes {
                match self.misfit(&st, n, &pod, &name) {
                    None => {
                        fit = Some(n.clone());
                        break;
                    }
                    Some(r) => *reasons.entry(r).or_default() += 1,
                }
            }
            let total = self.spec.nodes.len();
            let words: Vec<String> = reasons.iter().map(|(r, c)| format!("{c} {r}")).collect();
            (
                fit,
                format!(
                    "0/{total} nodes are available: {}. preemption: 0/{total} nodes are available: {total} \
                     Preemption is not helpful for scheduling.",
                    words.join(", ")
                ),
            )
        };
        let Some(node) = node else {
            self.update(&name, |st, pod| {
                Self::set_status(
                    pod,
                    json!({ "phase": "Pending", "conditions": [{ "type": "PodScheduled", "status": "False",
                            "reason": "Unschedulable", "message": verdict, "lastTransitionTime": now() }] }),
                );
                self.event(st, pod, "Warning", "FailedScheduling", "default-scheduler", &verdict);
            });
            return;
        };
        let ns = self.namespace.clone();
        let alive = self.update(&name, |st, pod| {
            if let Some(s) = pod.spec.as_mut() {
                s.node_name = Some(node.name.clone());
            }
            Self::set_status(
                pod,
                json!({ "phase": "Pending", "hostIP": node.ip, "conditions": [{ "type": "PodScheduled",
                        "status": "True", "lastTransitionTime": now() }] }),
            );
            let msg = format!("Successfully assigned {ns}/{name} to {}", node.name);
            self.event(st, pod, "Normal", "Scheduled", "default-scheduler", &msg);
        });
        if !alive {
            return;
        }
        tokio::time::sleep(step).await;
        // --- the kubelet's admission: the Topology Manager (policy restricted, scope pod).
        if let Some(k) = node.numa {
            let pod = self.lock().pods.get(&name).cloned();
            let Some(pod) = pod else { return };
            let spans: Vec<u64> = limits(&pod)
                .iter()
                .filter_map(|(r, q)| {
                    let per = node.capacity.get(r).copied().unwrap_or(0) / k;
                    (per > 0).then(|| q.div_ceil(per))
                })
                .collect();
            if spans.iter().any(|s| Some(s) != spans.first()) {
                self.update(&name, |st, pod| {
                    Self::set_status(
                        pod,
                        json!({ "phase": "Failed", "reason": "TopologyAffinityError",
                                "message": "Pod was rejected: Resources cannot be allocated with Topology locality",
                                "hostIP": node.ip }),
                    );
                    self.event(st, pod, "Warning", "TopologyAffinityError", "kubelet",
                               "Resources cannot be allocated with Topology locality");
                });
                return;
            }
        }
        let creating = json!({ "phase": "Pending", "hostIP": node.ip,
            "conditions": [{ "type": "PodScheduled", "status": "True" }],
            "containerStatuses": [{ "name": "rdmabw", "image": "", "imageID": "", "ready": false,
                                    "restartCount": 0, "state": { "waiting": { "reason": "ContainerCreating" } } }] });
        // --- the sandbox: Multus and the IP pool.
        let networks: Vec<String> = {
            let st = self.lock();
            st.pods
                .get(&name)
                .and_then(|p| {
                    p.metadata
                        .annotations
                        .as_ref()?
                        .get("k8s.v1.cni.cncf.io/networks")
                        .cloned()
                })
                .map(|n| n.split(',').map(str::to_string).collect())
                .unwrap_or_default()
        };
        if let (Some(pool), false) = (node.ipam, networks.is_empty()) {
            let used: usize = {
                let st = self.lock();
                Self::pods_on(&st, &node.name, &name)
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .filter_map(|p| {
                        p.metadata
                            .annotations
                            .as_ref()?
                            .get("k8s.v1.cni.cncf.io/networks")
                            .cloned()
                    })
                    .map(|n| n.split(',').count())
                    .sum()
            };
            if used + networks.len() > pool as usize {
                let net = networks
                    .get(pool.saturating_sub(used as u64) as usize)
                    .cloned()
                    .unwrap_or_default();
                let msg = format!(
                    "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create pod network \
                     sandbox k8s_{name}_{ns}: error adding pod {ns}_{name} to CNI network \"multus-cni-network\": \
                     plugin type=\"multus\" name=\"multus-cni-network\" failed (add): [{ns}/{name}:{net}]: error \
                     adding container to network \"{net}\": rpc error: code = ResourceExhausted desc = no free \
                     addresses in the pool \"rdma-ipvlan-pool\", poolType \"ippool\""
                );
                self.update(&name, |st, pod| {
                    Self::set_status(pod, creating.clone());
                    self.event(
                        st,
                        pod,
                        "Warning",
                        "FailedCreatePodSandBox",
                        "kubelet",
                        &msg,
                    );
                });
                return;
            }
        }
        // --- the image.
        let image = {
            let st = self.lock();
            st.pods
                .get(&name)
                .and_then(|p| p.spec.as_ref()?.containers.first()?.image.clone())
                .unwrap_or_default()
        };
        let alive = self.update(&name, |st, pod| {
            Self::set_status(pod, creating.clone());
            self.event(
                st,
                pod,
                "Normal",
                "Pulling",
                "kubelet",
                &format!("Pulling image \"{image}\""),
            );
        });
        if !alive {
            return;
        }
        tokio::time::sleep(step).await;
        if self.spec.pull_fails.contains(&image) {
            let why = format!(
                "failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": \
                 pull access denied, repository does not exist or may require authorization"
            );
            for (reason, event_reason, message) in [
                (
                    "ErrImagePull",
                    "Failed",
                    format!("Failed to pull image \"{image}\": {why}"),
                ),
                (
                    "ImagePullBackOff",
                    "BackOff",
                    format!("Back-off pulling image \"{image}\""),
                ),
            ] {
                let waiting_message = if reason == "ErrImagePull" {
                    why.clone()
                } else {
                    message.clone()
                };
                let alive = self.update(&name, |st, pod| {
                    Self::set_status(
                        pod,
                        json!({ "phase": "Pending", "hostIP": node.ip,
                                "containerStatuses": [{ "name": "rdmabw", "image": image, "imageID": "",
                                "ready": false, "restartCount": 0,
                                "state": { "waiting": { "reason": reason, "message": waiting_message } } }] }),
                    );
                    self.event(st, pod, "Warning", event_reason, "kubelet", &message);
                });
                if !alive {
                    return;
                }
                tokio::time::sleep(step).await;
            }
            return;
        }
        // --- running.
        self.update(&name, |st, pod| {
            let container = pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .map(|c| c.name.clone())
                .unwrap_or_default();
            let ip = node.ip.clone().unwrap_or_else(|| "127.0.0.1".into());
            Self::set_status(
                pod,
                json!({ "phase": "Running", "hostIP": ip, "podIP": ip, "podIPs": [{ "ip": ip }],
                        "startTime": now(),
                        "conditions": [
                            { "type": "PodScheduled", "status": "True" },
                            { "type": "Initialized", "status": "True" },
                            { "type": "ContainersReady", "status": "True" },
                            { "type": "Ready", "status": "True" }],
                        "containerStatuses": [{ "name": container, "image": image, "imageID": "", "ready": true,
                            "started": true, "restartCount": 0,
                            "state": { "running": { "startedAt": now() } } }] }),
            );
            for (reason, msg) in [
                ("Pulled", format!("Successfully pulled image \"{image}\"")),
                ("Created", format!("Created container: {container}")),
                ("Started", format!("Started container {container}")),
            ] {
                self.event(st, pod, "Normal", reason, "kubelet", &msg);
            }
        });
    }
}

fn json_response_lines(text: &str) -> Response<Body> {
    let mut r = Response::new(http_body_util::Full::new(hyper::body::Bytes::from(
        text.to_string(),
    )));
    r.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// The extended resources of a pod's containers (limits), counted.
fn limits(p: &Pod) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for c in p.spec.iter().flat_map(|s| s.containers.iter()) {
        for (k, q) in c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
        {
            if k.contains('/') {
                *m.entry(k.clone()).or_default() += q.0.parse::<u64>().unwrap_or(0);
            }
        }
    }
    m
}

fn host_ports(p: &Pod) -> Vec<i32> {
    p.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| p.host_port)
        .filter(|p| *p != 0)
        .collect()
}

/// Pod Security admission's Baseline (and with `restricted`, Restricted) checks, in its words
/// and in the order of its check IDs. Written apart from railsweep's own reading of a pod, as
/// a second opinion.
fn pod_security_violations(p: &Pod, restricted: bool) -> Vec<String> {
    const DEFAULT_CAPS: [&str; 13] = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let mut checks: Vec<(&str, String)> = Vec::new();
    let Some(spec) = p.spec.as_ref() else {
        return vec![];
    };
    for c in &spec.containers {
        let sc = c.security_context.as_ref();
        let add: Vec<String> = sc
            .and_then(|s| s.capabilities.as_ref()?.add.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|c| !DEFAULT_CAPS.contains(&c.as_str()))
            .map(|c| format!("\"{c}\""))
            .collect();
        if !add.is_empty() {
            checks.push((
                "capabilities_baseline",
                format!("non-default capabilities (container \"{}\" must not include {} in securityContext.capabilities.add)", c.name, add.join(", ")),
            ));
        }
        if sc.and_then(|s| s.privileged) == Some(true) {
            checks.push((
                "privileged",
                format!(
                    "privileged (container \"{}\" must not set securityContext.privileged=true)",
                    c.name
                ),
            ));
        }
        let hp: Vec<String> = c
            .ports
            .iter()
            .flatten()
            .filter_map(|p| p.host_port)
            .filter(|p| *p != 0)
            .map(|p| p.to_string())
            .collect();
        if !hp.is_empty() {
            checks.push((
                "hostPorts",
                format!(
                    "hostPort (container \"{}\" uses hostPort {})",
                    c.name,
                    hp.join(", ")
                ),
            ));
        }
        if restricted {
            if sc.and_then(|s| s.allow_privilege_escalation) != Some(false) {
                checks.push(("allowPrivilegeEscalation", format!("allowPrivilegeEscalation != false (container \"{}\" must set securityContext.allowPrivilegeEscalation=false)", c.name)));
            }
            if sc.and_then(|s| s.run_as_non_root) != Some(true) {
                checks.push(("runAsNonRoot", format!("runAsNonRoot != true (pod or container \"{}\" must set securityContext.runAsNonRoot=true)", c.name)));
            }
        }
    }
    let mut ns = vec![];
    if spec.host_network == Some(true) {
        ns.push("hostNetwork=true");
    }
    if spec.host_pid == Some(true) {
        ns.push("hostPID=true");
    }
    if spec.host_ipc == Some(true) {
        ns.push("hostIPC=true");
    }
    if !ns.is_empty() {
        checks.push((
            "hostNamespaces",
            format!("host namespaces ({})", ns.join(", ")),
        ));
    }
    let hostpath: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some())
        .map(|v| format!("\"{}\"", v.name))
        .collect();
    if !hostpath.is_empty() {
        checks.push((
            "hostPathVolumes",
            format!("hostPath volumes (volume {})", hostpath.join(", ")),
        ));
    }
    checks.sort_by(|a, b| a.0.cmp(b.0));
    checks.into_iter().map(|(_, w)| w).collect()
}

//! Create railsweep's pod pair, wait until both pods are ready, and delete them: one typed
//! `Api<Pod>` for the pods and one `Api<Event>` for what the cluster says about them.
//!
//! Waiting watches each pod with `kube::runtime::wait::await_condition` until it is ready or
//! its status shows a failure, under the caller's timeout; a second beat reads the pod's
//! Events each second, because some failures (a CNI error, a scheduling failure before the
//! condition is written) appear only there. A failure stops the wait at once with a
//! [`Diagnosis`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use super::dra::{self, DraOptions};
use super::explain::{
    explain_create_error, explain_pod, explain_template_error, explain_timeout, host_ports,
    waits_for_host_port, Diagnosis, Problem,
};
use super::PodPair;

/// What can stop the pods from getting ready.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// A pod will not start (or was refused), and why.
    #[error("{0}")]
    NotStarted(Box<Diagnosis>),
    /// Ctrl-C while creating or waiting.
    #[error("interrupted while the pods were starting")]
    Interrupted,
    /// An API call failed for a reason that is not about the pod.
    #[error("cannot {action} pod {pod}: {}", crate::exit::kube_words(source))]
    Api {
        /// What was being done (`create`, `read`, `watch`, `delete`).
        action: &'static str,
        /// The pod.
        pod: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The watch of a pod failed.
    #[error("cannot watch pod {pod}: {}", crate::exit::error_words(source))]
    Watch {
        /// The pod.
        pod: String,
        /// The watcher's error.
        #[source]
        source: kube::runtime::wait::Error,
    },
}

/// A pod railsweep created: its name and uid (to tell it from a later pod of the same name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: Option<String>,
}

/// The pods of one pair, through one namespace's API.
#[derive(Clone)]
pub struct PodSet {
    client: Client,
    pods: Api<Pod>,
    events: Api<Event>,
    templates: Api<ResourceClaimTemplate>,
    namespace: String,
    created: Arc<Mutex<Vec<Created>>>,
    /// The ResourceClaimTemplates created (mode `dra`), deleted after the pods.
    made_templates: Arc<Mutex<Vec<String>>>,
    /// Mode `dra`: the claim's options, to explain a claim that cannot be allocated.
    dra: Option<DraOptions>,
    /// The pods already said to wait for a host port a deleted pod still holds.
    said_port_waits: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for PodSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodSet")
            .field("namespace", &self.namespace)
            .field("created", &self.created())
            .finish_non_exhaustive()
    }
}

/// Ready: phase Running and the `Ready` condition true.
pub fn is_ready(p: &Pod) -> bool {
    let Some(s) = p.status.as_ref() else {
        return false;
    };
    s.phase.as_deref() == Some("Running")
        && s.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

impl PodSet {
    /// Pods of `namespace` through `client`.
    pub fn new(client: Client, namespace: &str) -> PodSet {
        PodSet {
            pods: Api::namespaced(client.clone(), namespace),
            events: Api::namespaced(client.clone(), namespace),
            templates: Api::namespaced(client.clone(), namespace),
            client,
            namespace: namespace.to_string(),
            created: Arc::new(Mutex::new(Vec::new())),
            made_templates: Arc::new(Mutex::new(Vec::new())),
            dra: None,
            said_port_waits: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Mode `dra`: explain an unallocatable claim of these options from the nodes' devices.
    pub fn with_dra(mut self, dra: DraOptions) -> PodSet {
        self.dra = Some(dra);
        self
    }

    /// Create the ResourceClaimTemplates `pod`'s mode needs (before any pod names them); a
    /// refusal is explained for `pod`. One that exists from this set already is not made again.
    pub async fn create_templates(
        &self,
        templates: &[ResourceClaimTemplate],
        pod: &Pod,
    ) -> Result<(), LifecycleError> {
        for t in templates {
            let name = t.metadata.name.clone().unwrap_or_default();
            if self.made_templates().contains(&name) {
                continue;
            }
            match self.templates.create(&PostParams::default(), t).await {
                Ok(_) => {
                    if let Ok(mut m) = self.made_templates.lock() {
                        m.push(name);
                    }
                }
                Err(kube::Error::Api(status)) => {
                    return Err(LifecycleError::NotStarted(Box::new(
                        explain_template_error(pod, &name, &status),
                    )))
                }
                Err(source) => {
                    return Err(LifecycleError::Api {
                        action: "create the ResourceClaimTemplate of",
                        pod: pod.metadata.name.clone().unwrap_or_default(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    /// The ResourceClaimTemplates created so far.
    pub fn made_templates(&self) -> Vec<String> {
        self.made_templates
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Mode `dra`: the rails allocated to `pod`'s claim, with the GPU of each rail, in words;
    /// `Err` says what could not be read. The devices' attributes come from the node's
    /// ResourceSlices when this account may list them, else only the device names are known.
    pub async fn allocation(&self, pod: &Pod) -> Result<Vec<dra::AllocatedRail>, String> {
        let Some(claim) = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .and_then(|c| c.iter().find(|c| c.name == dra::CLAIM))
            .and_then(|c| c.resource_claim_name.clone())
        else {
            return Err("the pod names no ResourceClaim in its status".into());
        };
        let claims: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &self.namespace);
        let claim = claims.get(&claim).await.map_err(|e| {
            format!(
                "cannot read ResourceClaim {claim}: {}",
                crate::exit::kube_words(&e)
            )
        })?;
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let devices = self.node_devices(&node).await.unwrap_or_default();
        Ok(dra::allocated_rails(&claim, &devices))
    }

    async fn node_devices(&self, node: &str) -> Result<Vec<dra::NodeDevice>, kube::Error> {
        let slices: Api<ResourceSlice> = Api::all(self.client.clone());
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let list = slices.list(&lp).await?;
        Ok(dra::node_devices(&list.items, node))
    }

    /// A diagnosis of an unallocatable claim, with why, from the pod's node's devices.
    async fn with_dra_reasons(&self, mut d: Diagnosis, pod: &Pod) -> Diagnosis {
        let Some(o) = self.dra.as_ref() else {
            return d;
        };
        if d.problem != Problem::ClaimUnallocatable {
            return d;
        }
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.as_ref())
            .and_then(|s| s.get("kubernetes.io/hostname"))
            .cloned();
        let Some(node) = node else {
            return d;
        };
        let devices = match self.node_devices(&node).await {
            Ok(ds) => ds,
            Err(e) => {
                d.todo.push_str(&format!(
                    "; railsweep cannot read node {node}'s ResourceSlices to say why ({}): grant deploy/rbac.yaml's ClusterRole, or see kubectl get resourceslices --field-selector spec.nodeName={node} -o yaml",
                    crate::exit::kube_words(&e)
                ));
                return d;
            }
        };
        let classes_api: Api<DeviceClass> = Api::all(self.client.clone());
        let mut classes = std::collections::BTreeMap::new();
        for name in [&o.device_class, &o.gpu_class] {
            if let Ok(Some(c)) = classes_api.get_opt(name).await {
                classes.insert(name.clone(), c);
            }
        }
        let why = dra::why_unallocatable(o, &node, &devices, &classes);
        d.todo = format!("{}: {}", d.todo, why.join("; "));
        d
    }

    /// The pods created so far, in creation order.
    pub fn created(&self) -> Vec<Created> {
        self.created.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Create the server pod, then the client pod. A refusal is explained; the pods created
    /// before it stay recorded, for [`PodSet::delete_all`].
    pub async fn create(&self, pair: &PodPair) -> Result<(), LifecycleError> {
        self.create_templates(&pair.templates, &pair.server).await?;
        for (_, pod) in pair.pods() {
            self.create_one(pod).await?;
        }
        Ok(())
    }

    /// Create one pod and record it; a refusal is explained.
    pub async fn create_one(&self, pod: &Pod) -> Result<(), LifecycleError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        match self.pods.create(&PostParams::default(), pod).await {
            Ok(made) => {
                if let Ok(mut c) = self.created.lock() {
                    c.push(Created {
                        name,
                        uid: made.metadata.uid.clone(),
                    });
                }
                Ok(())
            }
            Err(kube::Error::Api(status)) => Err(LifecycleError::NotStarted(Box::new(
                explain_create_error(pod, &status),
            ))),
            Err(source) => Err(LifecycleError::Api {
                action: "create",
                pod: name,
                source,
            }),
        }
    }

    /// The Events about pod `name`, oldest first.
    pub async fn events_of(&self, name: &str) -> Vec<Event> {
        let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
        self.events
            .list(&lp)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    /// Wait until every created pod is ready, at most `timeout`; stop at the first pod that
    /// will not start, or at `cancel`.
    pub async fn wait_ready(
        &self,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Vec<Pod>, LifecycleError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let waits = self
            .created()
            .into_iter()
            .map(|c| self.wait_one(c.name, deadline, timeout, cancel.clone()));
        futures::future::try_join_all(waits).await
    }

    /// Wait for each created pod until it is ready, at most `timeout` in all, and say how
    /// each one ended (in creation order): unlike [`PodSet::wait_ready`], a pod that will not
    /// start does not stop the wait for the others. At most `parallel` pods are watched at
    /// once (a fleet may have hundreds). `Err(Interrupted)` at `cancel`.
    pub async fn wait_each(
        &self,
        timeout: Duration,
        cancel: &CancellationToken,
        parallel: usize,
    ) -> Result<Vec<(String, Result<Pod, LifecycleError>)>, LifecycleError> {
        use futures::stream::StreamExt;
        let deadline = tokio::time::Instant::now() + timeout;
        let waits = self.created().into_iter().map(|c| async move {
            let r = self
                .wait_one(c.name.clone(), deadline, timeout, cancel.clone())
                .await;
            (c.name, r)
        });
        let ends: Vec<(String, Result<Pod, LifecycleError>)> = futures::stream::iter(waits)
            .buffered(parallel.max(1))
            .collect()
            .await;
        if cancel.is_cancelled()
            || ends
                .iter()
                .any(|(_, r)| matches!(r, Err(LifecycleError::Interrupted)))
        {
            return Err(LifecycleError::Interrupted);
        }
        Ok(ends)
    }

    /// How the wait for `pod` ends, if it does now: ready, or a failure its status and events
    /// explain.
    async fn ended(&self, name: &str, pod: &Pod) -> Option<Result<Pod, LifecycleError>> {
        if is_ready(pod) {
            return Some(Ok(pod.clone()));
        }
        let events = self.events_of(name).await;
        let d = explain_pod(pod, &events)?;
        if self.port_freed_soon(name, pod, &events).await {
            return None;
        }
        let d = self.with_dra_reasons(d, pod).await;
        Some(Err(LifecycleError::NotStarted(Box::new(d))))
    }

    /// Whether `pod` waits only for a host port that a pod being deleted still holds on its
    /// node (as after Ctrl-C, which deletes railsweep's pods without waiting for them to go,
    /// and a run started at once): the port comes free when that pod is gone, and the
    /// scheduler then places this one, so the wait goes on (said once). Only the pods of this
    /// set's namespace are looked at: a holder elsewhere is not railsweep's to wait for.
    async fn port_freed_soon(&self, name: &str, pod: &Pod, events: &[Event]) -> bool {
        let Some((node, ports)) = waits_for_host_port(pod, events) else {
            return false;
        };
        let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let Ok(on_node) = self.pods.list(&lp).await else {
            return false;
        };
        let Some((holder, port)) = on_node.items.iter().find_map(|p| {
            p.metadata.deletion_timestamp.as_ref()?;
            let port = host_ports(p).into_iter().find(|h| ports.contains(h))?;
            Some((p.metadata.name.clone()?, port))
        }) else {
            return false;
        };
        if let Ok(mut said) = self.said_port_waits.lock() {
            if !said.iter().any(|s| s == name) {
                said.push(name.to_string());
                results::say!(
                    "railsweep: pod {name} waits for host port {port} on {node}: pod {holder}, being deleted, still holds it"
                );
            }
        }
        true
    }

    async fn wait_one(
        &self,
        name: String,
        deadline: tokio::time::Instant,
        timeout: Duration,
        cancel: CancellationToken,
    ) -> Result<Pod, LifecycleError> {
        // Ready, or a failure that the status alone shows.
        let settled =
            |p: Option<&Pod>| p.is_some_and(|p| is_ready(p) || explain_pod(p, &[]).is_some());
        let watch = await_condition(self.pods.clone(), &name, settled);
        tokio::pin!(watch);
        let mut beat = tokio::time::interval(Duration::from_secs(1));
        let mut last: Option<Pod> = None;
        let mut watching = true;
        loop {
            tokio::select! {
                r = &mut watch, if watching => {
                    watching = false;
                    let pod = r.map_err(|source| LifecycleError::Watch { pod: name.clone(), source })?;
                    if let Some(p) = pod {
                        if let Some(end) = self.ended(&name, &p).await {
                            return end;
                        }
                    }
                    // A failure gone by the time it was read: go on with the beat alone.
                }
                _ = beat.tick() => {
                    let pod = self.pods.get_opt(&name).await.map_err(|source| LifecycleError::Api {
                        action: "read", pod: name.clone(), source,
                    })?;
                    if let Some(p) = pod {
                        if let Some(end) = self.ended(&name, &p).await {
                            return end;
                        }
                        last = Some(p);
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    let events = self.events_of(&name).await;
                    // A pod still waiting for a port (above) says so; any other, its wait.
                    let mut d = last
                        .as_ref()
                        .and_then(|p| explain_pod(p, &events))
                        .unwrap_or_else(|| explain_timeout(last.as_ref(), &events, timeout));
                    if last.is_none() {
                        d.pod = format!("{}/{name}", self.namespace);
                    }
                    return Err(LifecycleError::NotStarted(Box::new(d)));
                }
                _ = cancel.cancelled() => return Err(LifecycleError::Interrupted),
            }
        }
    }

    /// Delete every pod this set created (the client first), and wait up to `wait` for them
    /// to be gone (`None`: do not wait). Returns the names deleted; errors are collected, not
    /// fatal, so that one failure does not leave the other pod behind.
    pub async fn delete_all(&self, wait: Option<Duration>) -> (Vec<String>, Vec<LifecycleError>) {
        let (deleted, mut errors) = self.delete_these(&self.created(), wait).await;
        for t in self.made_templates() {
            match self.templates.delete(&t, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => {
                    errors.push(LifecycleError::Api {
                        action: "delete the ResourceClaimTemplate of",
                        pod: t.clone(),
                        source,
                    });
                    continue;
                }
            }
            if let Ok(mut m) = self.made_templates.lock() {
                m.retain(|x| x != &t);
            }
        }
        (deleted, errors)
    }

    /// [`PodSet::delete_all`] for the created pods named in `names` only (a fleet's pods that
    /// did not start, deleted before the fleet goes on without them).
    pub async fn delete_named(
        &self,
        names: &[String],
        wait: Option<Duration>,
    ) -> (Vec<String>, Vec<LifecycleError>) {
        let these: Vec<Created> = self
            .created()
            .into_iter()
            .filter(|c| names.contains(&c.name))
            .collect();
        self.delete_these(&these, wait).await
    }

    async fn delete_these(
        &self,
        created: &[Created],
        wait: Option<Duration>,
    ) -> (Vec<String>, Vec<LifecycleError>) {
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for c in created.iter().rev() {
            match self.pods.delete(&c.name, &DeleteParams::default()).await {
                Ok(_) => deleted.push(c.name.clone()),
                Err(kube::Error::Api(s)) if s.code == 404 => deleted.push(c.name.clone()),
                Err(source) => errors.push(LifecycleError::Api {
                    action: "delete",
                    pod: c.name.clone(),
                    source,
                }),
            }
        }
        if let Some(limit) = wait {
            // Only the pods whose DELETE was taken, and all at once: the wait is at most
            // `limit` in all (a pod the API server refused to delete is never gone).
            let waits = created
                .iter()
                .filter(|c| deleted.contains(&c.name))
                .filter_map(|c| Some((c.name.clone(), c.uid.clone()?)))
                .map(|(name, uid)| async move {
                    let gone =
                        await_condition(self.pods.clone(), &name, conditions::is_deleted(&uid));
                    match tokio::time::timeout(limit, gone).await {
                        Ok(Err(source)) => Some(LifecycleError::Watch { pod: name, source }),
                        // Gone, or Terminating still: deleted as far as railsweep is concerned.
                        Ok(Ok(_)) | Err(_) => None,
                    }
                });
            errors.extend(futures::future::join_all(waits).await.into_iter().flatten());
        }
        if let Ok(mut c) = self.created.lock() {
            c.retain(|x| !deleted.contains(&x.name));
        }
        (deleted, errors)
    }
}

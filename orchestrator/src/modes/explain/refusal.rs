//! Objects the API server refuses to create: admission, RBAC, quotas, bad templates.
use k8s_openapi::api::core::v1::Pod;
use kube::core::Status;

use super::*;

/// Why the API server refused to create `pod` (`status` from the create call).
pub fn explain_create_error(pod: &Pod, status: &Status) -> Diagnosis {
    let message = status.message.as_str();
    let ns = namespace(pod);
    if let Some(rest) = message
        .split_once("violates PodSecurity \"")
        .map(|(_, r)| r)
    {
        let enforced = rest
            .split(['"', ':'])
            .next()
            .and_then(Level::parse)
            .unwrap_or(Level::Baseline);
        let (needed, why) = required_level(pod);
        let mode = mode_of(pod);
        let mut todo = format!(
            "namespace {ns} enforces Pod Security level {enforced}; this pod needs {needed} ({}). Run in a \
             namespace that allows {needed} (-n), or label this one: kubectl label namespace {ns} \
             pod-security.kubernetes.io/enforce={needed} --overwrite",
            if why.is_empty() { "nothing above Baseline".to_string() } else { why.join(", ") }
        );
        match mode {
            Some(m) if m.host_network() => todo.push_str(
                ". The hostNetwork modes always need privileged (host namespaces); ipvlan with --no-ipc-lock \
                 passes baseline",
            ),
            Some(Mode::Ipvlan | Mode::Sriov) if why.iter().all(|w| w.starts_with("non-default capabilities")) => {
                todo.push_str(
                    ". Or add --no-ipc-lock: without IPC_LOCK this pod passes baseline, on nodes whose container \
                     runtime sets an unlimited memlock limit (a CRI-O drop-in, in the field report)",
                )
            }
            _ => {}
        }
        return Diagnosis {
            problem: Problem::PodSecurity { enforced, needed },
            pod: pod_ref(pod),
            what: format!("the API server refused it: {message}"),
            todo,
        };
    }
    if message.contains("RuntimeClass") && message.contains("not found") {
        let rc = quoted_after(message, "RuntimeClass \"").unwrap_or("?");
        return Diagnosis {
            problem: Problem::RuntimeClassMissing,
            pod: pod_ref(pod),
            what: format!("the API server refused it: {message}"),
            todo: format!(
                "create the RuntimeClass {rc}, whose CRI-O handler accepts the io.kubernetes.cri-o.Devices \
                 annotation (deploy/examples/runtimeclass-runc-nohostdev.yaml and its CRI-O drop-in), or name \
                 yours with --runtime-class"
            ),
        };
    }
    if status.code == 404 && message.contains("namespaces") {
        return Diagnosis {
            problem: Problem::NamespaceMissing,
            pod: pod_ref(pod),
            what: format!("the API server refused it: {message}"),
            todo: format!(
                "create namespace {ns} (kubectl create namespace {ns}) or pick another with -n"
            ),
        };
    }
    Diagnosis {
        problem: Problem::Refused,
        pod: pod_ref(pod),
        what: format!(
            "the API server refused it ({} {}): {message}",
            status.code,
            if status.reason.is_empty() {
                "error"
            } else {
                status.reason.as_str()
            }
        ),
        todo: if status.code == 409 {
            format!(
                "a pod of that name exists: delete it (kubectl delete pod -n {ns} {}) or wait for it to go",
                name(pod)
            )
        } else if let Some((verb, resource)) = rbac_refusal(message) {
            format!(
                "your account lacks `{verb}` on {resource} in namespace {ns}: grant it what deploy/rbac.yaml's \
                 Role holds (kubectl apply -f deploy/rbac.yaml, or bind that Role to your user or group)"
            )
        } else if status.code == 403 {
            "your account may not create pods there, or a policy refused the pod: the message says which".into()
        } else {
            "the message above says what the API server objects to".into()
        },
    }
}

/// Why the API server refused to create the ResourceClaimTemplate `name` of `pod`'s mode.
pub fn explain_template_error(pod: &Pod, name: &str, status: &Status) -> Diagnosis {
    let message = status.message.as_str();
    let ns = namespace(pod);
    let (problem, todo) = if status.code == 404 && message.contains("namespaces") {
        (
            Problem::NamespaceMissing,
            format!(
                "create namespace {ns} (kubectl create namespace {ns}) or pick another with -n"
            ),
        )
    } else if status.code == 404 {
        (
            Problem::Refused,
            "the API server does not serve resource.k8s.io/v1 ResourceClaimTemplates: mode dra needs Kubernetes 1.34 or later (DRA is GA there)"
                .to_string(),
        )
    } else if let Some((verb, resource)) = rbac_refusal(message) {
        (
            Problem::Refused,
            format!(
                "your account lacks `{verb}` on {resource} in namespace {ns}: grant it what deploy/rbac.yaml's Role holds (kubectl apply -f deploy/rbac.yaml)"
            ),
        )
    } else if status.code == 409 {
        (
            Problem::Refused,
            format!("a ResourceClaimTemplate {name} exists: delete it (kubectl delete resourceclaimtemplate -n {ns} {name}) or use another --run-id"),
        )
    } else {
        (
            Problem::Refused,
            "the message says what the API server objects to in the claim (a --device-selector that is not valid CEL, for one)"
                .to_string(),
        )
    };
    Diagnosis {
        problem,
        pod: pod_ref(pod),
        what: format!(
            "the API server refused its ResourceClaimTemplate {name} ({} {}): {message}",
            status.code, status.reason
        ),
        todo,
    }
}

/// Whether `pod` tolerates taints with `key` (or every taint).
pub(super) fn tolerates(pod: &Pod, key: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some_and(|ts| {
            ts.iter().any(|t| match t.key.as_deref() {
                None | Some("") => t.operator.as_deref() == Some("Exists"),
                Some(k) => k == key,
            })
        })
}

/// The verb and resource of an RBAC refusal: `User "U" cannot VERB resource "RES" in API group ...`.
pub fn rbac_refusal(message: &str) -> Option<(&str, &str)> {
    let rest = message.split_once(" cannot ")?.1;
    let (verb, rest) = rest.split_once(" resource \"")?;
    let resource = rest.split('"').next()?;
    Some((verb, resource))
}

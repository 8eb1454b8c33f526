//! The Pod Security Standards level a pod needs, worked out from the pod itself, with the
//! reasons in the words Pod Security admission uses ("host namespaces (hostNetwork=true)").
//!
//! Only the Baseline checks that railsweep's pods can trip are evaluated (host namespaces,
//! privileged, hostPath volumes, host ports, added capabilities); railsweep's pods run as root
//! and so never meet Restricted.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;

/// A Pod Security Standards level, from the most to the least permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `restricted`: hardened (no root, no added capabilities).
    Restricted,
    /// `baseline`: no host namespaces, privileged, hostPath or added capabilities beyond the
    /// default set.
    Baseline,
    /// `privileged`: anything goes.
    Privileged,
}

impl Level {
    /// The name in the `pod-security.kubernetes.io/enforce` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Restricted => "restricted",
            Level::Baseline => "baseline",
            Level::Privileged => "privileged",
        }
    }

    /// Parse a level name (as in `violates PodSecurity "baseline:latest"`).
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "restricted" => Some(Level::Restricted),
            "baseline" => Some(Level::Baseline),
            "privileged" => Some(Level::Privileged),
            _ => None,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The capabilities Baseline allows a container to add (the container runtime's defaults).
const BASELINE_CAPS: [&str; 13] = [
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

/// The lowest level that admits `pod`, and why it is not lower: the Baseline violations, each
/// as Pod Security admission words it, in the order its messages use.
pub fn required_level(pod: &Pod) -> (Level, Vec<String>) {
    let mut why = Vec::new();
    let Some(spec) = pod.spec.as_ref() else {
        return (Level::Baseline, why);
    };
    let mut ns = Vec::new();
    if spec.host_network == Some(true) {
        ns.push("hostNetwork=true");
    }
    if spec.host_pid == Some(true) {
        ns.push("hostPID=true");
    }
    if spec.host_ipc == Some(true) {
        ns.push("hostIPC=true");
    }
    let host_paths: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some())
        .map(|v| format!("\"{}\"", v.name))
        .collect();
    let mut caps = Vec::new();
    let mut privileged = Vec::new();
    let mut ports = Vec::new();
    for c in &spec.containers {
        let sc = c.security_context.as_ref();
        if sc.and_then(|s| s.privileged) == Some(true) {
            privileged.push(format!(
                "container \"{}\" must not set securityContext.privileged=true",
                c.name
            ));
        }
        let added: Vec<String> = sc
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.add.as_ref())
            .into_iter()
            .flatten()
            .filter(|cap| !BASELINE_CAPS.contains(&cap.as_str()))
            .map(|cap| format!("\"{cap}\""))
            .collect();
        if !added.is_empty() {
            caps.push(format!(
                "container \"{}\" must not include {} in securityContext.capabilities.add",
                c.name,
                added.join(", ")
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
            let noun = if hp.len() == 1 {
                "hostPort"
            } else {
                "hostPorts"
            };
            ports.push(format!(
                "container \"{}\" uses {noun} {}",
                c.name,
                hp.join(", ")
            ));
        }
    }
    // In the order of the admission plugin's check IDs (capabilities_baseline,
    // hostNamespaces, hostPathVolumes, hostPorts, privileged), as its messages list them.
    if !caps.is_empty() {
        why.push(format!("non-default capabilities ({})", caps.join("; ")));
    }
    if !ns.is_empty() {
        why.push(format!("host namespaces ({})", ns.join(", ")));
    }
    if !host_paths.is_empty() {
        let noun = if host_paths.len() == 1 {
            "volume"
        } else {
            "volumes"
        };
        why.push(format!(
            "hostPath volumes ({noun} {})",
            host_paths.join(", ")
        ));
    }
    if !ports.is_empty() {
        why.push(format!("hostPort ({})", ports.join("; ")));
    }
    if !privileged.is_empty() {
        why.push(format!("privileged ({})", privileged.join("; ")));
    }
    let level = if why.is_empty() {
        Level::Baseline
    } else {
        Level::Privileged
    };
    (level, why)
}

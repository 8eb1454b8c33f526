//! Where the pods are and how commands reach them: `-n`, `-A`, `--context`, `--cluster`,
//! `--kubeconfig`, `--runner`, `--request-timeout`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::ValueEnum;

use super::heading;
use crate::runner::KubeTarget;

/// How commands reach the pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunnerKind {
    /// Pod exec through the Kubernetes API (kubeconfig resolved like kubectl).
    Kube,
    /// Network namespaces of this machine (`ip netns exec POD`); `-` is this machine itself.
    Local,
}

/// Where the pods are and how commands reach them (`railsweep run` and `railsweep fleet`).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = heading::KUBERNETES)]
pub struct ClusterArgs {
    /// Namespace of the pods [default: the kubeconfig context's, else `default`]; a pod of
    /// another namespace is `NAMESPACE/NAME`.
    #[arg(short = 'n', long, value_name = "NS", value_parser = crate::names::namespace)]
    pub namespace: Option<String>,
    /// `fleet -l`: the pods of every namespace, named `NAMESPACE/NAME` in the rows (kubectl's
    /// -A).
    #[arg(short = 'A', long = "all-namespaces", conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Kubeconfig context [default: the current context].
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The kubeconfig's cluster to talk to, as kubectl's --cluster [default: the context's];
    /// the rows record its name.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// Kubeconfig file [default: $KUBECONFIG, else ~/.kube/config, else in-cluster].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// How to reach the pods: `kube` (API server exec) or `local` (network namespaces here).
    #[arg(long, value_enum, default_value_t = RunnerKind::Kube)]
    pub runner: RunnerKind,
    /// How long railsweep waits for the API server's answer to one request before giving it
    /// up, as kubectl's: `30s`, `1m`, `500ms`, a bare number of seconds, `0` for no limit
    /// [default: 30s, railsweep's own bound; kubectl has none]. Once answered, a test's exec
    /// stream runs until the rail's deadline; set-up's commands and signals get a minute.
    #[arg(long, value_name = "DURATION", value_parser = request_timeout, default_value = "30s", hide_default_value = true)]
    pub request_timeout: RequestTimeout,
}

/// `--request-timeout`: `None` is no limit (`0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTimeout(pub Option<Duration>);

/// `--request-timeout`'s parser: kubectl's spelling, a Go duration (`1m30s`, `500ms`, `2h`)
/// or a bare number of seconds; `0` is no limit.
fn request_timeout(s: &str) -> Result<RequestTimeout, String> {
    let bad = || {
        format!(
            "expected a duration as kubectl's --request-timeout takes it (30s, 1m, 500ms, a number \
             of seconds, 0 for no limit), got `{s}`"
        )
    };
    let t = s.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok(RequestTimeout((n > 0).then(|| Duration::from_secs(n))));
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, after) = rest.split_at(digits);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let v: f64 = num.parse().map_err(|_| bad())?;
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        let part = Duration::try_from_secs_f64(v * scale).map_err(|_| bad())?;
        total = total.checked_add(part).ok_or_else(bad)?;
        rest = next;
    }
    if t.is_empty() {
        return Err(bad());
    }
    Ok(RequestTimeout((!total.is_zero()).then_some(total)))
}

impl ClusterArgs {
    /// `--cluster` with `--runner local`, which reaches no cluster: refused, with the flag
    /// that names the rows' cluster; `-A` where no pods are listed (`lists`: `fleet -l`),
    /// refused with the way to name a pod of another namespace.
    ///
    /// # Errors
    ///
    /// `--cluster` given with `--runner local`, or `-A` where it lists nothing.
    pub fn check(&self, lists: bool) -> Result<()> {
        if self.all_namespaces && !lists {
            bail!(
                "-A/--all-namespaces: this command lists no pods (-A goes with `fleet -l \
                 SELECTOR`); name a pod of another namespace as NAMESPACE/NAME"
            );
        }
        if self.all_namespaces && self.runner == RunnerKind::Local {
            bail!("-A/--all-namespaces lists pods through the Kubernetes API: not with --runner local");
        }
        if let (RunnerKind::Local, Some(c)) = (self.runner, &self.cluster) {
            bail!(
                "--cluster {c}: --cluster picks the kubeconfig's cluster (as kubectl's), and \
                 --runner local reaches none; to name the cluster in the rows, give \
                 --cluster-label {c}"
            );
        }
        Ok(())
    }

    /// The Kubernetes API target these flags name, running in `container`.
    pub fn kube_target(&self, container: Option<String>) -> KubeTarget {
        KubeTarget {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            namespace: self.namespace.clone(),
            container,
            request_timeout: self.request_timeout.0,
        }
    }

    /// The namespace without asking a cluster (dry runs print pods for it): `--namespace`,
    /// else `default`.
    pub fn namespace_or_default(&self) -> String {
        self.namespace.clone().unwrap_or_else(|| "default".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_timeout_reads_kubectls_durations() {
        let d = |s: &str| request_timeout(s).map(|t| t.0);
        assert_eq!(d("30s"), Ok(Some(Duration::from_secs(30))));
        assert_eq!(d("1m"), Ok(Some(Duration::from_secs(60))));
        assert_eq!(d("1m30s"), Ok(Some(Duration::from_secs(90))));
        assert_eq!(d("500ms"), Ok(Some(Duration::from_millis(500))));
        assert_eq!(d("2"), Ok(Some(Duration::from_secs(2))));
        assert_eq!(d("0"), Ok(None));
        assert_eq!(d("0s"), Ok(None));
        for bad in ["", "s", "1x", "-1s", "1.5.5s", "abc"] {
            let e = d(bad).expect_err(bad);
            assert!(
                e.contains("--request-timeout") && e.contains(bad),
                "{bad}: {e}"
            );
        }
    }
}

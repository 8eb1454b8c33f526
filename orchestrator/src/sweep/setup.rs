//! Set-up: each pod's rdmabw found (or injected) and checked, its rails read, the mode the rows
//! are recorded under.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use results::rdmabw::rails::{Attachment, RailsReport};
use results::NetworkMode;

use super::{Pods, Prepared, Rdmabw, SweepConfig};
use crate::rdmabw::{self};
use crate::runner::{Exit, PodInfo, Runner};

/// Where an injected rdmabw goes in a pod.
pub fn injected_path() -> String {
    format!("/tmp/railsweep-rdmabw-{}", rdmabw::OWN_VERSION)
}

/// Copy the local rdmabw `local` into `pod`, at [`injected_path`]: its path there.
pub async fn inject<R: Runner>(runner: &R, pod: &str, local: &std::path::Path) -> Result<String> {
    let bytes = tokio::fs::read(local)
        .await
        .with_context(|| format!("cannot read {} to inject it", local.display()))?;
    let dest = injected_path();
    // `head -c N` stops after exactly N bytes, so the copy does not depend on the exec
    // protocol's way of closing stdin (v4 has none). The script is fixed; the size and path are
    // its positional parameters. The copy lands under a name of its own (the shell's PID) and is
    // renamed into place, so two pods sharing a /tmp (the lab) never see a half-written binary.
    let argv: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        "head -c \"$1\" >\"$2.$$\" && chmod 755 \"$2.$$\" && mv -f \"$2.$$\" \"$2\"".into(),
        "railsweep".into(),
        bytes.len().to_string(),
        dest.clone(),
    ];
    let n = bytes.len();
    let out = runner.exec(pod, &argv, Some(bytes)).await?;
    if !out.exit.success() {
        bail!(
            "copying rdmabw ({n} bytes) into pod {pod} failed: {} {}",
            out.exit,
            out.stderr_tail(3)
        );
    }
    Ok(dest)
}

fn install_hint(injected: bool) -> &'static str {
    if injected {
        ""
    } else {
        " Install rdmabw in the image, give its path with --rdmabw, or let railsweep copy its own with --inject."
    }
}

/// Refuse an rdmabw that does not speak our documents and protocol; note a different patch.
fn check_compatible(version: &str, pod: &str, injected: bool) -> Result<()> {
    if !rdmabw::compatible(version, rdmabw::OWN_VERSION) {
        bail!(
            "pod {pod} has rdmabw {version}, which does not speak this railsweep's protocol ({}).{}",
            rdmabw::OWN_VERSION,
            install_hint(injected)
        );
    }
    if version != rdmabw::OWN_VERSION {
        eprintln!(
            "railsweep: note: pod {pod} has rdmabw {version}, this railsweep was built with {}",
            rdmabw::OWN_VERSION
        );
    }
    Ok(())
}

/// `rdmabw --version` in the pod: is it there, and which version is it.
async fn check_version<R: Runner>(
    runner: &R,
    pod: &str,
    bin: &str,
    injected: bool,
) -> Result<String> {
    let out = runner.exec(pod, &rdmabw::version_argv(bin), None).await?;
    let hint = install_hint(injected);
    match &out.exit {
        Exit::Code(0) => {}
        Exit::Code(126 | 127 | 255) | Exit::Error(_) => bail!(
            "cannot run `{bin} --version` in pod {pod}: {}{}.{hint}",
            out.exit,
            match out.stderr_tail(2) {
                t if t.is_empty() => String::new(),
                t => format!(" ({t})"),
            }
        ),
        e => bail!(
            "`{bin} --version` in pod {pod} failed: {e} {}",
            out.stderr_tail(2)
        ),
    }
    let version = rdmabw::parse_version(&out.stdout).with_context(|| format!("in pod {pod}"))?;
    check_compatible(&version, pod, injected)?;
    Ok(version)
}

/// One pod, ready for sweeps: what [`prepare_pod`] learnt about it.
#[derive(Debug, Clone)]
pub struct PodSetUp {
    /// The pod.
    pub info: PodInfo,
    /// rdmabw's path in it.
    pub bin: String,
    /// Its rails.
    pub rails: RailsReport,
}

/// Set one pod up: look it up, check (or inject) rdmabw, read its rails (and with `--use_cuda`
/// check its GPUs). A fleet does this once per pod for all its pairs.
///
/// # Errors
///
/// The pod cannot be used: it is not running, or its rdmabw is missing, of another version,
/// or fails.
pub async fn prepare_pod<R: Runner>(runner: &R, cfg: &SweepConfig, pod: &str) -> Result<PodSetUp> {
    let info = runner.describe(pod).await?;
    let (bin, injected) = match &cfg.rdmabw {
        Rdmabw::InPods(path) => (path.clone(), false),
        Rdmabw::Inject(local) => (inject(runner, pod, local).await?, true),
        Rdmabw::Injected => (injected_path(), true),
    };
    // One exec when all is well: the rails report names the rdmabw version that printed it.
    // Only when it fails does `--version` run, to tell a missing or foreign rdmabw apart from
    // a failing `rails`.
    let out = runner.exec(pod, &rdmabw::rails_argv(&bin), None).await?;
    match rdmabw::parse_rails(&out) {
        Ok(rails) => {
            check_compatible(&rails.rdmabw_version, pod, injected)?;
            if let Some(gpu) = &cfg.gpu {
                // Every rail would fail the same way: say it once, before any test.
                let out = runner.exec(pod, &rdmabw::gpus_argv(&bin), None).await?;
                rdmabw::parse_gpus(&out).with_context(|| {
                    format!("--use_cuda {gpu}: no GPU rdmabw can use in pod {pod}")
                })?;
            }
            Ok(PodSetUp { info, bin, rails })
        }
        Err(e) => {
            check_version(runner, pod, &bin, injected).await?;
            Err(e.context(format!("in pod {pod}")))
        }
    }
}

/// Set-up: look both pods up, check (or inject) rdmabw, and read their rails, both pods at once.
/// Any error here is a set-up error (exit code 2).
pub async fn prepare<R: Runner>(runner: &R, cfg: &SweepConfig, pods: &Pods) -> Result<Prepared> {
    let t0 = Instant::now();
    if pods.client == pods.server {
        eprintln!(
            "railsweep: warning: client and server are the same pod ({})",
            pods.client
        );
    }
    let (c, s) = tokio::join!(
        prepare_pod(runner, cfg, &pods.client),
        prepare_pod(runner, cfg, &pods.server)
    );
    let client = c.context("client pod")?;
    let server = s.context("server pod")?;
    let mut prep = Prepared::of(pods, client, server);
    prep.setup_s = t0.elapsed().as_secs_f64();
    Ok(prep)
}

impl Prepared {
    /// Both pods of `pods` from their set-ups (made by [`prepare_pod`] earlier: `setup_s` 0).
    pub fn of(pods: &Pods, client: PodSetUp, server: PodSetUp) -> Prepared {
        Prepared {
            pods: pods.clone(),
            client: client.info,
            server: server.info,
            client_bin: client.bin,
            server_bin: server.bin,
            client_rails: client.rails,
            server_rails: server.rails,
            setup_s: 0.0,
        }
    }
}

/// The network mode rows are recorded under: `--mode`, else hostNetwork pods, else the rails'
/// common attachment (SR-IOV, IPvlan, host network), else `lab` for the local runner and `pods`
/// for Kubernetes.
pub fn infer_mode(
    explicit: Option<&NetworkMode>,
    runner_kind: &str,
    prep: &Prepared,
) -> NetworkMode {
    if let Some(m) = explicit {
        return m.clone();
    }
    if prep.client.host_network == Some(true) && prep.server.host_network == Some(true) {
        return NetworkMode::HostNetwork;
    }
    let atts: BTreeSet<String> = prep
        .client_rails
        .rails
        .iter()
        .chain(&prep.server_rails.rails)
        .map(|r| format!("{:?}", r.attachment))
        .collect();
    if atts.len() == 1 {
        let only = prep
            .client_rails
            .rails
            .first()
            .or(prep.server_rails.rails.first())
            .map(|r| r.attachment);
        match only {
            Some(Attachment::Sriov) => return NetworkMode::Sriov,
            Some(Attachment::Ipvlan) => return NetworkMode::Ipvlan,
            Some(Attachment::HostNetwork) => return NetworkMode::HostNetwork,
            _ => {}
        }
    }
    if runner_kind == "local" {
        NetworkMode::Lab
    } else {
        NetworkMode::Pods
    }
}

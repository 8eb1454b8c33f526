//! Set-up: each pod's rdmabw found (or injected) and checked, its rails read, the mode the rows
//! are recorded under.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use results::rdmabw::rails::{Attachment, Capability, RailRow, RailsReport};
use results::NetworkMode;

use super::{Pods, Prepared, Rdmabw, SweepConfig};
use crate::rdmabw::{self};
use crate::runner::{Exit, Output, PodInfo, Runner};

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
    let t0 = Instant::now();
    let out = once_more(pod, "copying rdmabw in", || {
        runner.exec(pod, &argv, Some(bytes.clone()))
    })
    .await?;
    if !out.exit.success() {
        bail!(
            "copying rdmabw ({n} bytes) into pod {pod} failed: {} {}",
            out.exit,
            out.stderr_tail(3)
        );
    }
    results::say!(
        "railsweep: pod {pod}: {} copied in ({:.1} MB, {:.1} s)",
        local.display(),
        n as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
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
/// A version without its build metadata (`0.1.0+cd06ab8` is release `0.1.0`): by semver's rule
/// two builds of one release are the same release.
fn release(version: &str) -> &str {
    version.split('+').next().unwrap_or(version)
}

fn check_compatible(version: &str, pod: &str, injected: bool) -> Result<()> {
    if !rdmabw::compatible(version, rdmabw::OWN_VERSION) {
        bail!(
            "pod {pod} has rdmabw {version}, which does not speak this railsweep's protocol ({}).{}",
            rdmabw::OWN_VERSION,
            install_hint(injected)
        );
    }
    if release(version) != release(rdmabw::OWN_VERSION) {
        results::say!(
            "railsweep: note: pod {pod} has rdmabw {version}, this railsweep was built with {}",
            rdmabw::OWN_VERSION
        );
    }
    Ok(())
}

/// `--test bw,lat` needs an rdmabw that announces [`Capability::Latency`]: an older one would
/// fail every rail's latency test, each in its own words, after its bandwidth was measured.
fn check_latency(rails: &RailsReport, pod: &str, injected: bool) -> Result<()> {
    if rails.capabilities.contains(&Capability::Latency) {
        return Ok(());
    }
    let fix = if injected {
        " Give --inject-binary an rdmabw built with `rdmabw lat`, or leave out --test bw,lat."
    } else {
        " Install a newer rdmabw in the image, let railsweep copy its own with --inject, or \
         leave out --test bw,lat."
    };
    bail!(
        "--test bw,lat: pod {pod} has rdmabw {}, which does not announce the latency test \
         (`rdmabw lat`) in `rdmabw rails --json`.{fix}",
        rails.rdmabw_version
    )
}

/// A set-up command through `exec`, run once more when the exec itself did not run
/// ([`Exit::Error`]: the runtime could not start it or its end was not seen; containerd 2.4 on
/// an emulated node answered "failed to exec in container: failed to load task: context deadline
/// exceeded"). The set-up commands only read, or (the copy) write under a name of their own and
/// rename, so a second run is safe; a command that ran and failed is not run again.
async fn once_more<F, Fut>(pod: &str, what: &str, exec: F) -> Result<Output>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<Output>>,
{
    let out = exec().await?;
    match &out.exit {
        Exit::Error(reason) => {
            results::say!("railsweep: pod {pod}: {what} did not run ({reason}); once more");
            exec().await
        }
        Exit::Code(_) => Ok(out),
    }
}

/// `rdmabw --version` in the pod: is it there, and which version is it.
async fn check_version<R: Runner>(
    runner: &R,
    pod: &str,
    bin: &str,
    injected: bool,
) -> Result<String> {
    let argv = rdmabw::version_argv(bin);
    let out = once_more(pod, "rdmabw --version", || runner.exec(pod, &argv, None)).await?;
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
    let argv = rdmabw::rails_argv(&bin);
    let out = once_more(pod, "rdmabw rails", || runner.exec(pod, &argv, None)).await?;
    match rdmabw::parse_rails(&out) {
        Ok(rails) => {
            check_compatible(&rails.rdmabw_version, pod, injected)?;
            if cfg.latency.is_some() {
                check_latency(&rails, pod, injected)?;
            }
            let read = || async {
                let out = runner.exec(pod, &rdmabw::rails_argv(&bin), None).await?;
                rdmabw::parse_rails(&out)
            };
            let rails = settle_rails(pod, rails, read, RAILS_SETTLE).await;
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

/// How long a pod's rails may take to come up once it runs: the kernel fills a RoCE device's
/// GID table, and brings its port up, after the pod's network is set up (a DRA driver moving a
/// NIC into the pod, a CNI adding an address), so the first look can come too early.
pub const RAILS_SETTLE: Duration = Duration::from_secs(8);

/// A rail that may still be coming up: it has its address, but no GID of it or no active port,
/// and its interface is not down (a GID does not come to an interface that is down: that rail
/// fails at once, its reason naming the interface).
pub fn settling(r: &RailRow) -> bool {
    !r.usable
        && r.ipv4.is_some()
        && !r.interface_down()
        && (r.gid_index.is_none() || r.state.as_deref() != Some("ACTIVE"))
}

/// `first`, or while some of its rails are [`settling`], what `read` says on looking again
/// (every 250 ms, for at most `within`): the first report with none settling, else the last one
/// read. A failing read ends the wait with the last good report.
pub async fn settle_rails<F, Fut>(
    pod: &str,
    first: RailsReport,
    mut read: F,
    within: Duration,
) -> RailsReport
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<RailsReport>>,
{
    let waiting: Vec<&str> = first
        .rails
        .iter()
        .filter(|r| settling(r))
        .map(|r| r.iface.as_str())
        .collect();
    if waiting.is_empty() {
        return first;
    }
    results::say!(
        "railsweep: pod {pod}: rail(s) {} not up yet ({}); looking again for up to {} s",
        waiting.join(", "),
        first
            .rails
            .iter()
            .find(|r| settling(r))
            .and_then(|r| r.reason.as_deref())
            .unwrap_or("no GID"),
        within.as_secs()
    );
    let t0 = Instant::now();
    let mut last = first;
    while t0.elapsed() < within {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match read().await {
            Ok(r) => last = r,
            Err(_) => break,
        }
        if !last.rails.iter().any(settling) {
            results::say!(
                "railsweep: pod {pod}: its rails came up after {:.1} s",
                t0.elapsed().as_secs_f64()
            );
            break;
        }
    }
    last
}

/// Set-up: look both pods up, check (or inject) rdmabw, and read their rails, both pods at once.
/// Any error here is a set-up error (exit code 2).
pub async fn prepare<R: Runner>(runner: &R, cfg: &SweepConfig, pods: &Pods) -> Result<Prepared> {
    let t0 = Instant::now();
    if pods.client == pods.server {
        results::say!(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::{report, row};
    use std::cell::Cell;

    #[test]
    fn another_build_of_the_release_is_no_other_release() {
        assert_eq!(release("0.1.0+cd06ab8"), "0.1.0");
        assert_eq!(release("0.1.0"), "0.1.0");
        assert_ne!(release("0.2.0+cd06ab8"), release("0.1.0+cd06ab8"));
    }

    /// Rail net1 with (`gid`) or without its GID, its port in `state`.
    fn rail(gid: Option<u32>, state: &str) -> RailRow {
        let mut r = row(0, "net1", "rxe0", "10.224.0.1");
        r.gid_index = gid;
        r.state = Some(state.into());
        r.usable = gid.is_some() && state == "ACTIVE";
        r
    }

    #[test]
    fn a_rail_without_its_gid_or_active_port_is_settling() {
        assert!(settling(&rail(None, "ACTIVE")));
        assert!(settling(&rail(Some(1), "DOWN")));
        assert!(!settling(&rail(Some(1), "ACTIVE")));
        // Issue 56: an interface that is down got the whole wait (8 s) for a GID that cannot
        // come; it fails at once. One that is up, or whose state is not reported (an older
        // rdmabw), is still waited for.
        let mut down = rail(None, "DOWN");
        down.operstate = Some("down".into());
        assert!(
            !settling(&down),
            "an interface that is down is not waited for"
        );
        down.operstate = Some("lowerlayerdown".into());
        assert!(!settling(&down));
        down.operstate = Some("up".into());
        assert!(settling(&down));
        down.operstate = None;
        assert!(settling(&down));
        let mut no_addr = rail(None, "ACTIVE");
        no_addr.ipv4 = None;
        assert!(
            !settling(&no_addr),
            "no address: nothing will come up by itself"
        );
    }

    fn ended(exit: Exit) -> Output {
        Output::new(exit, Vec::new(), Vec::new())
    }

    #[tokio::test]
    async fn a_set_up_exec_that_did_not_run_runs_once_more_and_only_then() {
        for (first, runs, last) in [
            (Exit::Error("failed to load task".into()), 2, Exit::Code(0)),
            (Exit::Code(1), 1, Exit::Code(1)),
            (Exit::Code(0), 1, Exit::Code(0)),
        ] {
            let n = Cell::new(0);
            let out = once_more("p", "rdmabw rails", || {
                n.set(n.get() + 1);
                let exit = if n.get() == 1 {
                    first.clone()
                } else {
                    Exit::Code(0)
                };
                async move { Ok(ended(exit)) }
            })
            .await
            .expect("ran");
            assert_eq!((n.get(), out.exit), (runs, last), "first {first}");
        }
        let n = Cell::new(0);
        let out = once_more("p", "rdmabw rails", || {
            n.set(n.get() + 1);
            async { Ok(ended(Exit::Error("again".into()))) }
        })
        .await
        .expect("ran");
        assert_eq!(
            (n.get(), out.exit),
            (2, Exit::Error("again".into())),
            "twice at most"
        );
    }

    #[tokio::test]
    async fn rails_are_read_again_until_they_are_up() {
        let reads = Cell::new(0);
        let read = || {
            reads.set(reads.get() + 1);
            let gid = (reads.get() >= 2).then_some(1);
            async move { Ok(report("p", vec![rail(gid, "ACTIVE")])) }
        };
        let first = report("p", vec![rail(None, "ACTIVE")]);
        let got = settle_rails("p", first, read, Duration::from_secs(5)).await;
        assert_eq!(reads.get(), 2, "read until the GID came, and no more");
        assert!(got.rails[0].usable);
    }

    #[tokio::test]
    async fn up_rails_are_not_read_again_and_a_dead_one_is_given_up() {
        let reads = Cell::new(0);
        let up = report("p", vec![rail(Some(1), "ACTIVE")]);
        let read = || {
            reads.set(reads.get() + 1);
            async { Ok(report("p", vec![rail(None, "ACTIVE")])) }
        };
        let got = settle_rails("p", up.clone(), read, Duration::from_secs(5)).await;
        assert_eq!((reads.get(), got), (0, up));
        let t0 = Instant::now();
        let down = report("p", vec![rail(Some(1), "DOWN")]);
        let read = || async { Ok(report("p", vec![rail(Some(1), "DOWN")])) };
        let got = settle_rails("p", down.clone(), read, Duration::from_millis(600)).await;
        assert_eq!(got, down);
        assert!(t0.elapsed() < Duration::from_secs(2), "bounded by `within`");
    }
}

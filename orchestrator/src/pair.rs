//! One sweep of one pair of pods, the same for `railsweep run` (with or without `--nodes`),
//! each mode of `railsweep compare` and each pair of `railsweep fleet`: set-up in both pods,
//! the rows' mode, the results file opened once both pods are ready, the rails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use results::{NetworkMode, RailResult, RailStatus, RowSink};
use tokio_util::sync::CancellationToken;

use crate::config::generated_by;
use crate::exit::{self, Verdict};
use crate::runner::Runner;
use crate::sweep::{self, Pods, Prepared, SweepConfig, SweepRun};

/// Where a sweep's rows go: a results CSV (and JSON snapshot), opened only once both pods are
/// ready, so that a set-up error leaves no file behind.
#[derive(Debug)]
pub struct RowsFile {
    csv: PathBuf,
    json: Option<PathBuf>,
    resume: bool,
    sink: Option<RowSink>,
}

impl RowsFile {
    /// A new results file (it must not exist).
    pub fn create(csv: PathBuf, json: Option<PathBuf>) -> RowsFile {
        RowsFile {
            csv,
            json,
            resume: false,
            sink: None,
        }
    }

    /// An existing results file, continued (`--resume`).
    pub fn resume(csv: PathBuf, json: Option<PathBuf>) -> RowsFile {
        RowsFile {
            resume: true,
            ..RowsFile::create(csv, json)
        }
    }

    /// The CSV's path.
    pub fn csv_path(&self) -> &Path {
        &self.csv
    }

    fn open(&mut self) -> Result<&mut RowSink> {
        if self.sink.is_none() {
            let json = self.json.as_deref();
            let sink = if self.resume {
                RowSink::resume(&self.csv, json, generated_by())
            } else {
                RowSink::create(&self.csv, json, generated_by())
            }
            .with_context(|| format!("cannot open the results file {}", self.csv.display()))?;
            self.sink = Some(sink);
        }
        Ok(self.sink.as_mut().expect("opened above"))
    }
}

/// How a sweep goes besides its configuration.
#[derive(Debug, Clone)]
pub struct PairRun {
    /// The run id of the rows.
    pub run_id: String,
    /// Rails already measured (`--resume`), and the mode their rows have.
    pub skip: BTreeSet<u32>,
    /// The mode of the rows when the configuration has none and this is known (`--resume`).
    pub known_mode: Option<NetworkMode>,
    /// Raised by Ctrl-C (or a fleet round's deadline).
    pub cancel: CancellationToken,
    /// Hide the progress bars.
    pub quiet: bool,
    /// Say on stderr what is set up (one pair at a time; a fleet's pairs keep quiet).
    pub announce: bool,
    /// Both pods set up already (a fleet sets each pod up once for all its pairs): no set-up
    /// here, no exec.
    pub prepared: Option<Prepared>,
}

/// What stopped a sweep early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interruption {
    /// Ctrl-C came before both pods were set up: nothing was measured, no file written.
    SetUp,
    /// These rails were not measured (not written: `--resume` picks them up); none when
    /// Ctrl-C came after the last rail was measured.
    Rails(Vec<u32>),
}

/// Where the time of a sweep went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    /// Rails measured by this sweep.
    pub measured: usize,
    /// Seconds the set-up of both pods took.
    pub setup_s: f64,
    /// Wall time of the rails (set-up excluded), seconds.
    pub rails_wall_s: f64,
    /// Seconds the rdmabw client processes ran, summed over rails and attempts.
    pub clients_s: f64,
}

/// How a sweep of a pair ended.
#[derive(Debug, Clone)]
pub struct SweepOutcome {
    /// The rows of this run in the results file, in the order written (with `--resume`, the
    /// earlier ones of the same run too).
    pub rows: Vec<RailResult>,
    /// Whether (and where) Ctrl-C stopped it.
    pub interrupted: Option<Interruption>,
    /// Where the time went.
    pub timings: Timings,
    /// The mode the rows were recorded under (`None` when interrupted in set-up).
    pub mode: Option<NetworkMode>,
}

impl SweepOutcome {
    /// A sweep that Ctrl-C stopped before both pods were set up (or before its pods started).
    pub fn interrupted_in_set_up() -> SweepOutcome {
        SweepOutcome {
            rows: Vec::new(),
            interrupted: Some(Interruption::SetUp),
            timings: Timings::default(),
            mode: None,
        }
    }

    /// Interrupted, else problems if a row is not ok.
    pub fn verdict(&self) -> Verdict {
        if self.interrupted.is_some() {
            return Verdict::Interrupted;
        }
        Verdict::problems_if(self.rows.iter().any(|r| r.status != RailStatus::Ok))
    }
}

/// Sweep `pods`: set both up, pick the rows' mode, open `rows`, measure the rails.
///
/// # Errors
///
/// A set-up error (pods, rdmabw missing or of another version), or a results file that
/// cannot be opened or written.
pub async fn sweep_pair<R: Runner>(
    runner: &R,
    pods: &Pods,
    cfg: &SweepConfig,
    rows: &mut RowsFile,
    run: PairRun,
) -> Result<SweepOutcome> {
    if run.announce {
        results::say!(
            "railsweep: {} runner: server pod {}, client pod {}",
            runner.kind(),
            pods.server,
            pods.client
        );
    }
    let prep = match run.prepared {
        Some(p) => p,
        None => tokio::select! {
            p = sweep::prepare(runner, cfg, pods) => p?,
            () = run.cancel.cancelled() => return Ok(SweepOutcome::interrupted_in_set_up()),
        },
    };
    let mode = match (&cfg.mode, run.known_mode) {
        (None, Some(m)) => m,
        _ => sweep::infer_mode(cfg.mode.as_ref(), runner.kind(), &prep),
    };
    if run.announce {
        let planned = sweep::planned_rails(cfg, &prep, &run.skip);
        if planned.is_empty() && run.skip.is_empty() {
            bail!("{}", nothing_to_measure(&prep));
        }
        results::say!(
            "railsweep: rdmabw ready in both pods ({:.1} s); {} rail(s) to measure{}, mode {mode}, run {}{}",
            prep.setup_s,
            planned.len(),
            if cfg.parallel { " at once" } else { "" },
            run.run_id,
            if run.skip.is_empty() {
                String::new()
            } else {
                format!(", {} already in {}", run.skip.len(), rows.csv_path().display())
            }
        );
    }
    if run.announce {
        for (pod, rails) in [
            (&prep.pods.client, &prep.client_rails),
            (&prep.pods.server, &prep.server_rails),
        ] {
            for g in rails.unaligned_gpus() {
                results::say!("railsweep: warning: pod {pod}: {}", g.unaligned_line());
            }
        }
    }
    let sink = rows.open()?;
    let cancel = run.cancel.clone();
    let rails = sweep::run(
        runner,
        cfg,
        &prep,
        SweepRun {
            sink: &mut *sink,
            skip: run.skip,
            run_id: run.run_id.clone(),
            mode: mode.clone(),
            cancel: run.cancel,
            quiet: run.quiet,
        },
    )
    .await?;
    Ok(SweepOutcome {
        rows: sink
            .rows()
            .iter()
            .filter(|r| r.run_id == run.run_id)
            .cloned()
            .collect(),
        // Ctrl-C after the last rail's row (while the remote processes end) still
        // interrupted the run: every rail measured, none left for --resume.
        interrupted: (!rails.interrupted.is_empty() || cancel.is_cancelled())
            .then_some(Interruption::Rails(rails.interrupted)),
        timings: Timings {
            measured: rails.rows.len(),
            setup_s: prep.setup_s,
            rails_wall_s: rails.rails_wall_s,
            clients_s: rails.clients_s,
        },
        mode: Some(mode),
    })
}

/// Ctrl-C once: cancel (remote processes are ended, rows kept). Twice: leave at once.
pub fn watch_ctrl_c(cancel: CancellationToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        results::say!(
            "\nrailsweep: interrupted: ending the remote processes (Ctrl-C again to leave at once)"
        );
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            exit::leave_now();
        }
    });
}

/// Why a sweep has no rail to measure, and the probe that tells more: a set-up error, not an
/// empty table that passes. Rails pair by number, a rail of one pod alone being planned (and
/// recorded as failed), so nothing is planned only when neither pod has a rail.
fn nothing_to_measure(prep: &Prepared) -> String {
    let side = |pod: &str, r: &results::rdmabw::rails::RailsReport| {
        format!(
            "pod {pod} has no rail{}",
            r.not_rails
                .first()
                .map(|n| format!(" ({}: {})", n.name, n.reason))
                .unwrap_or_default()
        )
    };
    format!(
        "nothing to measure: {}, {}; see why with `rdmabw probe` in each pod (kubectl exec POD -- rdmabw probe)",
        side(&prep.pods.client, &prep.client_rails),
        side(&prep.pods.server, &prep.server_rails),
    )
}

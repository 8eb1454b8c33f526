//! One pair's sweep, exactly as `railsweep run` sweeps two pods, with its rows in a file of
//! its own; and every pod set up once, before the rounds, for all its pairs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::stream::StreamExt;
use results::RailResult;
use tokio_util::sync::CancellationToken;

use super::job::{Job, PairConfig};
use crate::pair::{sweep_pair, Interruption, PairRun, RowsFile};
use crate::runner::Runner;
use crate::sweep::{self, PodSetUp, Pods, Prepared};

/// Each pod's set-up, or why it failed.
pub(super) type SetUps = BTreeMap<String, Result<PodSetUp, String>>;

/// How one pair's sweep ended.
#[derive(Debug)]
pub(super) struct PairEnd {
    pub(super) job: Job,
    pub(super) rows: Vec<RailResult>,
    pub(super) interrupted: Vec<u32>,
    pub(super) error: Option<String>,
    pub(super) start: f64,
    pub(super) end: f64,
}

/// Seconds since the epoch, now.
pub(super) fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A pod's name as part of a file name.
fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// What every pair of a fleet run shares.
pub(super) struct Fleet<'a, R: Runner> {
    pub(super) runner: &'a R,
    pub(super) config: PairConfig,
    pub(super) run_id: String,
    pub(super) dir: PathBuf,
    /// Each pod set up once for all its pairs (rdmabw copied in with `--inject`, checked, its
    /// rails read), or why it could not be.
    pub(super) set_up: SetUps,
}

impl<R: Runner> Fleet<'_, R> {
    /// Sweep one pair with the sweep of `railsweep run`, its rows in a file of its own.
    pub(super) async fn pair(&self, job: Job, attempt: &str, cancel: CancellationToken) -> PairEnd {
        let start = now_s();
        let cfg = self.config.for_job(&job.rails);
        let pods = Pods {
            client: job.client.clone(),
            server: job.server.clone(),
            rail_gpus: Default::default(),
        };
        let mut end = PairEnd {
            job,
            rows: Vec::new(),
            interrupted: Vec::new(),
            error: None,
            start,
            end: start,
        };
        let mut ready = Vec::new();
        for (side, pod) in [("client", &pods.client), ("server", &pods.server)] {
            match self.set_up.get(pod) {
                Some(Ok(s)) => ready.push(s.clone()),
                Some(Err(e)) => {
                    end.error = Some(format!("{side} pod: {e}"));
                    end.end = now_s();
                    return end;
                }
                // Not set up (Ctrl-C came first): the sweep sees the Ctrl-C.
                None => {}
            }
        }
        let prepared = match <[PodSetUp; 2]>::try_from(ready) {
            Ok([client, server]) => Some(Prepared::of(&pods, client, server)),
            Err(_) => None,
        };
        let path = self.dir.join("pairs").join(format!(
            "{attempt}-r{}-{}-{}.csv",
            end.job.round + 1,
            file_part(&end.job.client),
            file_part(&end.job.server)
        ));
        let outcome = sweep_pair(
            self.runner,
            &pods,
            &cfg,
            &mut RowsFile::create(path, None),
            PairRun {
                run_id: self.run_id.clone(),
                skip: BTreeSet::new(),
                known_mode: None,
                cancel,
                quiet: true,
                announce: false,
                prepared,
            },
        )
        .await;
        match outcome {
            Ok(o) => match o.interrupted {
                Some(Interruption::SetUp) => {
                    end.error = Some("interrupted before the pair was set up".into());
                }
                Some(Interruption::Rails(rails)) => {
                    end.rows = o.rows;
                    end.interrupted = rails;
                }
                None => end.rows = o.rows,
            },
            Err(e) => end.error = Some(crate::exit::words(&e)),
        }
        end.end = now_s();
        end
    }
}

/// Pods set up at once.
const PARALLEL_SET_UPS: usize = 16;

/// Set every pod up once (not once per pair): copy the rdmabw to inject into it if any,
/// check its rdmabw and read its rails, as a pair's set-up would. Each pod's set-up, or why
/// it failed.
pub(super) async fn set_up_all<R: Runner>(
    runner: &R,
    config: &PairConfig,
    pods: &[String],
) -> SetUps {
    let t0 = Instant::now();
    let (cfg, inject) = (config.base(), config.inject());
    let set_up: SetUps = futures::stream::iter(pods.iter().map(|pod| async move {
        let r = async {
            if let Some(local) = inject {
                sweep::inject(runner, pod, local).await?;
            }
            sweep::prepare_pod(runner, cfg, pod).await
        }
        .await;
        (pod.clone(), r.map_err(|e| crate::exit::words(&e)))
    }))
    .buffer_unordered(PARALLEL_SET_UPS)
    .collect()
    .await;
    let ok = set_up.values().filter(|r| r.is_ok()).count();
    results::say!(
        "railsweep: {}rails read in {ok} of {} pods ({:.1} s)",
        if inject.is_some() {
            "rdmabw copied in and "
        } else {
            ""
        },
        pods.len(),
        t0.elapsed().as_secs_f64()
    );
    set_up
}

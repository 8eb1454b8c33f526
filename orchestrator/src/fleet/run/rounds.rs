//! Rounds of jobs: each round's pairs at the same time under the round's deadline, their rows
//! and the rounds table written as pairs end.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context, Result};
use futures::stream::StreamExt;
use results::RowSink;
use tokio_util::sync::CancellationToken;

use super::job::Job;
use super::pair::{Fleet, PairEnd};
use crate::fleet::FleetArgs;
use crate::runner::Runner;

/// Runs rounds of jobs, writing rows, the rounds table and problems as pairs end.
pub(super) struct Rounds<'a, 'b, R: Runner> {
    pub(super) fleet: &'a Fleet<'b, R>,
    pub(super) args: &'a FleetArgs,
    pub(super) cancel: &'a CancellationToken,
    pub(super) max_pairs: usize,
    pub(super) tsv: &'a mut std::fs::File,
    pub(super) problems: &'a mut Vec<String>,
}

impl<R: Runner> Rounds<'_, '_, R> {
    /// Each round's pairs at the same time (at most `max_pairs`), under the round's deadline.
    pub(super) async fn run(
        &mut self,
        attempt: &'static str,
        rounds: Vec<Vec<Job>>,
        sink: &mut RowSink,
    ) -> Result<()> {
        let n_rounds = rounds.len();
        for (r, jobs) in rounds.into_iter().enumerate() {
            if self.cancel.is_cancelled() {
                break;
            }
            let deadline = self.args.round_deadline(
                self.fleet.config.base(),
                &jobs.iter().map(|j| j.rails.count()).collect::<Vec<_>>(),
                self.max_pairs,
            );
            let round_cancel = self.cancel.child_token();
            let timer = {
                let t = round_cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(deadline).await;
                    t.cancel();
                })
            };
            results::say!(
                "railsweep: {attempt} round {}/{n_rounds}: {} (deadline {:.0} s)",
                r + 1,
                jobs.iter()
                    .map(|j| format!("{}->{}", j.client, j.server))
                    .collect::<Vec<_>>()
                    .join(", "),
                deadline.as_secs_f64()
            );
            let fleet = self.fleet;
            let mut ends = futures::stream::iter(
                jobs.into_iter()
                    .map(|j| fleet.pair(j, attempt, round_cancel.clone())),
            )
            .buffer_unordered(self.max_pairs);
            while let Some(end) = ends.next().await {
                for row in &end.rows {
                    sink.append(row.clone()).with_context(|| {
                        format!("cannot write to {}", sink.csv_path().display())
                    })?;
                }
                let timed_out = round_cancel.is_cancelled() && !self.cancel.is_cancelled();
                self.ended(attempt, r, &end, timed_out)?;
            }
            timer.abort();
        }
        Ok(())
    }

    /// A pair's end: its problems, its line of rounds.tsv and of the progress.
    fn ended(&mut self, attempt: &str, r: usize, end: &PairEnd, timed_out: bool) -> Result<()> {
        let what = format!("{} -> {}", end.job.client, end.job.server);
        if let Some(e) = &end.error {
            self.problems.push(format!("{what}: {e}"));
        }
        if !end.interrupted.is_empty() {
            self.problems.push(format!(
                "{what}: rail(s) {:?} not measured ({})",
                end.interrupted,
                if timed_out {
                    "round deadline"
                } else {
                    "interrupted"
                }
            ));
        }
        writeln!(
            self.tsv,
            "{attempt}\t{}\t{}\t{}\t{:.3}\t{:.3}\t{}\t{}",
            end.job.round + 1,
            end.job.client,
            end.job.server,
            end.start,
            end.end,
            end.rows.len(),
            end.error
                .as_deref()
                .unwrap_or("")
                .replace(['\t', '\n'], " ")
        )?;
        results::say!(
            "railsweep: {attempt} round {}: {what}: {} row(s), {} .. {}{}",
            r + 1,
            end.rows.len(),
            clock(end.start),
            clock(end.end),
            end.error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        );
        Ok(())
    }
}

/// Put jobs into rounds greedily so that no pod is in two jobs of a round.
pub(super) fn pack(jobs: Vec<Job>) -> Vec<Vec<Job>> {
    let mut rounds: Vec<(BTreeSet<String>, Vec<Job>)> = Vec::new();
    for mut j in jobs {
        let slot = rounds
            .iter()
            .position(|(busy, _)| !busy.contains(&j.client) && !busy.contains(&j.server));
        let i = slot.unwrap_or_else(|| {
            rounds.push((BTreeSet::new(), Vec::new()));
            rounds.len() - 1
        });
        j.round = i;
        rounds[i].0.insert(j.client.clone());
        rounds[i].0.insert(j.server.clone());
        rounds[i].1.push(j);
    }
    rounds.into_iter().map(|(_, j)| j).collect()
}

/// A time of [`super::pair::now_s`] as RFC 3339 UTC with milliseconds.
fn clock(t: f64) -> String {
    let secs = t.floor();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let base = results::rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs as u64));
    format!(
        "{}.{:03}Z",
        base.trim_end_matches('Z'),
        ((t - secs) * 1000.0).floor()
    )
}

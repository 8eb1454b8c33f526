//! A progress bar per rail on stderr; plain log lines instead when stderr is not a terminal.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use results::escape;

/// The bars of one sweep.
#[derive(Debug, Clone)]
pub struct Progress {
    inner: Option<Arc<Bars>>,
}

#[derive(Debug)]
struct Bars {
    multi: MultiProgress,
    bars: Mutex<BTreeMap<u32, (ProgressBar, Option<Instant>)>>,
    measure: Duration,
}

impl Progress {
    /// Bars for `rails`, each `measure` long, shown only when stderr is a terminal (or never,
    /// with `quiet`).
    pub fn new(rails: &[u32], measure: Duration, quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { inner: None };
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("rail {prefix:>3} [{bar:30}] {elapsed:>4} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bars = rails
            .iter()
            .map(|&r| {
                let pb = multi.add(ProgressBar::new(1000));
                pb.set_style(style.clone());
                pb.set_prefix(r.to_string());
                pb.set_message("waiting");
                (r, (pb, None))
            })
            .collect();
        let inner = Arc::new(Bars {
            multi,
            bars: Mutex::new(bars),
            measure,
        });
        // One ticker moves every running bar along the expected test time.
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                let Some(b) = weak.upgrade() else { break };
                let Ok(bars) = b.bars.lock() else { break };
                for (pb, started) in bars.values() {
                    if let Some(t0) = started {
                        let frac = t0.elapsed().as_secs_f64() / b.measure.as_secs_f64().max(0.001);
                        pb.set_position((frac.min(0.99) * 1000.0) as u64);
                    }
                }
            }
        });
        Progress { inner: Some(inner) }
    }

    /// True when bars are drawn (so log lines per rail are not needed).
    pub fn visible(&self) -> bool {
        self.inner.is_some()
    }

    /// The rail's test (attempt) starts.
    pub fn start(&self, rail: u32, what: &str) {
        if let Some(b) = &self.inner {
            if let Ok(mut bars) = b.bars.lock() {
                if let Some((pb, started)) = bars.get_mut(&rail) {
                    pb.reset_elapsed();
                    pb.set_position(0);
                    pb.set_message(escape::log_line(what));
                    *started = Some(Instant::now());
                }
            }
        }
    }

    /// The rail is done, with a one-line result.
    pub fn finish(&self, rail: u32, msg: &str) {
        if let Some(b) = &self.inner {
            if let Ok(mut bars) = b.bars.lock() {
                if let Some((pb, started)) = bars.get_mut(&rail) {
                    *started = None;
                    pb.set_position(1000);
                    pb.finish_with_message(escape::log_line(msg));
                }
            }
        }
    }

    /// Print a line above the bars (or plainly on stderr): one line, whatever text from a pod
    /// it holds ([`escape::log_line`]: no newline or escape sequence of a pod's making forges
    /// a line of railsweep's own).
    pub fn println(&self, line: &str) {
        let line = escape::log_line(line);
        let line = line.as_str();
        match &self.inner {
            Some(b) => {
                let _ = b.multi.println(line);
            }
            None => results::say!("{line}"),
        }
    }

    /// Remove the bars before the final table.
    pub fn clear(&self) {
        if let Some(b) = &self.inner {
            if let Ok(bars) = b.bars.lock() {
                for (pb, _) in bars.values() {
                    pb.finish_and_clear();
                }
            }
            let _ = b.multi.clear();
        }
    }
}

//! The parameters both ends agree on ([`TestParams`], and which of them the command line pinned):
//! sizes, length, queue pairs, directions; a latency test's are ib_write_lat's.

use bench_core::session::Pinned;
use results::rdmabw::flags::{DEFAULT_SIZE_BYTES, LAT_DEFAULT_ITERS};
use results::rdmabw::params::{Connection, Sizes, TestLength, TestParams, MAX_SECONDS};

use crate::cli::{BwArgs, TestArgs};
use crate::exit::{usage, Usage};

/// The top of an `-a` sweep, as ib_write_bw.
pub const SWEEP_MAX_BYTES: u64 = 1 << 23;
/// ib_write_bw's default iteration count.
pub const DEFAULT_ITERS: u64 = 5000;
/// ib_write_lat's default message size.
pub const LAT_DEFAULT_SIZE: u64 = 2;

/// `v` seconds of `flag`, checked: finite, not negative (with `allow_zero`, else positive), at
/// most a week.
pub fn seconds(flag: &str, v: f64, allow_zero: bool) -> Result<f64, Usage> {
    if !v.is_finite() || v < 0.0 || (!allow_zero && v == 0.0) || v > MAX_SECONDS {
        return usage(format!(
            "{flag} {v}: give a {} number of seconds, at most {MAX_SECONDS} (a week) (e.g. \
             {flag} 5)",
            if allow_zero {
                "non-negative"
            } else {
                "positive"
            }
        ));
    }
    Ok(v)
}

/// The timing of a timed test. `--window S` measures S seconds, with the warm-up before and
/// the cool-down after it. `-D S` is ib_write_bw's: S seconds in all, of which the first and
/// the last `-f` seconds (default S/4 in whole seconds, as perftest computes it) are warm-up
/// and cool-down, so that the window, and the `#iterations` of the table, are perftest's.
fn duration_length(
    t: &TestArgs,
    bidirectional: bool,
    margin: Option<f64>,
) -> Result<TestLength, Usage> {
    let (default_warmup, default_cooldown) = results::rdmabw::flags::short_margins(bidirectional);
    // In range already: their value parser is the shared one.
    let (warmup, cooldown) = (t.timing.margins.warmup, t.timing.margins.cooldown);
    if let Some(w) = t.timing.length.window {
        return Ok(TestLength::Duration {
            duration_s: seconds("--window", w, false)?,
            warmup_s: warmup.or(margin).unwrap_or(default_warmup),
            cooldown_s: cooldown.or(margin).unwrap_or(default_cooldown),
        });
    }
    let total = seconds(
        "-D/--duration",
        t.timing.length.duration.unwrap_or_default(),
        false,
    )?;
    let timing = results::rdmabw::flags::whole_test(
        total,
        margin,
        &t.timing.margins,
        (default_warmup, default_cooldown),
    )
    .map_err(Usage)?;
    Ok(TestLength::Duration {
        duration_s: timing.measured_s,
        warmup_s: timing.warmup_s,
        cooldown_s: timing.cooldown_s,
    })
}

/// The parameters of a bandwidth test (`bw`: its own flags) and which the flags pinned.
pub fn test_params(t: &TestArgs, bw: &BwArgs) -> Result<(TestParams, Pinned), Usage> {
    let mut pinned = Pinned::default();
    let sizes = match (t.shape.message.size, t.shape.all) {
        (Some(_), true) => {
            return usage(
                "-s/--size and -a/--all conflict: -a sweeps 2 B .. 8 MiB, -s runs one size",
            )
        }
        (None, true) => {
            pinned.sizes = true;
            Sizes::Sweep {
                max_bytes: SWEEP_MAX_BYTES,
            }
        }
        // In range already (1 byte to 1 GiB): -s's value parser is the shared one.
        (Some(n), false) => {
            pinned.sizes = true;
            Sizes::One { msg_size_bytes: n }
        }
        (None, false) => Sizes::One {
            msg_size_bytes: DEFAULT_SIZE_BYTES,
        },
    };
    let timing = &t.timing;
    let margin = timing
        .length
        .margin
        .map(|m| seconds("-f/--margin", m, true))
        .transpose()?;
    if bw.shape.run_infinitely {
        return endless_params(t, bw, sizes, margin, pinned);
    }
    let length = match (timing.iters, timing.length.duration.or(timing.length.window)) {
        (Some(_), Some(_)) => {
            return usage(
                "-n/--iters and -D/--duration (or --window) conflict: give a count of writes or seconds",
            )
        }
        (Some(0), None) => return usage("-n/--iters 0: give at least 1 (e.g. -n 5000)"),
        (Some(n), None) => {
            pinned.length = true;
            TestLength::Iterations { iterations: n }
        }
        (None, Some(_)) => {
            pinned.length = true;
            duration_length(t, bw.shape.shape.bidirectional, margin)?
        }
        (None, None) => {
            if timing.margins.warmup.is_some()
                || timing.margins.cooldown.is_some()
                || timing.length.margin.is_some()
            {
                return usage(
                    "--warmup/--cooldown/-f apply to timed tests: add -D SECONDS or --window SECONDS",
                );
            }
            TestLength::Iterations {
                iterations: DEFAULT_ITERS,
            }
        }
    };
    finish_params(t, bw, sizes, length, pinned)
}

/// `--run_infinitely`: one size, one direction, -D or --window SECONDS the interval, a warm-up
/// before the first window and no cool-down (the windows follow each other).
fn endless_params(
    t: &TestArgs,
    bw: &BwArgs,
    sizes: Sizes,
    margin: Option<f64>,
    mut pinned: Pinned,
) -> Result<(TestParams, Pinned), Usage> {
    let example = "e.g. rdmabw --run_infinitely -D 5 HOST";
    if t.shape.all {
        return usage(format!(
            "--run_infinitely repeats one size: give -s BYTES (or leave it out for 65536), not \
             -a ({example})"
        ));
    }
    if bw.shape.shape.bidirectional {
        return usage(format!(
            "--run_infinitely measures one direction: leave out -b ({example})"
        ));
    }
    if bw.shape.shape.data_validation {
        return usage(
            "--data_validation checks the bytes when the test ends, and a --run_infinitely test \
             does not end: run --data_validation tests of their own (-D SECONDS)",
        );
    }
    if t.timing.iters.is_some() {
        return usage(format!(
            "-n/--iters and --run_infinitely conflict: --run_infinitely repeats a timed window; \
             give -D SECONDS, the reporting interval ({example})"
        ));
    }
    if t.timing.margins.cooldown.is_some() {
        return usage(
            "--cooldown does not apply to --run_infinitely: its windows follow each other, and \
             SIGINT ends the last one",
        );
    }
    let interval = match (t.timing.length.duration, t.timing.length.window) {
        (Some(d), None) => seconds("-D/--duration", d, false)?,
        (None, Some(w)) => seconds("--window", w, false)?,
        _ => {
            return usage(format!(
                "--run_infinitely needs -D SECONDS: a row is printed every -D seconds, as in \
                 ib_write_bw ({example})"
            ))
        }
    };
    let warmup = t.timing.margins.warmup.or(margin).unwrap_or(0.05);
    pinned.length = true;
    let length = TestLength::Duration {
        duration_s: interval,
        warmup_s: warmup,
        cooldown_s: 0.0,
    };
    finish_params(t, bw, sizes, length, pinned)
}

/// The parameters both sides agree on, from the sizes and the length.
fn finish_params(
    t: &TestArgs,
    bw: &BwArgs,
    sizes: Sizes,
    length: TestLength,
    mut pinned: Pinned,
) -> Result<(TestParams, Pinned), Usage> {
    if let Some(c) = &t.shape.connection {
        if !c.eq_ignore_ascii_case("rc") {
            return usage(format!(
                "-c/--connection {c}: rdmabw runs RC queue pairs only (use -c RC or leave it out)"
            ));
        }
    }
    let shape = &bw.shape.shape;
    pinned.qps = shape.qp.is_some();
    pinned.bidirectional = shape.bidirectional;
    pinned.run_infinitely = bw.shape.run_infinitely;
    pinned.data_validation = shape.data_validation;
    pinned.traffic_class = t.transport.path.tclass.is_some();
    pinned.service_level = t.transport.path.sl.is_some();
    pinned.hop_limit = t.transport.hop_limit.is_some();
    pinned.mtu = t.transport.path.mtu.is_some();
    Ok((
        TestParams {
            sizes,
            length,
            // At least 1 already: -q's value parser is the shared one.
            qps: shape.qp.unwrap_or(1),
            connection: Connection::RC,
            bidirectional: shape.bidirectional,
            run_infinitely: bw.shape.run_infinitely,
            data_validation: shape.data_validation,
            latency: false,
        },
        pinned,
    ))
}

/// The parameters of a latency test (`rdmabw lat`): a bandwidth test's of the same flags, with
/// ib_write_lat's defaults where none was given. A ping-pong is one QP in one direction: the
/// flags that would say otherwise are no flags of `rdmabw lat`.
pub fn lat_params(t: &TestArgs) -> Result<(TestParams, Pinned), Usage> {
    let (mut params, mut pinned) = test_params(t, &BwArgs::default())?;
    params.qps = 1;
    pinned.qps = true;
    if !pinned.sizes {
        params.sizes = Sizes::One {
            msg_size_bytes: LAT_DEFAULT_SIZE,
        };
    }
    if !pinned.length {
        params.length = TestLength::Iterations {
            iterations: LAT_DEFAULT_ITERS,
        }
    }
    params.latency = true;
    // The one rule of a latency test, which a server applies to a latency hello too.
    params.check_latency().map_err(|e| Usage(e.to_string()))?;
    // What was not given is the client's to choose, as for bandwidth: a server started with
    // the defaults runs the client's -s and -n.
    Ok((params, pinned))
}

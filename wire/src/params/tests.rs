use super::*;

#[test]
fn rate_limits_convert_as_ib_write_bw_counts_them() {
    let r = |rate, unit| RateLimit {
        rate,
        unit,
        burst_msgs: 128,
    };
    // 1 Gb/s of 64 KiB writes: 10^9 / 8 / 65536 = 1907.35 writes/s.
    let g = r(1.0, RateUnit::Gbps);
    assert!((g.msgs_per_s(65536) - 1_907.348_632_8).abs() < 1e-6);
    assert!((g.gbps(65536) - 1.0).abs() < 1e-12);
    // 100 MiB/s of 1 MiB writes: 100 writes/s, 0.8388608 Gb/s.
    let m = r(100.0, RateUnit::MibPerS);
    assert!((m.msgs_per_s(1 << 20) - 100.0).abs() < 1e-9);
    assert!((m.gbps(1 << 20) - 0.838_860_8).abs() < 1e-12);
    // Packets per second do not depend on the size.
    let p = r(5000.0, RateUnit::MsgsPerS);
    assert_eq!(p.msgs_per_s(4096), 5000.0);
    assert!((p.gbps(4096) - 5000.0 * 4096.0 * 8.0 / 1e9).abs() < 1e-12);
}

#[test]
fn the_new_modes_are_compared_and_absent_from_older_peers() {
    let a = TestParams::write_bw(
        Sizes::One {
            msg_size_bytes: 65536,
        },
        TestLength::Iterations { iterations: 10 },
        1,
    );
    // An older peer's JSON has neither field: both read as off, and off is not written.
    let json = serde_json::to_string(&a).unwrap_or_default();
    assert!(!json.contains("run_infinitely") && !json.contains("data_validation"));
    let back: TestParams = serde_json::from_str(&json).unwrap_or_else(|_| a.clone());
    assert_eq!(back, a);
    let b = TestParams {
        data_validation: true,
        ..a.clone()
    };
    let m = a.check_matches(&b).err().map(|m| m.param);
    assert_eq!(m, Some("--data_validation"));
    let c = TestParams {
        run_infinitely: true,
        ..a.clone()
    };
    assert_eq!(
        a.check_matches(&c).err().map(|m| m.param),
        Some("--run_infinitely")
    );
}

#[test]
fn a_sweep_to_the_top_of_u64_ends_at_2_pow_63() {
    // Before: the doubling wrapped to 0 past 2^63 and the list grew without end.
    let l = Sizes::Sweep {
        max_bytes: u64::MAX,
    }
    .list();
    assert_eq!(l.len(), 63);
    assert_eq!(l.last(), Some(&(1u64 << 63)));
    assert_eq!(Sizes::Sweep { max_bytes: 1 << 63 }.list().len(), 63);
    assert_eq!(Sizes::Sweep { max_bytes: 1 }.list(), Vec::<u64>::new());
    assert_eq!(Sizes::Sweep { max_bytes: 8 }.list(), vec![2, 4, 8]);
}

#[test]
fn bounds_refuse_what_the_command_line_refuses() {
    let ok = TestParams::write_bw(
        Sizes::Sweep { max_bytes: 1 << 23 },
        TestLength::Duration {
            duration_s: 5.0,
            warmup_s: 0.0,
            cooldown_s: 0.5,
        },
        4,
    );
    assert_eq!(ok.check_bounds(), Ok(()));
    let with = |f: &dyn Fn(&mut TestParams)| {
        let mut p = ok.clone();
        f(&mut p);
        p
    };
    let dur = |d: f64, w: f64, c: f64| TestLength::Duration {
        duration_s: d,
        warmup_s: w,
        cooldown_s: c,
    };
    let sweep = "--all/-a (the sweep's largest size)";
    let cases: Vec<(TestParams, &str)> = vec![
        (
            with(&|p| {
                p.sizes = Sizes::Sweep {
                    max_bytes: u64::MAX,
                }
            }),
            sweep,
        ),
        (with(&|p| p.sizes = Sizes::Sweep { max_bytes: 1 }), sweep),
        (
            with(&|p| p.sizes = Sizes::One { msg_size_bytes: 0 }),
            "--size/-s",
        ),
        (
            with(&|p| {
                p.sizes = Sizes::One {
                    msg_size_bytes: (1 << 63) + 1,
                }
            }),
            "--size/-s",
        ),
        (
            with(&|p| {
                p.sizes = Sizes::One {
                    msg_size_bytes: MAX_MSG_BYTES + 1,
                }
            }),
            "--size/-s",
        ),
        (with(&|p| p.qps = 0), "--qp/-q"),
        (
            with(&|p| p.length = TestLength::Iterations { iterations: 0 }),
            "--iters/-n",
        ),
        (with(&|p| p.length = dur(-1.0, 0.0, 0.0)), "--duration/-D"),
        (with(&|p| p.length = dur(0.0, 0.0, 0.0)), "--duration/-D"),
        (
            with(&|p| p.length = dur(f64::NAN, 0.0, 0.0)),
            "--duration/-D",
        ),
        (with(&|p| p.length = dur(1e300, 0.0, 0.0)), "--duration/-D"),
        (with(&|p| p.length = dur(1.0, -0.5, 0.0)), "--warmup"),
        (
            with(&|p| p.length = dur(1.0, f64::INFINITY, 0.0)),
            "--warmup",
        ),
        (with(&|p| p.length = dur(1.0, 0.0, f64::NAN)), "--cooldown"),
    ];
    for (i, (p, param)) in cases.into_iter().enumerate() {
        assert_eq!(
            p.check_bounds().map_err(|e| e.param),
            Err(param),
            "case {i}"
        );
    }
    let edge = with(&|p| {
        p.sizes = Sizes::One {
            msg_size_bytes: MAX_MSG_BYTES,
        }
    });
    assert_eq!(edge.check_bounds(), Ok(()));
    let week = with(&|p| p.length = dur(MAX_SECONDS, 0.0, 0.0));
    assert_eq!(week.check_bounds(), Ok(()));
}

#[test]
fn the_latency_rule_refuses_what_rdmabw_lat_refuses_and_names_the_flag() {
    let lat = |f: &dyn Fn(&mut TestParams)| {
        let mut p = TestParams::write_lat(
            Sizes::One { msg_size_bytes: 2 },
            TestLength::Iterations { iterations: 1000 },
        );
        f(&mut p);
        p
    };
    let timed = TestLength::Duration {
        duration_s: MAX_SECONDS,
        warmup_s: 0.0,
        cooldown_s: 0.0,
    };
    assert_eq!(lat(&|_| {}).check_latency(), Ok(()));
    let n = |iterations| TestLength::Iterations { iterations };
    assert_eq!(lat(&|p| p.length = n(u64::MAX)).check_latency(), Ok(()));
    assert_eq!(lat(&|p| p.length = n(5)).check_latency(), Ok(()));
    assert_eq!(lat(&|p| p.length = timed).check_latency(), Ok(()));
    let sweep = Sizes::Sweep { max_bytes: 1 << 23 };
    assert_eq!(lat(&|p| p.sizes = sweep.clone()).check_latency(), Ok(()));
    let cases: Vec<(TestParams, &str)> = vec![
        (lat(&|p| p.qps = 64), "-q 64: a latency test runs one QP"),
        (lat(&|p| p.qps = 0), "-q 0"),
        (lat(&|p| p.bidirectional = true), "-b/--bidirectional"),
        (lat(&|p| p.run_infinitely = true), "--run_infinitely"),
        (lat(&|p| p.data_validation = true), "--data_validation"),
        (
            lat(&|p| p.length = n(1)),
            "-n/--iters 1: a latency test runs at least 5",
        ),
        (lat(&|p| p.length = n(4)), "-n/--iters 4"),
        (
            lat(&|p| {
                p.sizes = sweep.clone();
                p.length = timed;
            }),
            "-a with -D",
        ),
    ];
    for (p, words) in cases {
        let e = p
            .check_latency()
            .map(|()| String::new())
            .unwrap_or_else(|e| e.to_string());
        assert!(e.contains(words), "{words}: {e}");
    }
}

#[test]
fn cpu_per_gb_is_cpu_seconds_over_gigabytes() {
    // 2 s of CPU while 4 * 10^9 bytes went out: 0.5 s/GB.
    assert_eq!(cpu_s_per_gb(2.0, 4e9), Some(0.5));
    // Nothing measured: no ratio rather than 0 or infinity.
    assert_eq!(cpu_s_per_gb(0.0, 4e9), None);
    assert_eq!(cpu_s_per_gb(1.0, 0.0), None);
    assert_eq!(cpu_s_per_gb(f64::NAN, 1.0), None);
}

#[test]
fn poll_modes_read_and_print_their_names() {
    for m in [PollMode::Spin, PollMode::Adaptive, PollMode::Event] {
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, format!("\"{}\"", m.as_str()));
        let back: PollMode = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
    }
}

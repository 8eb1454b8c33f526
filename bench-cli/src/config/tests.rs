//! How the command line resolves, and what it refuses, naming the flag.
#![allow(clippy::unwrap_used)]

use super::*;
use bench_core::session::ServerLimits;
use clap::Parser;
use results::rdmabw::params::{PollMode, RateLimit, RateUnit, Sizes, TestLength, TestParams};

fn cfg(args: &[&str]) -> Result<Config, Usage> {
    cfg_with(args, None, "")
}

/// `args` resolved with `env` as RDMABW_SECRET and `stdin` as standard input.
fn cfg_with(args: &[&str], env: Option<&str>, stdin: &str) -> Result<Config, Usage> {
    let mut v = vec!["rdmabw"];
    v.extend_from_slice(args);
    let mut line = || Ok(stdin.lines().next().unwrap_or_default().to_string());
    let mut secrets = SecretInput {
        env: env.map(str::to_string),
        stdin_line: &mut line,
    };
    resolve(Cli::try_parse_from(v).unwrap(), &mut secrets)
}

#[test]
fn the_secret_comes_from_stdin_or_the_environment_and_limits_name_their_flag() {
    let secret = |c: Config| match c {
        Config::Client(c, _) => c.secret,
        Config::Server { cfg, .. } => cfg.secret,
        other => panic!("{other:?}"),
    };
    let s32 = "0123456789abcdef0123456789abcdef";
    let want = RunSecret::new(s32);
    let got = secret(
        cfg_with(
            &["--secret-stdin", "10.0.0.9"],
            None,
            &format!("{s32}\nrest"),
        )
        .unwrap(),
    );
    assert_eq!(got, want);
    let got = secret(cfg_with(&["server", "--daemon"], Some(s32), "").unwrap());
    assert_eq!(got, want);
    // The flag wins over the environment; neither: no secret.
    let got = secret(cfg_with(&["--secret-stdin", "10.0.0.9"], Some("env"), s32).unwrap());
    assert_eq!(got, want);
    assert_eq!(secret(cfg(&["10.0.0.9"]).unwrap()), None);
    let e = cfg_with(&["--secret-stdin", "10.0.0.9"], None, "").unwrap_err();
    assert!(e.0.starts_with("--secret-stdin: the first line"), "{e}");
    let e = cfg_with(&["10.0.0.9"], Some("two words"), "").unwrap_err();
    assert!(
        e.0.starts_with("RDMABW_SECRET is not a usable secret"),
        "{e}"
    );

    match cfg(&[
        "server",
        "--daemon",
        "--max-qps",
        "8",
        "--max-buffer",
        "64M",
    ])
    .unwrap()
    {
        Config::Server { cfg, .. } => {
            assert_eq!(cfg.limits.max_qps, 8);
            assert_eq!(cfg.limits.max_buffer_bytes, 64 << 20);
            assert_eq!(cfg.limits.max_tests, ServerLimits::DEFAULT.max_tests);
        }
        other => panic!("{other:?}"),
    }
    let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
    assert!(e(&["server", "--max-buffer", "lots"]).starts_with("--max-buffer lots: "));
    assert!(e(&["server", "--max-tests", "0"]).starts_with("--max-tests 0: "));
    assert!(e(&["server", "-q", "16", "--max-qps", "8"]).contains("raise --max-qps"));
    // A batch's secret is the first line of its input: the caller reads it there.
    assert!(matches!(
        cfg_with(&["batch", "--secret-stdin"], Some("x"), "s").unwrap(),
        Config::Batch {
            secret: None,
            secret_first: true
        }
    ));
}

/// Issue 53, finding 3: a secret of fewer than 128 bits (32 hex digits) is refused wherever
/// rdmabw is given one, naming the rule; railsweep's (16 random bytes as 32 hex digits)
/// pass it.
#[test]
fn a_secret_shorter_than_128_bits_is_refused_naming_the_rule() {
    let s31 = "0123456789abcdef0123456789abcde";
    for (args, env, stdin, from) in [
        (
            &["server", "--daemon"][..],
            Some("abc123"),
            "",
            "RDMABW_SECRET",
        ),
        (&["server", "--daemon"][..], Some(s31), "", "RDMABW_SECRET"),
        (
            &["server", "--daemon", "--secret-stdin"][..],
            None,
            "0123456789abcdef",
            "--secret-stdin",
        ),
        (
            &["10.0.0.9", "--secret-stdin"][..],
            None,
            s31,
            "--secret-stdin",
        ),
    ] {
        let e = cfg_with(args, env, stdin).unwrap_err().0;
        assert!(e.starts_with(from), "{args:?}: {e}");
        assert!(
            e.contains("fewer than 32")
                && e.contains("128 bits")
                && e.contains("openssl rand -hex 16"),
            "{args:?}: {e}"
        );
    }
    let railsweeps = results::rdmabw::secret::RunSecret::from_bytes(&[0xa5; 16]).unwrap();
    assert!(cfg_with(&["server", "--daemon"], Some(railsweeps.expose()), "").is_ok());
}

/// Issue 53, finding 3: a daemon without a secret on an address other hosts can reach is
/// warned about, with how to give one; on loopback, or with a secret, it is not.
#[test]
fn an_open_daemon_on_a_reachable_address_is_warned_about() {
    let a = |s: &str| -> std::net::SocketAddr { s.parse().unwrap() };
    let w = open_daemon_warning(true, false, &[a("0.0.0.0:18515")]).expect("a warning");
    assert!(
        w.contains("--daemon without a secret")
            && w.contains("0.0.0.0:18515")
            && w.contains("--secret-stdin")
            && w.contains("RDMABW_SECRET"),
        "{w}"
    );
    let w = open_daemon_warning(true, false, &[a("127.0.0.1:1"), a("10.224.0.2:1")]);
    assert!(w.is_some_and(|w| w.contains("10.224.0.2:1") && !w.contains("127.0.0.1:1")));
    assert!(open_daemon_warning(true, false, &[a("[::]:1")]).is_some());
    assert_eq!(
        open_daemon_warning(true, false, &[a("127.0.0.1:1"), a("[::1]:1")]),
        None
    );
    assert_eq!(open_daemon_warning(true, true, &[a("0.0.0.0:1")]), None);
    assert_eq!(open_daemon_warning(false, false, &[a("0.0.0.0:1")]), None);
}

#[test]
fn bare_form_is_server_without_host_and_client_with_one() {
    assert!(matches!(
        cfg(&["-d", "mlx5_0"]).unwrap(),
        Config::Server { .. }
    ));
    match cfg(&["-d", "mlx5_0", "-D", "5", "10.0.0.2"]).unwrap() {
        Config::Client(c, _) => {
            assert_eq!(c.server, "10.0.0.2");
            assert_eq!(c.rail.device.as_deref(), Some("mlx5_0"));
            assert!(
                matches!(c.params.length, TestLength::Duration { duration_s, .. } if duration_s == 3.0)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        cfg(&["client", "10.0.0.9"]).unwrap(),
        Config::Client(..)
    ));
    assert!(matches!(
        cfg(&["devices"]).unwrap(),
        Config::Devices {
            json: false,
            root: None
        }
    ));
}

#[test]
fn bad_values_name_the_flag() {
    let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
    // The ranges of the values are their parsers' (cli's tests); what is left is how the
    // flags combine. Issue 33: a server's limits given to a client were taken and ignored; in
    // the bare form (a client with HOST) they are refused by name.
    for flag in [
        &["--daemon"][..],
        &["--exit-on-stdin-eof"],
        &["--max-qps", "8"],
        &["--max-buffer", "2G"],
        &["--max-tests", "4"],
        &["--bind", "10.0.0.1"],
    ] {
        let mut args = flag.to_vec();
        args.push("10.0.0.9");
        assert!(
            e(&args).starts_with(&format!("{} is a server flag", flag[0])),
            "{flag:?}: {}",
            e(&args)
        );
    }
    assert!(e(&["-n", "5", "-D", "2", "10.0.0.9"]).contains("conflict"));
    assert!(e(&["--use_cuda", "x", "10.0.0.9"]).contains("give a CUDA GPU index"));
    assert!(e(&["--cuda-mem", "peermem", "10.0.0.9"]).contains("add --use_cuda"));
    // Without a CUDA driver (CI), --use_cuda fails before any work, naming the flag.
    if let Err(u) = cfg(&["--use_cuda", "0", "10.0.0.9"]) {
        assert!(u.to_string().starts_with("--use_cuda 0: "), "{u}");
    }
    assert!(e(&["--server-netdev", "net1"]).contains("client flag"));
    assert!(e(&["--server-gid-index", "1"]).starts_with("--server-gid-index is a client flag"));
    assert!(e(&["lat", "--server-dev", "d"]).starts_with("--server-dev is a client flag"));
    assert!(e(&["lat", "--daemon", "10.0.0.9"]).starts_with("--daemon is a server flag"));
    assert!(e(&["server", "--exit-on-stdin-eof"]).contains("add --daemon"));
    assert!(e(&["--json", "--csv", "10.0.0.9"]).contains("conflict"));
}

/// The flags of one role are no flags of the other's command, and not in its help: a
/// server's limits and daemon flags in `rdmabw client`, the server's rail in `rdmabw server`
/// (cli's tests: clap refuses them, exit 2).
#[test]
fn each_roles_help_lists_only_its_flags() {
    use clap::CommandFactory;
    let help = |role: &str| {
        let mut cli = crate::cli::Cli::command();
        let sub = cli.find_subcommand_mut(role).expect("subcommand");
        [
            sub.render_help().to_string(),
            sub.render_long_help().to_string(),
        ]
    };
    // The flags of the options' own lines (not of the descriptions or the examples).
    let listed = |help: &str, flag: &str| {
        help.lines()
            .filter(|l| (2..=6).contains(&(l.len() - l.trim_start().len())))
            .filter(|l| l.trim_start().starts_with('-'))
            .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == ','))
            .any(|w| w == flag)
    };
    let server_only = [
        "--daemon",
        "--exit-on-stdin-eof",
        "--bind",
        "--max-qps",
        "--max-buffer",
        "--max-tests",
    ];
    for h in help("client") {
        for flag in server_only {
            assert!(!listed(&h, flag), "client help lists {flag}:\n{h}");
        }
        assert!(
            listed(&h, "--server-netdev") && listed(&h, "--tclass"),
            "{h}"
        );
    }
    let client_only = ["--server-dev", "--server-netdev", "--server-gid-index"];
    for h in help("server") {
        for flag in client_only {
            assert!(!listed(&h, flag), "server help lists {flag}:\n{h}");
        }
        assert!(listed(&h, "--max-qps") && listed(&h, "--tclass"), "{h}");
    }
}

/// `-h` is a summary, one line per flag; `--help` has the whole text.
#[test]
fn minus_h_is_one_line_per_flag_and_help_the_whole_text() {
    use clap::CommandFactory;
    for role in ["client", "server"] {
        let mut cli = crate::cli::Cli::command();
        let sub = cli.find_subcommand_mut(role).expect("subcommand");
        let short = sub.render_help().to_string();
        let long = sub.render_long_help().to_string();
        // A flag's line, and nothing under it but the next flag, a heading or a blank line.
        let wrapped: Vec<&str> = short
            .lines()
            .skip_while(|l| !l.ends_with(':') || l.starts_with(' '))
            .filter(|l| l.starts_with("    ") && !l.trim_start().starts_with('-'))
            .collect();
        assert!(wrapped.is_empty(), "{role} -h wraps {wrapped:?}:\n{short}");
        let lines = short.lines().count();
        assert!(lines < 85, "{role} -h: {lines} lines:\n{short}");
        assert!(
            short.trim_end().ends_with(crate::cli::SHORT_EXAMPLES),
            "{short}"
        );
        for text in [
            "busy-polls through the measured window",
            "Fail a CI job below 90%",
        ] {
            assert!(!short.contains(text), "{role} -h: {text}");
            assert!(long.contains(text), "{role} --help lacks {text}:\n{long}");
        }
    }
}

#[test]
fn run_infinitely_repeats_a_window_of_minus_d() {
    let c = |a: &[&str]| match cfg(a).unwrap() {
        Config::Client(c, _) => c,
        other => panic!("{other:?}"),
    };
    let p = c(&["--run_infinitely", "-D", "2", "10.0.0.2"]).params;
    assert!(p.run_infinitely);
    // -D is the reporting interval: all of it is measured, after a short warm-up.
    assert_eq!(
        p.length,
        TestLength::Duration {
            duration_s: 2.0,
            warmup_s: 0.05,
            cooldown_s: 0.0
        }
    );
    let p = c(&["--run_infinitely", "--window", "1", "-f", "1", "10.0.0.2"]).params;
    assert_eq!(
        p.length,
        TestLength::Duration {
            duration_s: 1.0,
            warmup_s: 1.0,
            cooldown_s: 0.0
        }
    );
    let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
    assert!(e(&["--run_infinitely", "10.0.0.2"]).starts_with("--run_infinitely needs -D"));
    assert!(e(&["--run_infinitely", "-n", "5", "10.0.0.2"]).contains("-n/--iters"));
    assert!(e(&["--run_infinitely", "-D", "2", "-a", "10.0.0.2"]).contains("not -a"));
    assert!(e(&["--run_infinitely", "-D", "2", "-b", "10.0.0.2"]).contains("leave out -b"));
    assert!(
        e(&["--run_infinitely", "-D", "2", "--data_validation", "h"])
            .starts_with("--data_validation")
    );
    assert!(e(&["--run_infinitely", "-D", "2", "--min-gbps", "5", "h"])
        .starts_with("--min-gbps judges"));
    assert!(e(&["--run_infinitely", "-D", "0", "h"]).starts_with("-D/--duration 0"));
    // The server pins it when given, and follows the client when not.
    match cfg(&["server", "--run_infinitely", "-D", "2"]).unwrap() {
        Config::Server { cfg, .. } => {
            assert!(cfg.pinned.run_infinitely && cfg.params.run_infinitely);
        }
        other => panic!("{other:?}"),
    }
    match cfg(&["server"]).unwrap() {
        Config::Server { cfg, .. } => assert!(!cfg.pinned.run_infinitely),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rate_limits_resolve_as_ib_write_bw_and_nonsense_names_the_flag() {
    let rl = |a: &[&str]| match cfg(a).unwrap() {
        Config::Client(c, _) => c.tuning.rate_limit,
        other => panic!("{other:?}"),
    };
    assert_eq!(rl(&["10.0.0.2"]), None);
    // Gb/s by default, bursts of the send queue depth.
    assert_eq!(
        rl(&["--rate_limit", "2.5", "-t", "64", "10.0.0.2"]),
        Some(RateLimit {
            rate: 2.5,
            unit: RateUnit::Gbps,
            burst_msgs: 64
        })
    );
    assert_eq!(
        rl(&[
            "--rate_limit=300",
            "--rate_units=M",
            "--burst_size=8",
            "--rate_limit_type=SW",
            "10.0.0.2"
        ]),
        Some(RateLimit {
            rate: 300.0,
            unit: RateUnit::MibPerS,
            burst_msgs: 8
        })
    );
    assert_eq!(
        rl(&["--rate_limit", "1000", "--rate_units", "p", "10.0.0.2"]).map(|r| r.unit),
        Some(RateUnit::MsgsPerS)
    );
    let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
    assert!(e(&["--rate_limit", "0", "h"]).starts_with("--rate_limit 0: give a positive"));
    assert!(e(&["--rate_limit", "-3", "h"]).starts_with("--rate_limit -3: give a positive"));
    assert!(e(&["--rate_limit=-3", "h"]).starts_with("--rate_limit -3: "));
    assert!(e(&["--rate_limit", "1", "--burst_size", "0", "h"]).starts_with("--burst_size 0"));
    assert!(e(&["--rate_limit", "1", "--burst_size", "-2", "h"]).starts_with("--burst_size -2"));
    assert!(e(&["--rate_limit", "1", "--rate_units", "k", "h"]).starts_with("--rate_units k"));
    assert!(e(&["--rate_limit", "1", "--rate_limit_type", "HW", "h"])
        .starts_with("--rate_limit_type HW: not supported by rdmabw"));
    assert!(e(&["--rate_limit", "1", "--rate_limit_type", "PP", "h"]).contains("(PP)"));
    assert!(e(&["--burst_size", "4", "h"]).starts_with("--burst_size applies"));
    assert!(e(&["--rate_units", "M", "h"]).contains("add --rate_limit"));
}

#[test]
fn data_validation_is_agreed_and_sizes_the_buffer() {
    let p = match cfg(&["--data_validation", "-a", "-q", "2", "10.0.0.2"]).unwrap() {
        Config::Client(c, _) => c.params,
        other => panic!("{other:?}"),
    };
    assert!(p.data_validation);
    // A 16 MiB slot (every size of the sweep) per QP, in both halves, plus 1 MiB.
    assert_eq!(memlock_needed_bytes(&p), 2 * 2 * (16 << 20) + (1 << 20));
    let plain = TestParams {
        data_validation: false,
        latency: false,
        ..p
    };
    assert_eq!(memlock_needed_bytes(&plain), 2 * (8 << 20) + (1 << 20));
    match cfg(&["server", "--data_validation"]).unwrap() {
        Config::Server { cfg, .. } => assert!(cfg.pinned.data_validation),
        other => panic!("{other:?}"),
    }
}

#[test]
fn only_given_server_flags_are_pinned() {
    match cfg(&["server", "-q", "2", "--tclass", "41"]).unwrap() {
        Config::Server { cfg, .. } => {
            assert!(cfg.pinned.qps && cfg.pinned.traffic_class);
            assert!(!cfg.pinned.sizes && !cfg.pinned.length && !cfg.pinned.mtu);
            assert_eq!(cfg.tuning.traffic_class, 41);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn cq_moderation_defaults_as_ib_write_bw() {
    let q = |a: &[&str]| match cfg(a).unwrap() {
        Config::Client(c, _) => c.tuning.cq_mod,
        other => panic!("{other:?}"),
    };
    assert_eq!(q(&["-s", "65536", "10.0.0.2"]), 1);
    assert_eq!(q(&["-s", "8192", "10.0.0.2"]), 100);
    assert_eq!(q(&["-a", "10.0.0.2"]), 100);
    assert_eq!(q(&["-s", "65536", "-l", "8", "10.0.0.2"]), 8);
    assert_eq!(q(&["-s", "65536", "-Q", "50", "10.0.0.2"]), 50);
}

#[test]
fn use_event_waits_on_events_with_moderation() {
    let t = |a: &[&str]| match cfg(a).unwrap() {
        Config::Client(c, _) => c.tuning,
        Config::Server { cfg, .. } => cfg.tuning,
        other => panic!("{other:?}"),
    };
    assert_eq!(t(&["10.0.0.2"]).poll, PollMode::Spin);
    // -e, its long spelling and --poll event say the same, on either side.
    for a in [
        &["-e", "10.0.0.2"][..],
        &["--use_event", "10.0.0.2"],
        &["--poll", "event", "10.0.0.2"],
        &["server", "-e"],
        &["server", "-b", "-e"],
    ] {
        assert_eq!(t(a).poll, PollMode::Event, "{a:?}");
    }
    // Each event stands for half the send queue at least, unless -Q is given.
    assert_eq!(t(&["-e", "-s", "65536", "10.0.0.2"]).cq_mod, 64);
    assert_eq!(t(&["-e", "-t", "512", "10.0.0.2"]).cq_mod, 256);
    assert_eq!(t(&["-e", "-s", "64", "10.0.0.2"]).cq_mod, 100);
    assert_eq!(t(&["-e", "-t", "1", "10.0.0.2"]).cq_mod, 1);
    assert_eq!(t(&["-e", "-Q", "4", "10.0.0.2"]).cq_mod, 4);
    // -e and another --poll mode contradict each other.
    let mut v = vec!["rdmabw", "-e", "--poll", "adaptive", "10.0.0.2"];
    assert!(Cli::try_parse_from(&v).is_err());
    v[3] = "spin";
    assert!(Cli::try_parse_from(&v).is_err());
}

#[test]
fn limit_bw_is_in_the_tables_unit() {
    let min = |a: &[&str]| match cfg(a).unwrap() {
        Config::Client(_, out) => out.min_gbps,
        other => panic!("{other:?}"),
    };
    assert_eq!(min(&["-w", "90", "--report_gbits", "10.0.0.2"]), Some(90.0));
    // 11000 MB/sec of 2^20 bytes is 92.27 Gb/s.
    let g = min(&["-w", "11000", "10.0.0.2"]).unwrap();
    assert!((g - 92.274_688).abs() < 1e-6, "{g}");
    assert!(cfg(&["-w=-1", "10.0.0.2"]).is_err());
    match cfg(&["--out_json", "10.0.0.2"]).unwrap() {
        Config::Client(_, out) => {
            assert_eq!(out.json_file, Some("perftest_out.json".into()));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn perftests_output_flags_resolve() {
    let out = |a: &[&str]| match cfg(a).unwrap() {
        Config::Client(_, out) => out,
        other => panic!("{other:?}"),
    };
    let o = out(&[
        "-y",
        "0.18",
        "--cpu_util",
        "--output=message_rate",
        "10.0.0.2",
    ]);
    assert_eq!(o.min_mpps, Some(0.18));
    assert!(o.cpu_util);
    assert_eq!(o.figure, Some(crate::cli::FigureArg::MessageRate));
    assert!(out(&["-b", "--report-both", "10.0.0.2"]).report_both);
    let e = cfg(&["--report-both", "10.0.0.2"]).unwrap_err().0;
    assert!(e.contains("add -b"), "{e}");
}

#[test]
fn duration_margins_default_by_direction_and_give_way_to_flags() {
    let len = |a: &[&str]| match cfg(a).unwrap() {
        Config::Client(c, _) => c.params.length,
        other => panic!("{other:?}"),
    };
    let d = |m: f64, w: f64, c: f64| TestLength::Duration {
        duration_s: m,
        warmup_s: w,
        cooldown_s: c,
    };
    // --window: the measured seconds, the margins outside.
    assert_eq!(len(&["--window", "3", "10.0.0.2"]), d(3.0, 0.05, 0.0));
    assert_eq!(len(&["--window", "3", "-b", "10.0.0.2"]), d(3.0, 0.2, 0.25));
    assert_eq!(
        len(&["--window", "3", "-f", "2", "10.0.0.2"]),
        d(3.0, 2.0, 2.0)
    );
    assert_eq!(
        len(&[
            "--window",
            "3",
            "--warmup",
            "1",
            "--cooldown",
            "0.5",
            "10.0.0.2"
        ]),
        d(3.0, 1.0, 0.5)
    );
    // -D: perftest's whole test, margins of a quarter in whole seconds inside it.
    assert_eq!(len(&["-D", "4", "10.0.0.2"]), d(2.0, 1.0, 1.0));
    assert_eq!(len(&["-D", "10", "10.0.0.2"]), d(6.0, 2.0, 2.0));
    assert_eq!(len(&["-D", "5", "-f", "2", "10.0.0.2"]), d(1.0, 2.0, 2.0));
    // perftest's margin of 0 (-D 3): rdmabw's short start, inside the 3 s.
    assert_eq!(len(&["-D", "3", "10.0.0.2"]), d(2.95, 0.05, 0.0));
    assert_eq!(
        len(&["-D", "8", "--warmup", "1", "10.0.0.2"]),
        d(5.0, 1.0, 2.0)
    );
    let e = cfg(&["-D", "4", "-f", "2", "10.0.0.2"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("leaves nothing to measure") && e.contains("--window 4"),
        "{e}"
    );
}

fn client_params(args: &[&str]) -> TestParams {
    match cfg(args).unwrap() {
        Config::Client(c, _) => c.params,
        other => panic!("not a client: {other:?}"),
    }
}

#[test]
fn lat_takes_ib_write_lats_defaults_and_is_a_latency_test() {
    let p = client_params(&["lat", "127.0.0.1"]);
    assert!(p.latency);
    assert_eq!(p.sizes, Sizes::One { msg_size_bytes: 2 });
    assert_eq!(p.length, TestLength::Iterations { iterations: 1000 });
    assert_eq!(p.qps, 1);
    match cfg(&["lat", "127.0.0.1"]).unwrap() {
        Config::Client(c, _) => assert_eq!(c.tuning.inline_bytes, 220),
        other => panic!("not a client: {other:?}"),
    }
    let p = client_params(&["lat", "-s", "64K", "-n", "50", "127.0.0.1"]);
    assert_eq!(
        p.sizes,
        Sizes::One {
            msg_size_bytes: 65536
        }
    );
    assert_eq!(p.length, TestLength::Iterations { iterations: 50 });
    // Without a host it serves, as ib_write_lat does.
    match cfg(&["lat", "-D", "2"]).unwrap() {
        Config::Server { cfg, out, .. } => {
            assert!(cfg.params.latency);
            assert!(cfg.pinned.length && !cfg.pinned.sizes);
            assert!(matches!(cfg.params.length, TestLength::Duration { .. }));
            assert!(out.lat.is_some());
        }
        other => panic!("not a server: {other:?}"),
    }
    // The bandwidth default stays as it was.
    assert!(!client_params(&["127.0.0.1"]).latency);
    // --report-both needs no -b here: it prints what the peer measured.
    match cfg(&["lat", "--report-both", "127.0.0.1"]).unwrap() {
        Config::Client(_, out) => assert!(out.report_both),
        other => panic!("not a client: {other:?}"),
    }
    assert!(cfg(&["--report-both", "127.0.0.1"]).is_err());
    // ib_write_lat's rules: at least 5 exchanges; a sweep is counted, not timed.
    let e = |a: &[&str]| cfg(a).unwrap_err().to_string();
    assert!(e(&["lat", "-n", "4", "127.0.0.1"]).contains("at least 5"));
    assert!(e(&["lat", "-a", "-D", "2", "127.0.0.1"]).contains("-a with -D"));
}

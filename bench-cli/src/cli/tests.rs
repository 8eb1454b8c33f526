//! The command line as clap reads it: what railsweep writes comes back as written, each command
//! takes exactly the flags of the groups it composes (none hidden), and every perftest flag is
//! taken or refused by name.

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches};
use results::rdmabw::flags::{
    BwShapeFlags, LatTest, LatencyFlags, MarginFlags, PathFlags, QueueFlags, RailFlags,
    ServerRailFlags, SizeFlags, TestFlags, ThresholdFlags,
};

use super::*;

/// `rdmabw ARGS...` parsed as `rdmabw` parses it ([`command`]), or clap's error.
fn parse_args(args: &[String]) -> Result<Cli, clap::Error> {
    command()
        .try_get_matches_from(std::iter::once("rdmabw".to_string()).chain(args.iter().cloned()))
        .and_then(|m| Cli::from_arg_matches(&m))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The flags railsweep passes through, as a bandwidth command's groups hold them.
fn test_flags(t: &TestArgs, bw: &BwArgs) -> TestFlags {
    TestFlags {
        message: t.shape.message.clone(),
        shape: bw.shape.shape.clone(),
        path: t.transport.path.clone(),
        queue: t.transport.queue.clone(),
        thresholds: bw.figures.thresholds.clone(),
        margins: t.timing.margins.clone(),
    }
}

/// What rdmabw's own parser makes of `rdmabw client ARGV... HOST` and of the bare ib_write_bw
/// form `rdmabw ARGV... HOST`: the test flags of both.
fn parsed(argv: &[String]) -> [TestFlags; 2] {
    let with = |pre: &[&str]| {
        let mut v = strings(pre);
        v.extend(argv.iter().cloned());
        v.push("10.0.0.2".into());
        v
    };
    let client = match parse_args(&with(&["client"])).map(|c| c.cmd) {
        Ok(Some(Cmd::Client(c))) => test_flags(&c.test, &c.bw),
        other => panic!("{argv:?}: {other:?}"),
    };
    let bare = match parse_args(&with(&[])) {
        Ok(c) if c.cmd.is_none() => test_flags(&c.test, &c.bw),
        other => panic!("{argv:?}: {other:?}"),
    };
    [client, bare]
}

/// Every test flag set away from its default (struct literals without `..`, so that a new flag
/// cannot be left out of this test): what railsweep writes with `to_argv` is what rdmabw reads,
/// flag by flag.
#[test]
fn test_flags_survive_to_argv_and_rdmabws_parser() {
    let all = TestFlags {
        message: SizeFlags {
            size: Some(1 << 20),
        },
        shape: BwShapeFlags {
            qp: Some(4),
            bidirectional: true,
            data_validation: true,
        },
        path: PathFlags {
            tclass: Some(41),
            sl: Some(3),
            mtu: Some(2048),
        },
        queue: QueueFlags {
            tx_depth: Some(256),
            cq_mod: Some(8),
            post_list: Some(2),
            inline_size: Some(64),
            use_event: true,
        },
        thresholds: ThresholdFlags {
            min_gbps: Some(90.5),
            min_line_rate_pct: Some(87.25),
        },
        margins: MarginFlags {
            warmup: Some(0.3),
            cooldown: Some(0.125),
        },
    };
    let argv = all.to_argv();
    for got in parsed(&argv) {
        assert_eq!(got.message, all.message, "-s in {argv:?}");
        assert_eq!(
            got.shape, all.shape,
            "-q, -b, --data_validation in {argv:?}"
        );
        assert_eq!(got.path, all.path, "--tclass, --sl, -m in {argv:?}");
        assert_eq!(got.queue, all.queue, "-t, -Q, -l, -I, -e in {argv:?}");
        assert_eq!(got.thresholds, all.thresholds, "{argv:?}");
        assert_eq!(got.margins, all.margins, "--warmup, --cooldown in {argv:?}");
        // And as a whole, for whatever the lines above do not name.
        assert_eq!(got, all, "{argv:?}");
    }
    // The two halves railsweep puts the rail's selection between are the whole.
    assert_eq!([all.shape_argv(), all.tuning_argv()].concat(), argv);
}

/// No flag given: nothing written, and rdmabw reads its defaults.
#[test]
fn default_test_flags_write_nothing_and_read_back_as_defaults() {
    let none = TestFlags::default();
    assert!(none.to_argv().is_empty());
    for got in parsed(&none.to_argv()) {
        assert_eq!(got, none);
    }
}

/// Numbers railsweep computes (not typed by hand) come back as the same f64.
#[test]
fn fractional_seconds_and_rates_read_back_exactly() {
    let f = TestFlags {
        thresholds: ThresholdFlags {
            min_gbps: Some(0.1 + 0.2),
            min_line_rate_pct: Some(1.0 / 3.0),
        },
        margins: MarginFlags {
            warmup: Some(1e-9),
            cooldown: Some(604_799.999),
        },
        ..TestFlags::default()
    };
    for got in parsed(&f.to_argv()) {
        assert_eq!(got, f, "{:?}", f.to_argv());
    }
}

/// The rail railsweep names (both ends) and the latency test it asks for (`--test bw,lat`),
/// every field set: `rdmabw lat` reads back what `to_argv` wrote, and `rdmabw client` the rail.
#[test]
fn the_rail_and_the_latency_test_survive_rdmabws_parser() {
    let rail = RailFlags {
        ib_dev: Some("mlx5_3".into()),
        ib_port: Some(2),
        gid_index: Some(3),
        netdev: Some("net4".into()),
    };
    let server_rail = ServerRailFlags {
        server_dev: Some("mlx5_1".into()),
        server_netdev: Some("net2".into()),
        server_gid_index: Some(5),
    };
    let lat = LatTest {
        path: PathFlags {
            tclass: Some(106),
            sl: Some(15),
            mtu: Some(1024),
        },
        iters: Some(20),
        limits: LatencyFlags {
            max_p99_us: Some(0.1 + 0.2),
        },
    };
    let mut argv = strings(&["lat", "--json"]);
    argv.extend(rail.to_argv());
    argv.extend(server_rail.to_argv());
    argv.extend(lat.to_argv());
    argv.push("10.0.0.2".into());
    match parse_args(&argv).map(|c| c.cmd) {
        Ok(Some(Cmd::Lat(l))) => {
            assert_eq!(l.test.rail.rail, rail, "{argv:?}");
            assert_eq!(l.server_rail, server_rail, "{argv:?}");
            let got = LatTest {
                path: l.test.transport.path.clone(),
                iters: l.test.timing.iters,
                limits: l.lat.limits.clone(),
            };
            assert_eq!(got, lat, "{argv:?}");
            assert_eq!(l.host.as_deref(), Some("10.0.0.2"));
        }
        other => panic!("{argv:?}: {other:?}"),
    }
    let mut argv = strings(&["client"]);
    argv.extend(rail.to_argv());
    argv.extend(server_rail.to_argv());
    argv.push("10.0.0.2".into());
    match parse_args(&argv).map(|c| c.cmd) {
        Ok(Some(Cmd::Client(c))) => {
            assert_eq!((c.test.rail.rail, c.server_rail), (rail, server_rail));
        }
        other => panic!("{argv:?}: {other:?}"),
    }
}

/// Every flag of every rdmabw command has its row in the side-by-side table of
/// docs/railsweep.md, and that table names no rdmabw flag that is gone.
#[test]
fn every_flag_is_in_the_table_of_both_tools() {
    use results::rdmabw::flag_table::{check, Tool};
    let doc = include_str!("../../../docs/railsweep.md");
    if let Err(e) = check(&Cli::command(), doc, Tool::Rdmabw) {
        panic!("docs/railsweep.md, the flag table:\n{e}");
    }
}

/// Issue 55: a command takes the groups it composes and nothing else, so no flag is hidden
/// (to be refused when given anyway). `-h` leaves a few out; `--help` lists them all.
#[test]
fn no_command_hides_a_flag() {
    let mut cli = Cli::command();
    cli.build();
    let mut cmds = vec![cli.clone()];
    cmds.extend(cli.get_subcommands().cloned());
    for c in &cmds {
        for a in c.get_arguments() {
            assert!(
                !a.is_hide_set(),
                "rdmabw {} hides --{}",
                c.get_name(),
                a.get_id()
            );
        }
    }
}

/// The flags of `args`, parsed as `rdmabw ARGS...`, are no flags of that command: clap says
/// so, and `rdmabw` exits 2 (its usage status).
fn assert_no_such_flag(args: &[&str]) {
    match parse_args(&strings(args)) {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::UnknownArgument, "{args:?}: {e}");
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
        Ok(c) => panic!("{args:?} taken: {c:?}"),
    }
}

/// Issue 55: what `rdmabw lat` used to hide and refuse at run time (a bandwidth test's shape,
/// rate limiter, GPU memory, thresholds and figures) is no flag of it; ib_write_lat's own
/// bandwidth flags are refused by name before that. `rdmabw client` takes no server flag, and
/// `rdmabw server` no flag of the server's rail.
#[test]
fn a_flag_a_command_cannot_use_is_not_one_of_its_flags() {
    for flag in [
        &["-q", "2"][..],
        &["--qp", "2"],
        &["-b"],
        &["--run_infinitely"],
        &["--data_validation"],
        &["--rate_limit", "5"],
        &["--rate_units", "g"],
        &["--burst_size", "4"],
        &["--rate_limit_type", "SW"],
        &["--use_cuda", "0"],
        &["--cuda-bus-id", "0f:00.0"],
        &["--cuda-mem", "dmabuf"],
        &["--use_cuda_dmabuf"],
        &["--min-gbps", "5"],
        &["--min-line-rate-pct", "90"],
        &["-w", "5"],
        &["--limit_bw", "5"],
        &["-y", "1"],
        &["--limit_msgrate", "1"],
    ] {
        let mut args = vec!["lat"];
        args.extend_from_slice(flag);
        args.push("10.0.0.2");
        assert_no_such_flag(&args);
    }
    for (flag, says) in [
        (
            &["--cpu_util"][..],
            "--cpu_util: not supported by rdmabw lat: it ",
        ),
        (&["-W", "all"], "-W: not supported by rdmabw lat: it "),
        (
            &["--report-counters", "all"],
            "--report-counters: not supported by rdmabw lat",
        ),
        (
            &["--output", "bandwidth"],
            "--output: not supported by rdmabw lat",
        ),
        (
            &["--latency_gap=5"],
            "--latency_gap: not supported by rdmabw lat",
        ),
    ] {
        let mut argv = strings(&["rdmabw", "lat"]);
        argv.extend(strings(flag));
        argv.push("h".into());
        match parse(argv) {
            Err(ParseError::Refused(u)) => assert!(u.0.starts_with(says), "{flag:?}: {u}"),
            other => panic!("{flag:?}: {other:?}"),
        }
    }
    // ib_write_bw's refusals hold there too; the latency flags pass.
    assert!(refuse_unsupported(&["lat", "-R", "h"]).is_err());
    assert!(refuse_unsupported(&["lat", "-U", "-H", "-C", "h"]).is_ok());
    for flag in [
        &["--daemon"][..],
        &["--exit-on-stdin-eof"],
        &["--bind", "10.0.0.1"],
        &["--max-qps", "8"],
        &["--max-buffer", "2G"],
        &["--max-tests", "4"],
    ] {
        let mut args = vec!["client"];
        args.extend_from_slice(flag);
        args.push("10.0.0.9");
        assert_no_such_flag(&args);
    }
    for flag in ["--server-dev", "--server-netdev", "--server-gid-index"] {
        assert_no_such_flag(&["server", flag, "1"]);
    }
}

/// The flags a help text lists: the words of the options' own lines, not of their descriptions
/// or the examples.
fn listed(help: &str) -> Vec<String> {
    help.lines()
        .filter(|l| (2..=6).contains(&(l.len() - l.trim_start().len())))
        .filter(|l| l.trim_start().starts_with('-'))
        .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == ','))
        .filter(|w| w.starts_with('-'))
        .map(str::to_string)
        .collect()
}

/// `-h` and `--help` of `cmd`.
fn helps(cmd: &mut clap::Command) -> [String; 2] {
    [
        cmd.render_help().to_string(),
        cmd.render_long_help().to_string(),
    ]
}

/// Issue 33: `rdmabw lat -h` listed bandwidth flags that its tests refuse. Its help lists what
/// a latency test takes, says what `-n` and `--json` are there, and has no heading of a
/// bandwidth test's groups.
#[test]
fn lat_help_lists_what_a_latency_test_takes() {
    let mut cli = Cli::command();
    cli.build();
    let lat = cli.find_subcommand_mut("lat").expect("a lat subcommand");
    for h in &helps(lat) {
        let l = listed(h);
        for taken in [
            "-s",
            "-n",
            "-D",
            "--tclass",
            "--netdev",
            "-U",
            "--max-p99-us",
        ] {
            assert!(l.iter().any(|f| f == taken), "lat help lacks {taken}:\n{h}");
        }
        for bw in ["-q", "-b", "--rate_limit", "--use_cuda", "--min-gbps", "-W"] {
            assert!(!l.iter().any(|f| f == bw), "lat help lists {bw}:\n{h}");
        }
        // -n counts exchanges in a latency test, not a bandwidth test's RDMA WRITEs.
        assert!(
            h.contains("xchanges (ib_write_lat -n)") && !h.contains("WRITEs per QP"),
            "{h}"
        );
        assert!(!h.contains("Rate limiter:") && !h.contains("\nGPU:"), "{h}");
        assert!(h.contains("LatReport") && !h.contains("BwReport"), "{h}");
    }
}

/// The other way: the latency flags (`-U`, `-H`, `-C`, `--max-p99-us`) are `rdmabw lat`'s
/// alone; no bandwidth command's help lists them and none takes them.
#[test]
fn bandwidth_help_lists_no_latency_flag() {
    let only = LatArgs::augment_args(clap::Command::new("lat-only"));
    let lat_only: Vec<(String, bool)> = only
        .get_arguments()
        .flat_map(|a| {
            let v = a.get_action().takes_values();
            a.get_long()
                .map(|l| format!("--{l}"))
                .into_iter()
                .chain(a.get_short().map(|c| format!("-{c}")))
                .map(move |n| (n, v))
        })
        .collect();
    assert!(lat_only.len() >= 7, "{lat_only:?}");
    let mut cli = Cli::command();
    cli.build();
    let mut texts: Vec<(String, String)> = helps(&mut cli)
        .into_iter()
        .map(|h| ("rdmabw".to_string(), h))
        .collect();
    for role in ["server", "client"] {
        let sub = cli.find_subcommand_mut(role).expect("subcommand");
        texts.extend(helps(sub).into_iter().map(|h| (role.to_string(), h)));
    }
    for (cmd, h) in &texts {
        let l = listed(h);
        for (f, _) in &lat_only {
            assert!(!l.contains(f), "{cmd} help lists {f}:\n{h}");
        }
    }
    for (f, takes_value) in &lat_only {
        for pre in [&[][..], &["client"], &["server"]] {
            let mut args = pre.to_vec();
            args.push(f);
            if *takes_value {
                args.push("5");
            }
            if pre != ["server"] {
                args.push("127.0.0.1");
            }
            assert!(parse_args(&strings(&args)).is_err(), "{args:?} is taken");
        }
    }
}

/// Every long name, alias and short letter `rdmabw lat` takes.
fn lat_accepts() -> Vec<String> {
    let mut cmd = Cli::command();
    cmd.build();
    let lat = cmd
        .get_subcommands()
        .find(|c| c.get_name() == "lat")
        .expect("a lat subcommand")
        .clone();
    refused::arg_names(&lat)
}

/// Each flag of the reference ib_write_lat (perftest 25.x in the lab, read from its live
/// `--help`) is taken by `rdmabw lat` or refused by name.
#[test]
fn every_flag_of_the_reference_ib_write_lat_is_taken_or_refused_by_name() {
    let taken = lat_accepts();
    let flags = refused::check_reference_flags(
        "ib_write_lat",
        41,
        &taken,
        refused::lat_refuses,
        |arg| refuse_unsupported(&["lat", arg, "10.0.0.2"]),
        |arg| format!("{arg}: not supported by rdmabw"),
    );
    for f in [
        "U",
        "H",
        "C",
        "report-unsorted",
        "report-histogram",
        "report-cycles",
    ] {
        assert!(
            flags.iter().any(|x| x == f),
            "{f} missing from the reference's help"
        );
        assert!(taken.iter().any(|x| x == f), "{f} not taken");
    }
}

/// No flag `rdmabw lat` refuses by name is also one of its flags.
#[test]
fn lat_refuses_no_flag_it_takes() {
    let taken = lat_accepts();
    for n in refused::lat_refused_names() {
        assert!(!taken.iter().any(|t| t == n), "{n} is taken and refused");
    }
}

#[test]
fn a_link_named_ib_write_lat_runs_lat_and_other_names_run_as_given() {
    let a = |v: &[&str]| strings(v);
    assert_eq!(
        args_for_name("/usr/local/bin/ib_write_lat", a(&["-s", "8", "h"])),
        a(&["lat", "-s", "8", "h"])
    );
    assert_eq!(args_for_name("ib_write_bw", a(&["h"])), a(&["h"]));
    assert_eq!(args_for_name("rdmabw", a(&["lat", "h"])), a(&["lat", "h"]));
    match parse(a(&["/usr/bin/ib_write_lat", "-s", "8", "h"])) {
        Ok(Cli {
            cmd: Some(Cmd::Lat(l)),
            ..
        }) => assert_eq!(l.test.shape.message.size, Some(8)),
        other => panic!("{other:?}"),
    }
}

/// A bad value of a shared flag is refused by its value parser (exit 2), naming the flag and
/// the range: the one check of it, which railsweep's parser shares.
#[test]
fn bad_values_of_the_shared_flags_name_the_flag_and_the_range() {
    for (args, says) in [
        (&["--tclass", "256"][..], "0-255"),
        (&["-s", "0"], "at least 1 byte"),
        (&["-s", "2G"], "largest buffer"),
        (&["-m", "1500"], "256, 512"),
        (&["-q", "0"], "at least 1"),
        (&["-t", "0"], "at least 1"),
        (&["--sl", "16"], "0-15"),
        (&["-i", "0"], "numbered from 1"),
        (&["--min-gbps", "0"], "above 0"),
        (&["--min-line-rate-pct", "101"], "at most 100"),
        (&["-u", "32"], "0-31"),
        (&["--retry-count", "8"], "0-7"),
    ] {
        let mut v = strings(args);
        v.push("10.0.0.9".into());
        match parse_args(&v) {
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::ValueValidation, "{args:?}: {e}");
                assert_eq!(e.exit_code(), 2);
                let text = e.to_string();
                assert!(
                    text.contains(&format!("'{}'", args[1])) && text.contains(says),
                    "{args:?}: {text}"
                );
                let name = args[0].trim_start_matches('-');
                assert!(text.contains(name), "{args:?}: {text}");
            }
            Ok(c) => panic!("{args:?} taken: {c:?}"),
        }
    }
}

/// Issue 56: a bare first word is a mistyped command only when it is close to a command and
/// does not resolve; a name that resolves is a host however close, and an address, a qualified
/// name, a flag or a command itself is never taken for a typo.
#[test]
fn a_word_is_a_mistyped_command_only_when_close_and_unresolvable() {
    let never = |_: &str| false;
    let always = |_: &str| true;
    for (word, meant) in [
        ("rail", "rails"),
        ("serve", "server"),
        ("Lat", "lat"),
        ("hlep", "help"),
    ] {
        let e = mistyped_command(word, never).unwrap_or_else(|| panic!("{word}: no suggestion"));
        assert_eq!(e.kind(), ErrorKind::InvalidSubcommand, "{word}");
        assert_eq!(e.exit_code(), 2, "{word}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("'{meant}'")), "{word}: {msg}");
        assert!(
            mistyped_command(word, always).is_none(),
            "{word} resolves: a host"
        );
    }
    for word in [
        "rails",
        "lat",
        "help",
        "10.0.0.2",
        "rail.example",
        "fe80::1",
        "-d",
        "node7",
        "gpu-host",
    ] {
        assert!(mistyped_command(word, never).is_none(), "{word}");
    }
    assert_eq!(edits("kitten", "sitting"), 3);
    assert_eq!(edits("rail", "rails"), 1);
    assert_eq!(edits("", "lat"), 3);
}

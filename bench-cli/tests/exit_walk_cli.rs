//! Issue 56, item 2: the exit-code table (README, `rdmabw --help`, `bench-cli/src/exit.rs`)
//! walked for every command of rdmabw, one case per row that can be provoked without RDMA
//! hardware, from one table.
//!
//! | status | provoked here |
//! |---|---|
//! | 0 | `--help` of every command; the listings on a fixture tree; a batch whose input ends; a daemon whose launcher closes its input (`--exit-on-stdin-eof`) |
//! | 2 | a flag the command does not have, for every command; a device that is not there; a host that does not resolve; a sysfs root that is not there; an unusable bind list or secret |
//! | 130 | SIGINT and SIGTERM to `server --daemon` and to `batch` |
//!
//! Not here, and why: status 1 and the 130 of a running test need a test to run, so an RDMA
//! rail (the lab suites: scripts/labtests/engine.sh walks them, e.g. 130 for a client and a
//! one-test server on Ctrl-C); `probe`'s 1 and `gpus`' set-up 2 depend on the host's devices
//! and GPUs, so they are not provoked here.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What is done to the process once started.
#[derive(Clone, Copy)]
enum Then {
    /// Its standard input closed at once (or `/dev/null`); it ends by itself.
    Finish,
    /// Standard input held open; once standard error has said `ready`, the signal (`INT`,
    /// `TERM`) is sent.
    Signal(&'static str, &'static str),
    /// Standard input held open; once standard error has said `ready`, it is closed.
    CloseInput(&'static str),
}

struct Case {
    /// The command as the table names it.
    command: &'static str,
    /// The row of the table, in words.
    row: &'static str,
    args: Vec<String>,
    /// Written to standard input first.
    input: &'static str,
    then: Then,
    code: i32,
    /// What standard error says (empty: anything).
    says: &'static str,
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../bench-core/tests/fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// A device name no host has.
const NO_DEV: &str = "rdmabw-walk-nodev";

/// A daemon on loopback, on a port the kernel picks.
const DAEMON: &[&str] = &["server", "--daemon", "--bind", "127.0.0.1", "-p", "0"];

fn case(
    command: &'static str,
    row: &'static str,
    args: &[&str],
    then: Then,
    code: i32,
    says: &'static str,
) -> Case {
    Case {
        command,
        row,
        args: args.iter().map(|s| s.to_string()).collect(),
        input: "",
        then,
        code,
        says,
    }
}

fn with_input(mut c: Case, input: &'static str) -> Case {
    c.input = input;
    c
}

/// Every case of the walk.
fn table() -> Vec<Case> {
    use Then::*;
    let hostnet = fixture("hostnet");
    let rails = fixture("rails-hostnet");
    let mut cases = Vec::new();
    // Every command: its help is 0; a flag it does not have is a usage error, 2.
    let commands: [(&str, &[&str]); 11] = [
        ("rdmabw (bare form)", &[]),
        ("client", &["client", "127.0.0.1"]),
        ("server", &["server"]),
        ("server --daemon", DAEMON),
        ("lat", &["lat"]),
        ("devices", &["devices"]),
        ("gpus", &["gpus"]),
        ("rails", &["rails"]),
        ("counters", &["counters"]),
        ("probe", &["probe"]),
        ("batch", &["batch"]),
    ];
    for (name, args) in commands {
        let mut help: Vec<&str> = args.iter().take(1).copied().collect();
        help.push("--help");
        cases.push(case(name, "0 help", &help, Finish, 0, ""));
        let mut bad = args.to_vec();
        bad.push("--no-such-flag");
        cases.push(case(
            name,
            "2 usage: a flag it does not have",
            &bad,
            Finish,
            2,
            "unexpected argument '--no-such-flag'",
        ));
    }
    let nodev = "RDMA device rdmabw-walk-nodev not found";
    let unresolved = "HOST not..a..host: the name does not resolve here";
    cases.extend([
        // Set-up errors of the test commands, before any RDMA.
        case(
            "rdmabw (bare form)",
            "2 set-up: no such device",
            &["-d", NO_DEV],
            Finish,
            2,
            nodev,
        ),
        case(
            "rdmabw (bare form)",
            "2 set-up: host does not resolve",
            &["-D", "1", "not..a..host"],
            Finish,
            2,
            "not..a..host",
        ),
        case(
            "client",
            "2 set-up: no such device",
            &["client", "-d", NO_DEV, "127.0.0.1"],
            Finish,
            2,
            nodev,
        ),
        case(
            "client",
            "2 set-up: host does not resolve",
            &["client", "-D", "1", "not..a..host"],
            Finish,
            2,
            unresolved,
        ),
        case(
            "server",
            "2 set-up: no such device",
            &["server", "-d", NO_DEV],
            Finish,
            2,
            nodev,
        ),
        case(
            "lat",
            "2 set-up: no such device",
            &["lat", "-d", NO_DEV],
            Finish,
            2,
            nodev,
        ),
        case(
            "server --daemon",
            "2 set-up: no such device",
            &[
                "server",
                "--daemon",
                "-d",
                NO_DEV,
                "--bind",
                "127.0.0.1",
                "-p",
                "0",
            ],
            Finish,
            2,
            nodev,
        ),
        case(
            "server --daemon",
            "2 usage: a bind list that cannot work",
            &[
                "server",
                "--daemon",
                "--bind",
                "0.0.0.0,127.0.0.2",
                "-p",
                "0",
            ],
            Finish,
            2,
            "give it alone",
        ),
        // The daemon: its launcher closing its input is 0, a signal 130.
        case(
            "server --daemon",
            "0 input closed (--exit-on-stdin-eof)",
            &[DAEMON, &["--exit-on-stdin-eof"]].concat(),
            CloseInput("listening on"),
            0,
            "standard input closed",
        ),
        case(
            "server --daemon",
            "130 SIGINT",
            DAEMON,
            Signal("INT", "listening on"),
            130,
            "stopped by a signal",
        ),
        case(
            "server --daemon",
            "130 SIGTERM",
            DAEMON,
            Signal("TERM", "listening on"),
            130,
            "stopped by a signal",
        ),
        // The listings on fixture trees, and a root that is not there.
        case(
            "devices",
            "0 listed",
            &["devices", "--root", &rails],
            Finish,
            0,
            "",
        ),
        case(
            "devices",
            "2 set-up: no sysfs",
            &["devices", "--root", "/nonexistent"],
            Finish,
            2,
            "--root /nonexistent",
        ),
        case(
            "rails",
            "0 listed",
            &["rails", "--root", &rails],
            Finish,
            0,
            "",
        ),
        case(
            "rails",
            "2 set-up: no sysfs",
            &["rails", "--root", "/nonexistent"],
            Finish,
            2,
            "--root /nonexistent",
        ),
        case(
            "counters",
            "0 listed",
            &["counters", "--root", &hostnet, "-d", "mlx5_0"],
            Finish,
            0,
            "",
        ),
        case(
            "counters",
            "2 set-up: no such device",
            &["counters", "--root", &hostnet, "-d", NO_DEV],
            Finish,
            2,
            NO_DEV,
        ),
        // The batch: end of input is 0, an unusable secret 2, a signal 130 (after the test in
        // progress: here, one that is refused, so that its end line says the batch is running).
        case("batch", "0 end of input", &["batch"], Finish, 0, ""),
        with_input(
            case(
                "batch",
                "2 set-up: unusable secret",
                &["batch", "--secret-stdin"],
                Finish,
                2,
                "not a usable secret",
            ),
            "short\n",
        ),
        with_input(
            case(
                "batch",
                "130 SIGINT",
                &["batch"],
                Signal("INT", "rdmabw-batch-end"),
                130,
                "interrupted",
            ),
            "[\"devices\"]\n",
        ),
        with_input(
            case(
                "batch",
                "130 SIGTERM",
                &["batch"],
                Signal("TERM", "rdmabw-batch-end"),
                130,
                "interrupted",
            ),
            "[\"devices\"]\n",
        ),
    ]);
    cases
}

/// The longest any case may take: a batch blocked on its input ends 6 s after a signal.
const LIMIT: Duration = Duration::from_secs(30);

/// Runs `c`: its exit code (`None`: killed by a signal, or still running at [`LIMIT`]) and
/// its standard error.
fn run(c: &Case) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .args(&c.args)
        .env_remove("RDMABW_SECRET")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running rdmabw: {e}"));
    let mut stdin = child.stdin.take();
    if let Some(w) = stdin.as_mut() {
        // A process that already exited (a usage error) may have closed it.
        let _ = w.write_all(c.input.as_bytes());
    }
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap_or_else(|| panic!("stderr"));
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let ready = |rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, what: &str| {
        let t0 = Instant::now();
        while t0.elapsed() < LIMIT {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let hit = l.contains(what);
                    seen.push(l);
                    if hit {
                        return true;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
        false
    };
    match c.then {
        Then::Finish => drop(stdin.take()),
        Then::Signal(sig, what) => {
            if ready(&rx, &mut seen, what) {
                let pid = child.id().to_string();
                let st = Command::new("kill")
                    .args([&format!("-{sig}"), &pid])
                    .status();
                assert!(st.is_ok_and(|s| s.success()), "kill -{sig} {pid}");
            }
        }
        Then::CloseInput(what) => {
            if ready(&rx, &mut seen, what) {
                drop(stdin.take());
            }
        }
    }
    let code = wait(&mut child);
    drop(stdin);
    let _ = reader.join();
    seen.extend(rx.try_iter());
    (code, seen.join("\n"))
}

/// Its exit code within [`LIMIT`]; else it is killed and `None`.
fn wait(child: &mut Child) -> Option<i32> {
    let t0 = Instant::now();
    while t0.elapsed() < LIMIT {
        if let Ok(Some(st)) = child.try_wait() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn every_command_exits_as_the_table_says() {
    let cases = table();
    // All at once: the signal cases wait seconds, the others not at all.
    let results: Vec<(Option<i32>, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = cases.iter().map(|c| s.spawn(move || run(c))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("a case panicked")))
            .collect()
    });
    let mut wrong = Vec::new();
    for (c, (code, err)) in cases.iter().zip(&results) {
        let ok = *code == Some(c.code) && err.contains(c.says);
        println!(
            "{:<20} {:<42} {:>4} {}",
            c.command,
            c.row,
            code.map_or("-".into(), |x| x.to_string()),
            if ok { "ok" } else { "WRONG" }
        );
        if !ok {
            wrong.push(format!(
                "{} / {} (rdmabw {}): exit {code:?}, wanted {} saying {:?}; stderr:\n{err}",
                c.command,
                c.row,
                c.args.join(" "),
                c.code,
                c.says
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    // Each command of rdmabw is walked.
    for name in [
        "rdmabw (bare form)",
        "client",
        "server",
        "server --daemon",
        "lat",
        "devices",
        "gpus",
        "rails",
        "counters",
        "probe",
        "batch",
    ] {
        assert!(cases.iter().any(|c| c.command == name), "{name}");
    }
}

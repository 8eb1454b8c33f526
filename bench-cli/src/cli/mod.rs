//! The command line (clap derive): the commands and the flag groups each composes. Nothing here
//! is validated beyond types and ranges; `config` resolves it into a [`crate::config::Config`]
//! before any work starts.
//!
//! The test commands compose groups ([`groups`]): [`TestArgs`] are every test's, [`BwArgs`] a
//! bandwidth test's; a server takes [`ServerArgs`], a client the server's end of the rail
//! ([`ServerRailFlags`]). The bare ib_write_bw form (`rdmabw [flags] [HOST]`) and `rdmabw lat`
//! are a server or a client by whether HOST is given, so they take both roles' flags and
//! `config` refuses the other role's by name; `rdmabw server` and `rdmabw client` take only
//! their own.

mod groups;
mod help;
mod listing;
mod refused;
#[cfg(test)]
mod tests;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use results::rdmabw::flags::{LatencyFlags, ServerRailFlags};

pub use groups::{
    BwOutputArgs, BwShapeArgs, ControlArgs, CountersArgs, FigureArg, GpuArgs, OutputArgs, PeerArg,
    PollArg, RailArgs, RateLimitArgs, ServerArgs, ShapeArgs, TimingArgs, TransportArgs,
};
pub use help::SHORT_EXAMPLES;
use help::{
    root_after, test_long_about, ABOUT, BATCH_ABOUT, CLIENT_LONG, EXAMPLES, LAT_EXAMPLES,
    LAT_SHORT_EXAMPLES, SERVER_LONG,
};
pub use listing::{BatchCmd, CountersCmd, DevicesCmd, GpusCmd, ProbeCmd, RailsCmd};
pub use refused::refuse_unsupported;

/// `rdmabw`: the top level, which also takes the bare ib_write_bw form: a server without HOST,
/// a client with one. Its help is a summary, `-h` and `--help` alike ([`command`]).
#[derive(Debug, Parser)]
#[command(
    name = "rdmabw",
    version = results::VERSION,
    about = ABOUT,
    after_help = root_after(),
    args_conflicts_with_subcommands = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,

    // Before the flags: an argument after them would be listed under their last heading.
    /// The server to test against, as `ib_write_bw [flags] HOST`.
    ///
    /// Client mode; without it, serve one test.
    #[arg(value_name = "HOST")]
    pub host: Option<String>,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten)]
    pub bw: BwArgs,

    #[command(flatten, next_help_heading = "Rail")]
    pub server_rail: ServerRailFlags,

    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Serve one test, as ib_write_bw without a HOST; --daemon: test after test.
    #[command(
        long_about = test_long_about(SERVER_LONG),
        after_help = SHORT_EXAMPLES,
        after_long_help = EXAMPLES
    )]
    Server(ServerCmd),
    /// Run one test against an rdmabw server, like ib_write_bw HOST.
    #[command(
        long_about = test_long_about(CLIENT_LONG),
        after_help = SHORT_EXAMPLES,
        after_long_help = EXAMPLES
    )]
    Client(ClientCmd),
    /// RDMA WRITE latency, as ib_write_lat (`rdmabw lat` on both ends).
    ///
    /// Serve one test, or with HOST measure against that server.
    #[command(after_help = LAT_SHORT_EXAMPLES, after_long_help = LAT_EXAMPLES)]
    Lat(LatCmd),
    /// List every RDMA device and port: state, link layer, rate, MTU and GID table.
    Devices(DevicesCmd),
    /// List GPUs and their nearest rails; test a GPU buffer, or a NIC's dma-buf.
    ///
    /// Each GPU's index, name, PCI bus id, NUMA node, dma-buf support and nearest rails;
    /// --selftest tests a GPU buffer step by step; --dmabuf-check whether a NIC takes dma-buf
    /// memory.
    Gpus(GpusCmd),
    /// List the rails of this network namespace, numbered as railsweep pairs them.
    ///
    /// Each rail's interface, address, RDMA device, port, GID index, state, rate, MTU, PCI,
    /// NUMA, nearby GPUs and how the rail reaches the pod.
    Rails(RailsCmd),
    /// Print every counter of one rail as it stands.
    ///
    /// The RDMA port's counters and hw_counters, the interface's statistics and ethtool
    /// statistics (what -W shows the deltas of).
    Counters(CountersCmd),
    /// Check whether an RDMA test can run here: PASS, WARN or FAIL, and the fix.
    ///
    /// Checks devices, memlock, GIDs, DNS, /dev/shm and GPUs; exit 1 when any check fails.
    Probe(ProbeCmd),
    /// Run client tests read from stdin in this one process, for orchestrators.
    #[command(long_about = BATCH_ABOUT)]
    Batch(BatchCmd),
}

/// The flags every test takes, bandwidth and latency: the rail, the shape, the timing, the
/// transport, the output and the control channel.
#[derive(Debug, Args, Clone)]
pub struct TestArgs {
    #[command(flatten)]
    pub rail: RailArgs,
    #[command(flatten)]
    pub shape: ShapeArgs,
    #[command(flatten)]
    pub timing: TimingArgs,
    #[command(flatten)]
    pub transport: TransportArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub control: ControlArgs,
}

/// The flags of a bandwidth test alone: queue pairs and directions, the rate limiter, GPU
/// memory, thresholds and figures, counter deltas. `rdmabw lat` takes none of them; resolved,
/// a latency test's are their defaults.
#[derive(Debug, Args, Clone, Default)]
pub struct BwArgs {
    #[command(flatten)]
    pub shape: BwShapeArgs,
    #[command(flatten)]
    pub rate: RateLimitArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
    #[command(flatten)]
    pub figures: BwOutputArgs,
    #[command(flatten)]
    pub counters: CountersArgs,
}

/// `rdmabw server`: a bandwidth test's flags and a server's.
#[derive(Debug, Args)]
pub struct ServerCmd {
    #[command(flatten)]
    pub test: TestArgs,
    #[command(flatten)]
    pub bw: BwArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `rdmabw client`: a bandwidth test's flags and the server's end of the rail.
#[derive(Debug, Args)]
pub struct ClientCmd {
    /// The server's control address (host name or IP).
    #[arg(value_name = "HOST")]
    pub host: String,
    #[command(flatten)]
    pub test: TestArgs,
    #[command(flatten)]
    pub bw: BwArgs,
    #[command(flatten, next_help_heading = "Rail")]
    pub server_rail: ServerRailFlags,
}

/// `rdmabw lat [flags] [HOST]`: every test's flags with ib_write_lat's defaults (`-s 2`, `-n
/// 1000`, inline up to 220 bytes), either role's, and the latency flags. What does not fit a
/// ping-pong of one QP (`-b`, `-q`, rate limits, CUDA memory, bandwidth thresholds) is no flag
/// of it.
#[derive(Debug, Args)]
#[command(version)]
#[command(mut_arg("json", |a| a.help("One JSON document (a LatReport) on stdout")))]
#[command(mut_arg("report_both", |a| a.help("Also the table the peer measured")))]
#[command(mut_arg("iters", |a| a
    .help("Exchanges (ib_write_lat -n)")
    .long_help("Ping-pong exchanges (ib_write_lat -n).\n\nDefault 1000, at least 5.")))]
pub struct LatCmd {
    /// The server to measure against (client); without it, serve one test (as ib_write_lat).
    #[arg(value_name = "HOST")]
    pub host: Option<String>,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten, next_help_heading = "Rail")]
    pub server_rail: ServerRailFlags,

    #[command(flatten)]
    pub server: ServerArgs,

    #[command(flatten)]
    pub lat: LatArgs,
}

/// The flags of `rdmabw lat` beyond the test flags.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Latency (ib_write_lat flags)")]
pub struct LatArgs {
    /// Print every sample, unsorted (ib_write_lat -U).
    ///
    /// In the order measured, before the table, one-way usec.
    #[arg(short = 'U', long = "report-unsorted")]
    pub unsorted: bool,
    /// Print every sample, sorted, before the table (ib_write_lat -H).
    #[arg(short = 'H', long = "report-histogram")]
    pub histogram: bool,
    /// Report in CPU cycles (ib_write_lat -C).
    ///
    /// Microseconds times the CPU's MHz from /proc/cpuinfo (rdmabw measures with the monotonic
    /// clock).
    #[arg(short = 'C', long = "report-cycles")]
    pub cycles: bool,
    /// `--max-p99-us`, defined once for rdmabw lat and railsweep.
    #[command(flatten)]
    pub limits: LatencyFlags,
}

/// The arguments as `rdmabw` should read them when it was called as `argv0`: through a link
/// named `ib_write_lat`, as `rdmabw lat ARGS`; otherwise (`ib_write_bw` included, which is
/// rdmabw's bare form) unchanged.
pub fn args_for_name(argv0: &str, args: Vec<String>) -> Vec<String> {
    let name = std::path::Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == "ib_write_lat" {
        std::iter::once("lat".to_string()).chain(args).collect()
    } else {
        args
    }
}

/// rdmabw's command line as it parses and prints its help. The top level's help is one summary
/// for `-h`, `--help` and `rdmabw help` alike ([`parse`] reads a bare `rdmabw help` as `--help`) (issue 56: no longer than ib_write_bw's own
/// `--help` plus the commands' list): one line per flag, the flags `-h` leaves out left out, the
/// first examples, the exit statuses, and where each flag is in full: the `--help` of `rdmabw
/// client`, `rdmabw server` and `rdmabw lat`, which keep their long text.
pub fn command() -> clap::Command {
    // clap's own -h/--help cannot be changed on one command alone: rdmabw gives every command
    // its own, the top level's printing the summary for both spellings.
    let cmd = Cli::command().disable_help_flag(true);
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut cmd = cmd.next_help_heading(None::<&str>).arg(help_flag(
        clap::ArgAction::HelpShort,
        "Print help",
        None,
    ));
    for name in names {
        cmd = cmd.mut_subcommand(name, |s| {
            let more = s.get_long_about().is_some()
                || s.get_after_long_help().is_some()
                || s.get_arguments().any(|a| a.get_long_help().is_some());
            let arg = if more {
                help_flag(
                    clap::ArgAction::Help,
                    "Print help (see more with '--help')",
                    Some("Print help (see a summary with '-h')"),
                )
            } else {
                help_flag(clap::ArgAction::Help, "Print help", None)
            };
            s.next_help_heading(None::<&str>).arg(arg)
        });
    }
    cmd
}

/// `-h, --help`, doing `action`, said as `help` (in `-h`) and `long` (in `--help`).
fn help_flag(action: clap::ArgAction, help: &'static str, long: Option<&'static str>) -> clap::Arg {
    clap::Arg::new("help")
        .short('h')
        .long("help")
        .action(action)
        .display_order(0)
        .help(help)
        .long_help(long)
}

/// Why a command line did not parse.
#[derive(Debug)]
pub enum ParseError {
    /// A perftest flag rdmabw refuses by name, with what to do instead (exit 2).
    Refused(crate::exit::Usage),
    /// clap's: a usage error (exit 2), or `--help`/`--version` (exit 0).
    Clap(clap::Error),
}

/// Parses `argv` (the program's name first) as rdmabw's command line: through a link named
/// `ib_write_lat` as `rdmabw lat`, the perftest flags rdmabw refuses refused by name first.
pub fn parse(argv: Vec<String>) -> Result<Cli, ParseError> {
    let mut argv = argv.into_iter();
    let argv0 = argv.next().unwrap_or_else(|| "rdmabw".to_string());
    let mut args = args_for_name(&argv0, argv.collect());
    if args == ["help"] {
        args = vec!["--help".to_string()];
    }
    refuse_unsupported(&args).map_err(ParseError::Refused)?;
    if let Some(e) = args.first().and_then(|w| mistyped_command(w, resolves)) {
        return Err(ParseError::Clap(e));
    }
    command()
        .try_get_matches_from(std::iter::once(argv0).chain(args))
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(ParseError::Clap)
}

/// Whether `name` resolves to an address here (as HOST would be resolved).
fn resolves(name: &str) -> bool {
    use std::net::ToSocketAddrs;
    (name, 0)
        .to_socket_addrs()
        .is_ok_and(|mut a| a.next().is_some())
}

/// The error for a first argument that reads as a mistyped command: a bare word (no `-`, `.` or
/// `:`, so never a flag, an IP address or a qualified name) that is no command, is close to one
/// (at most two edits away, or one's name is the start of the other's, from 3 letters), and that
/// `resolves` says is no host here. Anything else stays the bare form's HOST, as ib_write_bw
/// takes it: a name that resolves is always a host, however close to a command, and a word
/// close to none keeps the client's own "does not resolve" error. Both readings of a close
/// word that does not resolve were errors (exit 2); the message names both.
pub(crate) fn mistyped_command(word: &str, resolves: impl Fn(&str) -> bool) -> Option<clap::Error> {
    if word.is_empty() || word.contains(['-', '.', ':']) {
        return None;
    }
    let cmd = command();
    let mut names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    names.push("help".into());
    if names.iter().any(|n| n == word) {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let close = |n: &String| {
        edits(&lower, n) <= 2
            || (lower.len().min(n.len()) >= 3 && (n.starts_with(&lower) || lower.starts_with(n)))
    };
    let near = names
        .iter()
        .filter(|n| close(n))
        .min_by_key(|n| edits(&lower, n))?;
    if resolves(word) {
        return None;
    }
    let mut cmd = cmd;
    Some(cmd.error(
        clap::error::ErrorKind::InvalidSubcommand,
        format!(
            "unrecognized subcommand '{word}'\n\n  tip: a similar subcommand exists: '{near}'\n  \
             tip: nor is '{word}' a host name here (`rdmabw [flags] HOST` is a client of \
             HOST)"
        ),
    ))
}

/// Levenshtein distance between `a` and `b` (insertions, deletions, substitutions).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diag
            } else {
                1 + diag.min(above).min(row[j])
            };
            diag = above;
        }
    }
    row[b.len()]
}

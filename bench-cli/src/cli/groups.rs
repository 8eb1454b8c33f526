//! The test flags in groups, one concern each, that the test commands compose
//! ([`super::TestArgs`] every test's, [`super::BwArgs`] a bandwidth test's): a command lists and
//! takes exactly the groups it composes, so a flag a command cannot use is not one of its flags.
//! The groups railsweep shares (size, shape, path, queue, margins, thresholds, rail) are
//! `results::rdmabw::flags`'; the rest are rdmabw's own. Only types and ranges are checked here
//! (by the value parsers); `config` resolves how the flags combine.

use std::path::PathBuf;

use bench_core::session::ServerLimits;
use clap::Args;
use results::rdmabw::flags::{
    BwShapeFlags, LengthFlags, MarginFlags, PathFlags, QueueFlags, RailFlags, SizeFlags,
    ThresholdFlags,
};

/// `--bind` when it is not given: every address.
pub const BIND_DEFAULT: &str = "0.0.0.0";
/// `--max-buffer` when it is not given.
pub const MAX_BUFFER_DEFAULT: &str = "1G";

/// This side's rail: `-d`, `-i`, `-x`, `--netdev`.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Rail")]
pub struct RailArgs {
    #[command(flatten)]
    pub rail: RailFlags,
}

/// The test's shape, every test's: its size (or sweep) and connection type.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Shape")]
pub struct ShapeArgs {
    #[command(flatten)]
    pub message: SizeFlags,

    /// Sweep sizes 2 B .. 8 MiB (ib_write_bw -a).
    #[arg(short = 'a', long = "all")]
    pub all: bool,

    /// Connection type (ib_write_bw -c); only RC.
    #[arg(
        hide_short_help = true,
        short = 'c',
        long = "connection",
        value_name = "TYPE"
    )]
    pub connection: Option<String>,
}

/// A bandwidth test's shape: queue pairs, directions, validation, endless windows.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Shape")]
pub struct BwShapeArgs {
    #[command(flatten)]
    pub shape: BwShapeFlags,

    /// Repeat the window until stopped, a row each.
    ///
    /// As ib_write_bw --run_infinitely, until SIGINT/SIGTERM: -D (or --window) SECONDS is the
    /// reporting interval, the first window follows a short warm-up, and the writes never pause
    /// between windows. The table, --json (a BwReport per line) and --csv (a header, then a row
    /// per window) are written as a stream; then exit 130. One size, one direction; the server
    /// follows.
    #[arg(long = "run_infinitely", alias = "run-infinitely")]
    pub run_infinitely: bool,
}

/// How long a test runs: seconds or iterations, and the margins.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Timing")]
pub struct TimingArgs {
    #[command(flatten)]
    pub length: LengthFlags,

    /// RDMA WRITEs per QP (ib_write_bw -n).
    ///
    /// Default 5000 when -D is not given.
    #[arg(short = 'n', long = "iters", value_name = "N")]
    pub iters: Option<u64>,

    #[command(flatten)]
    pub margins: MarginFlags,

    /// Accepted, ignored (ib_write_bw -F).
    ///
    /// rdmabw does not read the CPU frequency.
    #[arg(hide_short_help = true, short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,

    /// Accepted, ignored (every timed test warms up).
    #[arg(hide_short_help = true, long = "perform_warm_up")]
    pub perform_warm_up: bool,
}

/// The queue pairs' transport: path, queues, polling, timeouts.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Transport")]
pub struct TransportArgs {
    #[command(flatten)]
    pub path: PathFlags,

    #[command(flatten)]
    pub queue: QueueFlags,

    /// How to wait for completions.
    ///
    /// `spin` busy-polls through the measured window, as ib_write_bw does (the default: the
    /// highest bandwidth; on Soft-RoCE the polling thread runs at idle CPU priority, since kernel
    /// threads on the same CPUs move the data, and the log says so); `adaptive` spins while
    /// completions come often and sleeps in short steps when the next one is over a
    /// millisecond away, never letting the send queue run dry: for slow links or huge messages
    /// on a shared CPU (on Soft-RoCE it saves most of the CPU but costs bandwidth); with
    /// either, a -D test's warm-up and cool-down are polled adaptively: they are not measured.
    /// `event` is -e: sleep on the CQ's completion channel between completions, in every phase.
    #[arg(
        long = "poll",
        value_name = "MODE",
        value_enum,
        default_value_t = PollArg::Spin,
        hide_possible_values = true,
        conflicts_with = "use_event"
    )]
    pub poll: PollArg,

    /// Poll the queue pairs on this CPU.
    ///
    /// Default: the first allowed CPU of the NIC's NUMA node, as perftest pins itself, when the
    /// node is known; each row's polling_cpu says where.
    #[arg(long, value_name = "N", conflicts_with = "no_numa_bind")]
    pub cpu: Option<u32>,

    /// Leave the polling thread to the scheduler.
    ///
    /// No NUMA binding: wherever the scheduler puts it.
    #[arg(hide_short_help = true, long = "no-numa-bind")]
    pub no_numa_bind: bool,

    /// Local ACK timeout exponent (ib_write_bw -u).
    ///
    /// 0-31: 4.096 us * 2^N.
    #[arg(short = 'u', long = "qp-timeout", value_name = "N", value_parser = qp_timeout_arg)]
    pub qp_timeout: Option<u8>,

    /// Transport retry count, 0-7.
    #[arg(
        hide_short_help = true,
        long = "retry-count",
        alias = "retry_count",
        value_name = "N",
        value_parser = retry_count_arg
    )]
    pub retry_count: Option<u8>,

    /// GRH hop limit (the IP TTL on RoCE v2).
    #[arg(
        hide_short_help = true,
        short = 'L',
        long = "hop-limit",
        alias = "hop_limit",
        value_name = "N"
    )]
    pub hop_limit: Option<u8>,
}

/// The control channel: its port, the peer's tool, the run's secret, the client's patience.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Control channel")]
pub struct ControlArgs {
    /// Control port (ib_write_bw -p).
    #[arg(
        short = 'p',
        long = "port",
        value_name = "PORT",
        default_value_t = 18515
    )]
    pub port: u16,

    /// Which tool the other end runs: rdmabw or perftest (ib_write_bw, ib_write_lat).
    ///
    /// auto (the default) finds out from the peer's first message, without breaking a perftest
    /// server; rdmabw speaks only rdmabw (a client then also reaches an older rdmabw server);
    /// perftest speaks only perftest's exchange.
    #[arg(
        long,
        value_name = "TOOL",
        value_enum,
        default_value_t = PeerArg::Auto,
        hide_short_help = true
    )]
    pub peer: PeerArg,

    /// The run's secret on the first line of stdin.
    ///
    /// Or set RDMABW_SECRET. A server given one serves only the clients that present it and
    /// refuses the others by name; a client presents it. railsweep hands one to its daemon and
    /// clients this way, so that the daemon it starts on the node's network serves only its own
    /// sweep. Never give a secret on the command line: other processes can read it there.
    #[arg(hide_short_help = true, long = "secret-stdin")]
    pub secret_stdin: bool,

    /// Client: seconds to keep trying to reach the server.
    #[arg(
        long = "connect-timeout",
        value_name = "SECONDS",
        default_value_t = 10.0
    )]
    pub connect_timeout: f64,
}

/// A bandwidth test's rate limiter (ib_write_bw's, in software).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Rate limiter")]
pub struct RateLimitArgs {
    /// Send no faster than RATE (ib_write_bw).
    ///
    /// In --rate_units, Gb/s by default: a software limiter on this side's writes, all QPs
    /// together, posting from a bucket of --burst_size writes. The measured bandwidth then sits
    /// at the limit.
    #[arg(
        long = "rate_limit",
        alias = "rate-limit",
        value_name = "RATE",
        allow_negative_numbers = true
    )]
    pub rate_limit: Option<f64>,

    /// g Gb/s (the default), M MiB/s, p writes/s.
    ///
    /// What --rate_limit counts (ib_write_bw --rate_units): Gb/s is 10^9 bit/s, MiB/s 2^20
    /// byte/s.
    #[arg(
        hide_short_help = true,
        long = "rate_units",
        alias = "rate-units",
        value_name = "UNIT"
    )]
    pub rate_units: Option<String>,

    /// The limiter's bucket, in writes.
    ///
    /// Writes sent at once after a pause (ib_write_bw --burst_size; default the send queue
    /// depth, -t).
    #[arg(
        hide_short_help = true,
        long = "burst_size",
        alias = "burst-size",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub burst_size: Option<i64>,

    /// SW only (ib_write_bw --rate_limit_type).
    ///
    /// rdmabw's limiter is in software; the NIC's (HW) and packet pacing (PP) are refused by name.
    #[arg(
        hide_short_help = true,
        long = "rate_limit_type",
        alias = "rate-limit-type",
        value_name = "TYPE"
    )]
    pub rate_limit_type: Option<String>,
}

/// A bandwidth test's buffer in GPU memory.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "GPU")]
pub struct GpuArgs {
    /// This side's buffer in a GPU: an index, or auto.
    ///
    /// As ib_write_bw --use_cuda: a CUDA GPU index, or auto: the GPU nearest this side's NIC
    /// (same PCIe switch, else root port, host bridge, NUMA node).
    #[arg(long = "use_cuda", alias = "use-cuda", value_name = "GPU")]
    pub use_cuda: Option<String>,

    /// The GPU by PCI bus id; implies --use_cuda.
    ///
    /// 0000:0f:00.0; nvidia-smi's spelling works too.
    #[arg(hide_short_help = true,
        long = "cuda-bus-id",
        aliases = ["cuda_bus_id", "use_cuda_bus_id"],
        value_name = "BUS_ID"
    )]
    pub cuda_bus_id: Option<String>,

    /// How GPU memory is registered: dmabuf, peermem, auto.
    ///
    /// dmabuf: export a dma-buf, ibv_reg_dmabuf_mr; peermem: nvidia_peermem; auto: dma-buf when
    /// the GPU and NIC can, else peermem.
    #[arg(long = "cuda-mem", alias = "cuda_mem", value_name = "PATH")]
    pub cuda_mem: Option<String>,

    /// ib_write_bw's spelling of --cuda-mem dmabuf.
    #[arg(
        hide_short_help = true,
        long = "use_cuda_dmabuf",
        conflicts_with = "cuda_mem"
    )]
    pub use_cuda_dmabuf: bool,
}

/// What every test prints, and where.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// One JSON document (a BwReport) on stdout.
    #[arg(long)]
    pub json: bool,

    /// CSV rows on stdout (a header, a row per size).
    #[arg(long)]
    pub csv: bool,

    /// Bandwidth in Gb/s, not MB/sec.
    ///
    /// Gb/s is 10^9 bit/s; MB/sec, ib_write_bw's default unit, is 2^20 bytes/s.
    #[arg(long = "report_gbits", alias = "report-gbits")]
    pub report_gbits: bool,

    /// With -b, also a table per direction.
    #[arg(long = "report-both", alias = "report_both")]
    pub report_both: bool,

    /// Also write the JSON document to a file.
    ///
    /// To perftest_out.json, or to --out_json_file.
    #[arg(long = "out_json")]
    pub out_json: bool,

    /// Write the JSON document to FILE (implies --out_json).
    #[arg(long = "out_json_file", value_name = "FILE")]
    pub out_json_file: Option<PathBuf>,

    /// Accepted, ignored (ib_write_bw -N).
    ///
    /// rdmabw's peak comes from 10 ms intervals and costs nothing to compute.
    #[arg(hide_short_help = true, short = 'N', long = "noPeak")]
    pub no_peak: bool,

    /// No progress lines on stderr (errors still shown).
    #[arg(long)]
    pub quiet: bool,
}

/// A bandwidth test's thresholds and figures.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Output")]
pub struct BwOutputArgs {
    #[command(flatten)]
    pub thresholds: ThresholdFlags,

    /// Exit 1 below this bandwidth (ib_write_bw -w).
    ///
    /// The average, in the table's unit (Gb/s with --report_gbits, else MB/sec of 2^20 bytes).
    #[arg(
        short = 'w',
        long = "limit_bw",
        value_name = "BW",
        conflicts_with = "min_gbps"
    )]
    pub limit_bw: Option<f64>,

    /// Exit 1 below this message rate, Mpps (ib_write_bw -y).
    ///
    /// The message rate of the largest size.
    #[arg(short = 'y', long = "limit_msgrate", value_name = "MPPS")]
    pub limit_msgrate: Option<f64>,

    /// Add a CPU_Util[%] column to the table.
    ///
    /// This process's CPU time over the window, in percent of one CPU (ib_write_bw measures the
    /// whole machine's).
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,

    /// What stdout carries: one figure, or a format.
    ///
    /// bandwidth (in the table's unit) or message_rate (Mpps) of the largest size, as
    /// ib_write_bw --output; or table, json, csv (as --json, --csv), as railsweep's -o.
    #[arg(
        long = "output",
        value_name = "FIGURE",
        value_enum,
        hide_possible_values = true
    )]
    pub output_figure: Option<FigureArg>,
}

/// A bandwidth test's counter deltas.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Output")]
pub struct CountersArgs {
    /// Counter deltas after the table (ib_write_bw -W).
    ///
    /// Of these counters on each side: `counters/port_xmit_data,hw_counters/out_of_buffer`; a
    /// bare name matches any source; `all`: every counter that moved. Counters are read for
    /// every test: the report's `counters` and the findings on stderr do not need this flag.
    #[arg(
        short = 'W',
        long = "report-counters",
        alias = "report_counters",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub report_counters: Option<Vec<String>>,
}

/// A server's flags: how long it serves, where it listens, what it allows one test.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Server")]
pub struct ServerArgs {
    /// Server: serve test after test.
    ///
    /// On one port, several at once on different devices; a second client for a device in use is
    /// told it is busy.
    #[arg(long)]
    pub daemon: bool,

    /// Server --daemon: stop at the end of standard input.
    ///
    /// For launchers: after the secret (--secret-stdin), watch standard input and stop as on
    /// SIGTERM at its end (but exit 0, where a signal is 130), so that the daemon ends with the
    /// session that started it (railsweep closes its exec's input). Not the default: a daemon started with its input at /dev/null
    /// would stop at once.
    #[arg(long = "exit-on-stdin-eof")]
    pub exit_on_stdin_eof: bool,

    /// Server: the addresses to listen on.
    ///
    /// Comma-separated, each an address of this host. railsweep's daemons listen on their rails'
    /// addresses only, not on the node's network.
    #[arg(long, value_name = "ADDR[,ADDR...]", default_value = BIND_DEFAULT)]
    pub bind: String,

    /// Server: the most queue pairs of one test.
    ///
    /// A client asking for more (-q) is refused with this limit's name.
    #[arg(
        long = "max-qps",
        value_name = "N",
        default_value_t = ServerLimits::DEFAULT.max_qps
    )]
    pub max_qps: u32,

    /// Server: the most memory one test registers.
    ///
    /// Twice its largest message (bytes, or 64K, 512M, 2G); a client asking for more is refused
    /// with this limit's name.
    #[arg(long = "max-buffer", value_name = "SIZE", default_value = MAX_BUFFER_DEFAULT)]
    pub max_buffer: String,

    /// Server --daemon: the most tests at once.
    ///
    /// A client beyond that is refused (with this limit's name) until a test ends.
    #[arg(
        long = "max-tests",
        value_name = "N",
        default_value_t = ServerLimits::DEFAULT.max_tests
    )]
    pub max_tests: u32,
}

impl ServerArgs {
    /// The flags that differ from their defaults (the values clap fills in when they are
    /// absent), by name: what a client given them was told to give a server.
    pub fn given(&self) -> Vec<&'static str> {
        let d = ServerLimits::DEFAULT;
        [
            (self.daemon, "--daemon"),
            (self.exit_on_stdin_eof, "--exit-on-stdin-eof"),
            (self.max_qps != d.max_qps, "--max-qps"),
            (self.max_buffer != MAX_BUFFER_DEFAULT, "--max-buffer"),
            (self.max_tests != d.max_tests, "--max-tests"),
            (self.bind != BIND_DEFAULT, "--bind"),
        ]
        .into_iter()
        .filter_map(|(set, flag)| set.then_some(flag))
        .collect()
    }
}

/// `-u`: the ACK timeout exponent, 0-31.
fn qp_timeout_arg(s: &str) -> Result<u8, String> {
    match s.trim().parse::<u8>() {
        Ok(n) if n <= 31 => Ok(n),
        _ => Err(format!(
            "the ACK timeout exponent is 0-31 (default 14 = 67 ms), got `{s}`"
        )),
    }
}

/// `--retry-count`: 0-7.
fn retry_count_arg(s: &str) -> Result<u8, String> {
    match s.trim().parse::<u8>() {
        Ok(n) if n <= 7 => Ok(n),
        _ => Err(format!("the retry count is 0-7, got `{s}`")),
    }
}

/// `--output` values: what stdout carries, as in railsweep's `-o`: ib_write_bw's one figure
/// (`bandwidth`, `message_rate`; `latency` is its latency tests'), or a whole format (`table`,
/// `json`, `csv`: the same as leaving it out, `--json`, `--csv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FigureArg {
    /// The average bandwidth, in the table's unit.
    Bandwidth,
    /// The message rate, Mpps.
    #[value(name = "message_rate")]
    MessageRate,
    /// The table (the default).
    Table,
    /// One JSON document, as --json.
    Json,
    /// CSV rows, as --csv.
    Csv,
}

/// `--peer` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerArg {
    /// rdmabw or perftest, from the peer's first message.
    #[default]
    Auto,
    /// rdmabw only.
    Rdmabw,
    /// perftest only.
    Perftest,
}

/// `--poll` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum PollArg {
    /// Always busy-poll (ib_write_bw's way).
    #[default]
    Spin,
    /// Spin, and sleep briefly when completions are far apart.
    Adaptive,
    /// Sleep on completion events (-e).
    Event,
}

//! The raw command line (clap derive). Nothing here is validated beyond types; `config`
//! resolves it into a [`crate::config::Config`] before any work starts.

use std::path::PathBuf;

use bench_core::session::ServerLimits;
use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "RDMA WRITE bandwidth over one rail: a drop-in for perftest's ib_write_bw \
with JSON/CSV output, GID choice that works inside pods, and a control channel that never hangs.";

const LONG_ABOUT: &str = "\
RDMA WRITE bandwidth over one rail: a drop-in for perftest's ib_write_bw.

Like ib_write_bw, `rdmabw [flags]` serves one test and `rdmabw [flags] HOST` runs one against
that server; `rdmabw server` and `rdmabw client HOST` say the same explicitly. The flags that
scripts pass to ib_write_bw keep their meaning, and the result table keeps its layout, so
`awk '/^ 65536/ {print $4}'` still reads the average bandwidth.

Unlike ib_write_bw: without -x the GID is chosen for you (the RoCE v2 IPv4 GID of an interface of
this network namespace, never an empty one); --netdev names a rail by its interface; both ends
compare their parameters and name any that differ; a peer that dies or goes silent ends the test
on both sides within seconds; `--json` prints one typed document; `--daemon` serves test after
test, on several devices at once, for orchestrators.";

/// The long help: what rdmabw is, then its exit statuses (declared in [`crate::exit`]).
fn long_about() -> String {
    format!("{LONG_ABOUT}\n\n{}", crate::exit::HELP)
}

const EXAMPLES: &str = "\
Examples (the ib_write_bw line each one replaces first):

  # ib_write_bw -d mlx5_3 -x 3 -F --report_gbits -D 5            (server)
  # ib_write_bw -d mlx5_3 -x 3 -F --report_gbits -D 5 10.0.3.2   (client)
  rdmabw -d mlx5_3 -F --report_gbits -D 5
  rdmabw -d mlx5_3 -F --report_gbits -D 5 10.0.3.2

  # One rail by its interface; the GID is found, whatever its index in this pod:
  rdmabw server --netdev net4 -D 5
  rdmabw client --netdev net4 -D 5 --report_gbits 10.224.3.2

  # ib_write_bw -a -F --report_gbits 10.0.3.2  (sweep 2 B .. 8 MiB)
  rdmabw -a --report_gbits 10.0.3.2

  # Traffic class 41 (DSCP 10, ECN 01 in the IPv4 TOS byte), 4 QPs, MTU 4096, both directions:
  rdmabw client --tclass 41 -q 4 -m 4096 -b -D 10 10.0.3.2

  # One server per pod for every rail, several tests at once on different devices:
  rdmabw server --daemon -p 18515
  rdmabw client --json --netdev net1 --server-netdev net1 -D 5 10.224.0.2

  # Fail a CI job below 90% of the port's line rate:
  rdmabw client --netdev net1 -D 10 --min-line-rate-pct 90 10.224.0.2

  # Every device, port and GID table entry, marking GIDs this namespace cannot use:
  rdmabw devices";

/// The end of `-h`: the forms a newcomer needs first, and where the rest is.
pub const SHORT_EXAMPLES: &str = "\
Examples:
  rdmabw -d mlx5_3 -F --report_gbits -D 5               # server, as ib_write_bw
  rdmabw -d mlx5_3 -F --report_gbits -D 5 10.0.3.2      # client
  rdmabw client --netdev net4 -D 5 --json 10.224.3.2    # one rail by its interface, JSON

--help: every flag (a few are left out here) in full, the exit statuses, more examples.";

/// `--bind` when it is not given: every address.
pub const BIND_DEFAULT: &str = "0.0.0.0";
/// `--max-buffer` when it is not given.
pub const MAX_BUFFER_DEFAULT: &str = "1G";

/// `rdmabw`: the top level, which also takes the bare ib_write_bw form.
#[derive(Debug, Parser)]
#[command(
    name = "rdmabw",
    version = results::VERSION,
    about = ABOUT,
    long_about = long_about(),
    after_help = SHORT_EXAMPLES,
    after_long_help = EXAMPLES,
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
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Serve one test, as ib_write_bw without a HOST; --daemon: test after test.
    ///
    /// Without --daemon it exits after one test, as ib_write_bw; with it, it serves test after
    /// test on one port, several at once on different devices.
    #[command(after_help = SHORT_EXAMPLES, after_long_help = EXAMPLES)]
    Server(ServerCmd),
    /// Run one test against an rdmabw server, like ib_write_bw HOST.
    #[command(after_help = SHORT_EXAMPLES, after_long_help = EXAMPLES)]
    Client(ClientCmd),
    /// RDMA WRITE latency, as ib_write_lat (`rdmabw lat` on both ends).
    ///
    /// Serve one test, or with HOST measure against that server.
    Lat(crate::lat::LatCmd),
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

#[derive(Debug, Args)]
pub struct BatchCmd {
    /// The first line of standard input is the run's secret, presented by every test (or set
    /// RDMABW_SECRET); the tests' lines follow it.
    #[arg(long = "secret-stdin")]
    pub secret_stdin: bool,
}

const BATCH_ABOUT: &str = "\
Run client tests one after another in this one process, for orchestrators (railsweep uses it to
sweep rails without starting a process, and an exec through the Kubernetes API, per rail).

Each line of standard input is a JSON array of the arguments of one `rdmabw client` command,
without the program name: [\"client\",\"--json\",\"-D\",\"3\",\"--netdev\",\"net1\",\"10.0.0.2\"]. The test
runs as that command would, printing what it would print, and then this line goes to standard
output and to standard error, so that both streams can be split per test:

  rdmabw-batch-end {\"test\":1,\"exit_code\":0}

(test counts lines from 1; exit_code is what the command would have exited with). Only client
commands are accepted. SIGINT or SIGTERM ends the test in progress and the batch (exit 130); end
of input ends the batch (exit 0).

  printf '%s\\n' '[\"client\",\"--json\",\"--netdev\",\"net1\",\"-D\",\"3\",\"10.224.0.2\"]' \\
                '[\"client\",\"--json\",\"--netdev\",\"net2\",\"-D\",\"3\",\"10.224.1.2\"]' | rdmabw batch";

/// `rdmabw server`: the test flags, less the client's (refused by name when given).
#[derive(Debug, Args)]
#[command(mut_arg("server_dev", |a| a.hide(true)))]
#[command(mut_arg("server_netdev", |a| a.hide(true)))]
#[command(mut_arg("server_gid_index", |a| a.hide(true)))]
pub struct ServerCmd {
    #[command(flatten)]
    pub test: TestArgs,
}

/// `rdmabw client`: the test flags, less the server's (refused by name when given).
#[derive(Debug, Args)]
#[command(mut_arg("daemon", |a| a.hide(true)))]
#[command(mut_arg("exit_on_stdin_eof", |a| a.hide(true)))]
#[command(mut_arg("bind", |a| a.hide(true)))]
#[command(mut_arg("max_qps", |a| a.hide(true)))]
#[command(mut_arg("max_buffer", |a| a.hide(true)))]
#[command(mut_arg("max_tests", |a| a.hide(true)))]
pub struct ClientCmd {
    /// The server's control address (host name or IP).
    #[arg(value_name = "HOST")]
    pub host: String,
    #[command(flatten)]
    pub test: TestArgs,
}

/// Flags of `rdmabw counters`.
#[derive(Debug, Args)]
pub struct CountersCmd {
    /// RDMA device; default: the one behind --netdev.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub ib_dev: Option<String>,
    /// Port of the device (default: that of --netdev, else 1).
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u8>,
    /// The rail's interface (its statistics are read too); default: the interface of this
    /// network namespace that owns GIDs of the device's port, when there is one.
    #[arg(long, value_name = "IF")]
    pub netdev: Option<String>,
    /// One JSON document (a CountersReport) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Read ROOT/sys instead of /sys (fixture trees); ethtool statistics are then not read.
    #[arg(long, value_name = "ROOT")]
    pub root: Option<PathBuf>,
}

/// Flags of `rdmabw probe`.
#[derive(Debug, Args)]
pub struct ProbeCmd {
    /// One JSON document (a ProbeReport) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `rdmabw rails`.
#[derive(Debug, Args)]
pub struct RailsCmd {
    /// One JSON document (a RailsReport, what railsweep reads) instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Do not open the devices: the active MTU is derived from the interface MTU.
    #[arg(long = "no-verbs")]
    pub no_verbs: bool,

    /// Read ROOT/sys, ROOT/proc and ROOT/dev instead of /sys, /proc and /dev (fixture trees,
    /// or a copy of a pod's view); implies --no-verbs.
    #[arg(long, value_name = "ROOT")]
    pub root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GpusCmd {
    /// One JSON document instead of the table (or the steps).
    #[arg(long)]
    pub json: bool,
    /// Test a GPU buffer: allocate, export a dma-buf, write and read a pattern through CUDA,
    /// (with -d) register the dma-buf with that RDMA device, free; each step is reported.
    #[arg(long)]
    pub selftest: bool,
    /// Register a host dma-buf (from /dev/udmabuf) on -d DEV: does this NIC take dma-buf memory
    /// at all? No GPU needed.
    #[arg(long = "dmabuf-check")]
    pub dmabuf_check: bool,
    /// --selftest: the GPU, an index or auto (nearest -d DEV); default 0.
    #[arg(long = "use_cuda", alias = "use-cuda", value_name = "GPU")]
    pub use_cuda: Option<String>,
    /// --selftest: the GPU by PCI bus id.
    #[arg(long = "cuda-bus-id", alias = "cuda_bus_id", value_name = "BUS_ID")]
    pub cuda_bus_id: Option<String>,
    /// The RDMA device to register on.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub ib_dev: Option<String>,
    /// Bytes of the test buffer (default 2M).
    #[arg(short = 's', long = "size", value_name = "BYTES")]
    pub size: Option<String>,
}

#[derive(Debug, Args)]
pub struct DevicesCmd {
    /// One JSON document instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Read ROOT/sys, ROOT/proc and ROOT/dev instead of /sys, /proc and /dev (fixture trees,
    /// or a copy of a pod's view); the devices are not opened (the active MTU is unknown).
    #[arg(long, value_name = "ROOT")]
    pub root: Option<std::path::PathBuf>,
}

/// Every test flag; which apply to which role is checked in `config`.
#[derive(Debug, Args, Default)]
#[command(next_help_heading = "Test (ib_write_bw flags)")]
pub struct TestArgs {
    /// RDMA device (ib_write_bw -d).
    ///
    /// Default: the one that carries --netdev, else the first with a usable GID here.
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub ib_dev: Option<String>,

    /// Port of the device (ib_write_bw -i).
    ///
    /// Default: the port of --netdev, else the first usable.
    #[arg(short = 'i', long = "ib-port", value_name = "PORT")]
    pub ib_port: Option<u8>,

    /// GID index (ib_write_bw -x).
    ///
    /// Default: the RoCE v2 IPv4 GID of an interface of this network namespace (of --netdev when
    /// given).
    #[arg(short = 'x', long = "gid-index", value_name = "INDEX")]
    pub gid_index: Option<u32>,

    /// Accepted, ignored (ib_write_bw -F).
    ///
    /// rdmabw does not read the CPU frequency.
    #[arg(hide_short_help = true, short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,

    /// Bandwidth in Gb/s, not MB/sec.
    ///
    /// Gb/s is 10^9 bit/s; MB/sec, ib_write_bw's default unit, is 2^20 bytes/s.
    #[arg(long = "report_gbits", alias = "report-gbits")]
    pub report_gbits: bool,

    /// Seconds per size in all (ib_write_bw -D).
    ///
    /// As ib_write_bw: the first and last -f seconds (default a quarter of -D, in whole seconds)
    /// are warm-up and cool-down, the middle is measured.
    #[arg(short = 'D', long = "duration", value_name = "SECONDS")]
    pub duration: Option<f64>,

    /// Measure exactly this many seconds per size.
    ///
    /// With --warmup before and --cooldown after it (what railsweep runs; -D's perftest timing
    /// measures less than -D).
    #[arg(long, value_name = "SECONDS", conflicts_with = "duration")]
    pub window: Option<f64>,

    /// RDMA WRITEs per QP (ib_write_bw -n).
    ///
    /// Default 5000 when -D is not given.
    #[arg(short = 'n', long = "iters", value_name = "N")]
    pub iters: Option<u64>,

    /// Control port (ib_write_bw -p).
    #[arg(
        short = 'p',
        long = "port",
        value_name = "PORT",
        default_value_t = 18515
    )]
    pub port: u16,

    /// Sweep sizes 2 B .. 8 MiB (ib_write_bw -a).
    #[arg(short = 'a', long = "all")]
    pub all: bool,

    /// The test flags railsweep passes through, defined once for both binaries (-s, -q,
    /// --tclass, -b, --sl, -t, -Q, -l, -I, -e, --data_validation, -m, --min-gbps,
    /// --min-line-rate-pct, --warmup, --cooldown). rdmabw's -D, -f, -a, --use_cuda and -p
    /// stay here: railsweep's flags of those names mean something else (see
    /// `results::rdmabw::flags`).
    #[command(flatten)]
    pub flags: results::rdmabw::flags::TestFlags,

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
    #[arg(long = "no-numa-bind")]
    pub no_numa_bind: bool,

    /// Local ACK timeout exponent (ib_write_bw -u).
    ///
    /// 0-31: 4.096 us * 2^N.
    #[arg(short = 'u', long = "qp-timeout", value_name = "N")]
    pub qp_timeout: Option<u8>,

    /// Transport retry count, 0-7.
    #[arg(long = "retry-count", alias = "retry_count", value_name = "N")]
    pub retry_count: Option<u8>,

    /// GRH hop limit (the IP TTL on RoCE v2).
    #[arg(short = 'L', long = "hop-limit", alias = "hop_limit", value_name = "N")]
    pub hop_limit: Option<u8>,

    /// Connection type (ib_write_bw -c); only RC.
    #[arg(
        hide_short_help = true,
        short = 'c',
        long = "connection",
        value_name = "TYPE"
    )]
    pub connection: Option<String>,

    /// Repeat the window until stopped, a row each.
    ///
    /// As ib_write_bw --run_infinitely, until SIGINT/SIGTERM: -D (or --window) SECONDS is the
    /// reporting interval, the first window follows a short warm-up, and the writes never pause
    /// between windows. The table, --json (a BwReport per line) and --csv (a header, then a row
    /// per window) are written as a stream; then exit 130. One size, one direction; the server
    /// follows.
    #[arg(long = "run_infinitely", alias = "run-infinitely")]
    pub run_infinitely: bool,

    /// Send no faster than RATE (ib_write_bw).
    ///
    /// In --rate_units, Gb/s by default: a software limiter on this side's writes, all QPs
    /// together, posting from a bucket of --burst_size writes. The measured bandwidth then sits
    /// at the limit.
    #[arg(
        long = "rate_limit",
        alias = "rate-limit",
        value_name = "RATE",
        allow_negative_numbers = true,
        help_heading = "Rate limiter"
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
        value_name = "UNIT",
        help_heading = "Rate limiter"
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
        allow_negative_numbers = true,
        help_heading = "Rate limiter"
    )]
    pub burst_size: Option<i64>,

    /// SW only (ib_write_bw --rate_limit_type).
    ///
    /// rdmabw's limiter is in software; the NIC's (HW) and packet pacing (PP) are refused by name.
    #[arg(
        hide_short_help = true,
        long = "rate_limit_type",
        alias = "rate-limit-type",
        value_name = "TYPE",
        help_heading = "Rate limiter"
    )]
    pub rate_limit_type: Option<String>,

    /// Warm-up and cool-down inside -D (ib_write_bw -f).
    ///
    /// Seconds of each inside each -D test; default a quarter of -D, in whole seconds.
    #[arg(short = 'f', long = "margin", value_name = "SECONDS")]
    pub margin: Option<f64>,

    /// This side's buffer in a GPU: an index, or auto.
    ///
    /// As ib_write_bw --use_cuda: a CUDA GPU index, or auto: the GPU nearest this side's NIC
    /// (same PCIe switch, else root port, host bridge, NUMA node).
    #[arg(
        long = "use_cuda",
        alias = "use-cuda",
        value_name = "GPU",
        help_heading = "GPU"
    )]
    pub use_cuda: Option<String>,

    /// The GPU by PCI bus id; implies --use_cuda.
    ///
    /// 0000:0f:00.0; nvidia-smi's spelling works too.
    #[arg(hide_short_help = true,
        long = "cuda-bus-id",
        aliases = ["cuda_bus_id", "use_cuda_bus_id"],
        value_name = "BUS_ID",
        help_heading = "GPU"
    )]
    pub cuda_bus_id: Option<String>,

    /// How GPU memory is registered: dmabuf, peermem, auto.
    ///
    /// dmabuf: export a dma-buf, ibv_reg_dmabuf_mr; peermem: nvidia_peermem; auto: dma-buf when
    /// the GPU and NIC can, else peermem.
    #[arg(
        long = "cuda-mem",
        alias = "cuda_mem",
        value_name = "PATH",
        help_heading = "GPU"
    )]
    pub cuda_mem: Option<String>,

    /// ib_write_bw's spelling of --cuda-mem dmabuf.
    #[arg(
        hide_short_help = true,
        long = "use_cuda_dmabuf",
        help_heading = "GPU",
        conflicts_with = "cuda_mem"
    )]
    pub use_cuda_dmabuf: bool,

    /// The rail by its interface (picks device and GID).
    #[arg(long, value_name = "IFACE", help_heading = "Rail")]
    pub netdev: Option<String>,

    /// Client: the server's device.
    #[arg(long = "server-dev", value_name = "DEV", help_heading = "Rail")]
    pub server_dev: Option<String>,

    /// Client: the server's interface.
    ///
    /// It picks the server's device and GID.
    #[arg(long = "server-netdev", value_name = "IFACE", help_heading = "Rail")]
    pub server_netdev: Option<String>,

    /// Client: the server's GID index.
    #[arg(long = "server-gid-index", value_name = "INDEX", help_heading = "Rail")]
    pub server_gid_index: Option<u32>,

    /// Server: serve test after test.
    ///
    /// On one port, several at once on different devices; a second client for a device in use is
    /// told it is busy.
    #[arg(long, help_heading = "Server")]
    pub daemon: bool,

    /// Server --daemon: stop at the end of standard input.
    ///
    /// For launchers: after the secret (--secret-stdin), watch standard input and stop as on
    /// SIGTERM at its end, so that the daemon ends with the session that started it (railsweep
    /// closes its exec's input). Not the default: a daemon started with its input at /dev/null
    /// would stop at once.
    #[arg(long = "exit-on-stdin-eof", help_heading = "Server")]
    pub exit_on_stdin_eof: bool,

    /// Server: the addresses to listen on.
    ///
    /// Comma-separated, each an address of this host. railsweep's daemons listen on their rails'
    /// addresses only, not on the node's network.
    #[arg(
        long,
        value_name = "ADDR[,ADDR...]",
        default_value = BIND_DEFAULT,
        help_heading = "Server"
    )]
    pub bind: String,

    /// Server: the most queue pairs of one test.
    ///
    /// A client asking for more (-q) is refused with this limit's name.
    #[arg(
        long = "max-qps",
        value_name = "N",
        default_value_t = ServerLimits::DEFAULT.max_qps,
        help_heading = "Server"
    )]
    pub max_qps: u32,

    /// Server: the most memory one test registers.
    ///
    /// Twice its largest message (bytes, or 64K, 512M, 2G); a client asking for more is refused
    /// with this limit's name.
    #[arg(
        long = "max-buffer",
        value_name = "SIZE",
        default_value = MAX_BUFFER_DEFAULT,
        help_heading = "Server"
    )]
    pub max_buffer: String,

    /// Server --daemon: the most tests at once.
    ///
    /// A client beyond that is refused (with this limit's name) until a test ends.
    #[arg(
        long = "max-tests",
        value_name = "N",
        default_value_t = ServerLimits::DEFAULT.max_tests,
        help_heading = "Server"
    )]
    pub max_tests: u32,

    /// The run's secret on the first line of stdin.
    ///
    /// Or set RDMABW_SECRET. A server given one serves only the clients that present it and
    /// refuses the others by name; a client presents it. railsweep hands one to its daemon and
    /// clients this way, so that the daemon it starts on the node's network serves only its own
    /// sweep. Never give a secret on the command line: other processes can read it there.
    #[arg(hide_short_help = true, long = "secret-stdin")]
    pub secret_stdin: bool,

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

    /// Client: seconds to keep trying to reach the server.
    #[arg(
        long = "connect-timeout",
        value_name = "SECONDS",
        default_value_t = 10.0,
        help_heading = "Client"
    )]
    pub connect_timeout: f64,

    /// One JSON document (a BwReport) on stdout.
    #[arg(long, help_heading = "Output")]
    pub json: bool,

    /// CSV rows on stdout (a header, a row per size).
    #[arg(long, help_heading = "Output")]
    pub csv: bool,

    /// Exit 1 below this bandwidth (ib_write_bw -w).
    ///
    /// The average, in the table's unit (Gb/s with --report_gbits, else MB/sec of 2^20 bytes).
    #[arg(
        short = 'w',
        long = "limit_bw",
        value_name = "BW",
        help_heading = "Output",
        conflicts_with = "min_gbps"
    )]
    pub limit_bw: Option<f64>,

    /// Exit 1 below this message rate, Mpps (ib_write_bw -y).
    ///
    /// The message rate of the largest size.
    #[arg(
        short = 'y',
        long = "limit_msgrate",
        value_name = "MPPS",
        help_heading = "Output"
    )]
    pub limit_msgrate: Option<f64>,

    /// Add a CPU_Util[%] column to the table.
    ///
    /// This process's CPU time over the window, in percent of one CPU (ib_write_bw measures the
    /// whole machine's).
    #[arg(long = "cpu_util", help_heading = "Output")]
    pub cpu_util: bool,

    /// With -b, also a table per direction.
    #[arg(long = "report-both", alias = "report_both", help_heading = "Output")]
    pub report_both: bool,

    /// Print only this figure of the largest size.
    ///
    /// bandwidth (in the table's unit) or message_rate (Mpps), as ib_write_bw --output.
    #[arg(
        long = "output",
        value_name = "FIGURE",
        value_enum,
        hide_possible_values = true,
        help_heading = "Output"
    )]
    pub output_figure: Option<FigureArg>,

    /// Also write the JSON document to a file.
    ///
    /// To perftest_out.json, or to --out_json_file.
    #[arg(long = "out_json", help_heading = "Output")]
    pub out_json: bool,

    /// Write the JSON document to FILE (implies --out_json).
    #[arg(long = "out_json_file", value_name = "FILE", help_heading = "Output")]
    pub out_json_file: Option<std::path::PathBuf>,

    /// Accepted, ignored (ib_write_bw -N).
    ///
    /// rdmabw's peak comes from 10 ms intervals and costs nothing to compute.
    #[arg(
        hide_short_help = true,
        short = 'N',
        long = "noPeak",
        help_heading = "Output"
    )]
    pub no_peak: bool,

    /// Accepted, ignored (every timed test warms up).
    #[arg(hide_short_help = true, long = "perform_warm_up")]
    pub perform_warm_up: bool,

    /// No progress lines on stderr (errors still shown).
    #[arg(long, help_heading = "Output")]
    pub quiet: bool,

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
        value_delimiter = ',',
        help_heading = "Output"
    )]
    pub report_counters: Option<Vec<String>>,
}

/// `--output` values (ib_write_bw's; `latency` is for its latency tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FigureArg {
    /// The average bandwidth, in the table's unit.
    Bandwidth,
    /// The message rate, Mpps.
    #[value(name = "message_rate")]
    MessageRate,
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

#[cfg(test)]
mod tests {
    use super::*;
    use results::rdmabw::flags::{TestFlags, TransportFlags};

    /// What rdmabw's own parser makes of `rdmabw client ARGV... HOST` and of the bare
    /// ib_write_bw form `rdmabw ARGV... HOST`: the test flags of both.
    fn parsed(argv: &[String]) -> [TestFlags; 2] {
        let client = ["rdmabw", "client"]
            .into_iter()
            .map(String::from)
            .chain(argv.iter().cloned())
            .chain(["10.0.0.2".to_string()]);
        let client = match Cli::try_parse_from(client).map(|c| c.cmd) {
            Ok(Some(Cmd::Client(c))) => c.test.flags,
            other => panic!("{argv:?}: {other:?}"),
        };
        let bare = ["rdmabw"]
            .into_iter()
            .map(String::from)
            .chain(argv.iter().cloned())
            .chain(["10.0.0.2".to_string()]);
        let bare = match Cli::try_parse_from(bare) {
            Ok(c) if c.cmd.is_none() => c.test.flags,
            other => panic!("{argv:?}: {other:?}"),
        };
        [client, bare]
    }

    /// Every test flag set away from its default (a struct literal without `..`, so that a new
    /// flag cannot be left out of this test): what railsweep writes with `to_argv` is what
    /// rdmabw reads, flag by flag.
    #[test]
    fn test_flags_survive_to_argv_and_rdmabws_parser() {
        let all = TestFlags {
            size: Some(1 << 20),
            qp: Some(4),
            tclass: Some(41),
            transport: TransportFlags {
                bidirectional: true,
                sl: Some(3),
                tx_depth: Some(256),
                cq_mod: Some(8),
                post_list: Some(2),
                inline_size: Some(64),
                data_validation: true,
                use_event: true,
            },
            mtu: Some(2048),
            min_gbps: Some(90.5),
            min_line_rate_pct: Some(87.25),
            warmup: Some(0.3),
            cooldown: Some(0.125),
        };
        let argv = all.to_argv();
        for got in parsed(&argv) {
            assert_eq!(got.size, all.size, "-s in {argv:?}");
            assert_eq!(got.qp, all.qp, "-q in {argv:?}");
            assert_eq!(got.tclass, all.tclass, "--tclass in {argv:?}");
            let (g, w) = (&got.transport, &all.transport);
            assert_eq!(g.bidirectional, w.bidirectional, "-b in {argv:?}");
            assert_eq!(g.sl, w.sl, "--sl in {argv:?}");
            assert_eq!(g.tx_depth, w.tx_depth, "-t in {argv:?}");
            assert_eq!(g.cq_mod, w.cq_mod, "-Q in {argv:?}");
            assert_eq!(g.post_list, w.post_list, "-l in {argv:?}");
            assert_eq!(g.inline_size, w.inline_size, "-I in {argv:?}");
            assert_eq!(g.data_validation, w.data_validation, "--data_validation");
            assert_eq!(g.use_event, w.use_event, "-e in {argv:?}");
            assert_eq!(got.mtu, all.mtu, "-m in {argv:?}");
            assert_eq!(got.min_gbps, all.min_gbps, "--min-gbps in {argv:?}");
            assert_eq!(got.min_line_rate_pct, all.min_line_rate_pct, "{argv:?}");
            assert_eq!(got.warmup, all.warmup, "--warmup in {argv:?}");
            assert_eq!(got.cooldown, all.cooldown, "--cooldown in {argv:?}");
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

    /// Every flag of every rdmabw command has its row in the side-by-side table of
    /// docs/railsweep.md, and that table names no rdmabw flag that is gone.
    #[test]
    fn every_flag_is_in_the_table_of_both_tools() {
        use clap::CommandFactory;
        use results::rdmabw::flag_table::{check, Tool};
        let doc = include_str!("../../docs/railsweep.md");
        if let Err(e) = check(&Cli::command(), doc, Tool::Rdmabw) {
            panic!("docs/railsweep.md, the flag table:\n{e}");
        }
    }

    /// Numbers railsweep computes (not typed by hand) come back as the same f64.
    #[test]
    fn fractional_seconds_and_rates_read_back_exactly() {
        let f = TestFlags {
            min_gbps: Some(0.1 + 0.2),
            min_line_rate_pct: Some(1.0 / 3.0),
            warmup: Some(1e-9),
            cooldown: Some(604_799.999),
            ..TestFlags::default()
        };
        for got in parsed(&f.to_argv()) {
            assert_eq!(got, f, "{:?}", f.to_argv());
        }
    }
}

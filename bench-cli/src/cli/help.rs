//! What `rdmabw --help` says beyond the flags: what rdmabw is, its examples, the batch's
//! input format.

pub const ABOUT: &str = "RDMA WRITE bandwidth over one rail: a drop-in for perftest's ib_write_bw \
with JSON/CSV output, GID choice that works inside pods, and a control channel that never hangs.";

/// What a test command's `--help` says after its own first lines: what rdmabw is beside
/// ib_write_bw. (The top level's help is a summary: [`ROOT_AFTER`].)
const BESIDE_IB_WRITE_BW: &str = "\
Like ib_write_bw, `rdmabw [flags]` serves one test and `rdmabw [flags] HOST` runs one against
that server; `rdmabw server` and `rdmabw client HOST` say the same explicitly. The flags that
scripts pass to ib_write_bw keep their meaning, and the result table keeps its layout, so
`awk '/^ 65536/ {print $4}'` still reads the average bandwidth.

Unlike ib_write_bw: without -x the GID is chosen for you (the RoCE v2 IPv4 GID of an interface of
this network namespace, never an empty one); --netdev names a rail by its interface; both ends
compare their parameters and name any that differ; a peer that dies or goes silent ends the test
on both sides within seconds; `--json` prints one typed document; `--daemon` serves test after
test, on several devices at once, for orchestrators.";

/// The `--help` of `rdmabw server` and `rdmabw client`: `first` (what the command does), what
/// rdmabw is beside ib_write_bw, and the exit statuses (declared in [`crate::exit`]).
pub fn test_long_about(first: &str) -> String {
    format!("{first}\n\n{BESIDE_IB_WRITE_BW}\n\n{}", crate::exit::HELP)
}

pub const SERVER_LONG: &str = "\
Serve one test, as ib_write_bw without a HOST; --daemon: test after test.

Without --daemon it exits after one test, as ib_write_bw; with it, it serves test after test on
one port, several at once on different devices.";

pub const CLIENT_LONG: &str = "Run one test against an rdmabw server, like ib_write_bw HOST.";

/// The end of the top level's help (`-h` and `--help` alike, issue 56: no longer than
/// ib_write_bw's own help plus the commands' list): the first examples, the exit statuses and
/// where each flag is in full.
pub fn root_after() -> String {
    format!("{ROOT_EXAMPLES}\n\n{}\n\n{ROOT_MORE}", crate::exit::HELP)
}

/// The first examples, in `-h` of the test commands and in the top level's help alike.
macro_rules! first_examples {
    () => {
        "\
Examples:
  rdmabw -d mlx5_3 -F --report_gbits -D 5               # server, as ib_write_bw
  rdmabw -d mlx5_3 -F --report_gbits -D 5 10.0.3.2      # client
  rdmabw client --netdev net4 -D 5 --json 10.224.3.2    # one rail by its interface, JSON"
    };
}

const ROOT_EXAMPLES: &str = first_examples!();

const ROOT_MORE: &str = "\
Every flag in full, and more examples: rdmabw client --help, server --help, lat --help.";

pub const EXAMPLES: &str = "\
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
pub const SHORT_EXAMPLES: &str = concat!(
    first_examples!(),
    "\n\n--help: every flag (a few are left out here) in full, the exit statuses, more examples."
);

/// The end of `rdmabw lat -h`.
pub const LAT_SHORT_EXAMPLES: &str = "\
Examples:
  rdmabw lat -d mlx5_3                  # server, as ib_write_lat -d mlx5_3
  rdmabw lat -d mlx5_3 10.0.3.2         # client: 1000 exchanges of 2 bytes

--help: every flag in full, more examples.";

/// The end of `rdmabw lat --help`.
pub const LAT_EXAMPLES: &str = "\
Examples (the ib_write_lat line each one replaces first):

  # ib_write_lat -d mlx5_3 -x 3              (server)
  # ib_write_lat -d mlx5_3 -x 3 10.0.3.2     (client)
  rdmabw lat -d mlx5_3
  rdmabw lat -d mlx5_3 10.0.3.2

  # One rail by its interface, 64-byte writes, JSON; exit 1 when p99 is above 5 us:
  rdmabw lat --netdev net1 -s 64 -n 10000 --json --max-p99-us 5 10.224.0.2

  # ib_write_lat -a -F 10.0.3.2  (every size 2 B .. 8 MiB), with every sample, sorted:
  rdmabw lat -a -H 10.0.3.2

  # For 5 seconds at one size (t_avg and tps in the table, as ib_write_lat -D):
  rdmabw lat --netdev net1 -D 5 10.224.0.2

  # Against perftest's own ib_write_lat server on the other end:
  rdmabw lat -d mlx5_3 -n 1000 10.0.3.2

  # Scripts that run ib_write_lat run rdmabw through a link of that name:
  ln -s rdmabw ib_write_lat";

pub const BATCH_ABOUT: &str = "\
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

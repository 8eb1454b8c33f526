//! ib_write_bw's and ib_write_lat's flags that rdmabw does not take, each refused by name with
//! what rdmabw does instead, before clap sees them: a script written for perftest learns what to
//! change, not clap's "unexpected argument". The flags rdmabw does take (with perftest's meaning)
//! are in [`crate::cli`]; a test reads the installed ib_write_bw's and ib_write_lat's `--help`
//! and checks that every flag each lists is one or the other.

use crate::exit::Usage;

/// A flag of ib_write_bw that rdmabw refuses: its spellings and why, with what to do instead.
struct Refused {
    /// Long names without the dashes, and short letters as one-character names.
    names: &'static [&'static str],
    /// What it is in ib_write_bw, then what rdmabw does instead.
    why: &'static str,
}

const REFUSED: &[Refused] = &[
    Refused {
        names: &[
            "R",
            "rdma_cm",
            "z",
            "com_rdma_cm",
            "comm_rdma_cm",
            "T",
            "tos",
        ],
        why: "connects QPs through rdma_cm in ib_write_bw; rdmabw connects them over its own TCP \
              control channel (-p) and needs no rdma_cm: leave it out, and give the traffic \
              class with --tclass",
    },
    Refused {
        names: &["O", "dualport", "report-per-port"],
        why: "runs both ports of the device at once in ib_write_bw; rdmabw tests one port (-i): \
              run one test per port, or railsweep for every rail",
    },
    Refused {
        names: &["ipv6"],
        why: "picks an IPv6 GID in ib_write_bw; rdmabw picks the RoCE v2 IPv4-mapped GID of the \
              rail: give an IPv6 GID's index with -x",
    },
    Refused {
        names: &["typical_pkt_size"],
        why: "sizes the packets of ib_write_bw's packet-pacing (PP) rate limiter; rdmabw's \
              limiter is in software (--rate_limit with --rate_units and --burst_size)",
    },
    Refused {
        names: &[
            "odp",
            "mmap",
            "mmap-offset",
            "use_hugepages",
            "mr_per_qp",
            "use_null_mr",
            "use-null-mr",
            "payload_file_path",
        ],
        why: "changes how ib_write_bw allocates or registers its buffers; rdmabw registers one \
              page-aligned buffer per test in host memory, or GPU memory with --use_cuda",
    },
    Refused {
        names: &["bind_source_ip", "ipv6-addr"],
        why: "sets the address of ib_write_bw's connection set-up; rdmabw's control channel \
              connects to HOST, and --bind sets the server's listening address",
    },
    Refused {
        names: &["write_with_imm", "unsolicited_write"],
        why: "changes the verb in ib_write_bw; rdmabw measures plain RDMA WRITE",
    },
    Refused {
        names: &["flow_label"],
        why: "sets the GRH flow label in ib_write_bw; rdmabw leaves it 0 (--tclass and \
              --hop-limit set the rest of the GRH)",
    },
    Refused {
        names: &["congest_type", "no_lock", "no_ddp"],
        why: "is a setting of one vendor's provider (hns, mlx5) in ib_write_bw; rdmabw uses \
              the provider's defaults",
    },
    Refused {
        names: &["reversed"],
        why: "makes the server send in ib_write_bw; with rdmabw the client writes: swap the two \
              commands, or use -b for both directions",
    },
    Refused {
        names: &["c_to_s_out_of_order"],
        why: "is not an RDMA WRITE option rdmabw has",
    },
    Refused {
        names: &[
            "dlid",
            "pkey_index",
            "force-link",
            "source_ip",
            "dont_xchg_versions",
            "use_old_post_send",
            "disable_pcie_relaxed",
            "wait_destroy",
            "recv_post_list",
            "flows",
            "flows_burst",
        ],
        why: "is an ib_write_bw setting rdmabw does not have: it reads the port's LID, P_Key and \
              link layer from sysfs, binds the control channel with --bind, always exchanges \
              versions, posts with ibv_post_send and frees its resources at once",
    },
    Refused {
        names: &[
            "log_dci_streams",
            "log_active_dci_streams",
            "aes_xts",
            "encrypt_on_tx",
            "sig_before",
            "aes_block_size",
            "data_enc_keys_number",
            "kek_path",
            "credentials_path",
            "data_enc_key_app_path",
        ],
        why: "is for DC transport or mlx5 crypto in ib_write_bw; rdmabw runs RC queue pairs in \
              plain text",
    },
    Refused {
        names: &[
            "use_rocm",
            "use_neuron",
            "use_hl",
            "use_mlu",
            "use_opencl",
            "opencl_platform_id",
            "opencl_device_id",
            "gpu_touch",
            "use_cuda_compress",
        ],
        why: "puts the buffer in another accelerator's memory in ib_write_bw; rdmabw takes CUDA \
              GPUs only (--use_cuda)",
    },
];

/// ib_write_lat's flags that `rdmabw lat` refuses by name, beyond ib_write_bw's (those are
/// refused for every mode): flags of a bandwidth test that ib_write_lat takes too.
const LAT_REFUSED: &[Refused] = &[
    Refused {
        names: &["latency_gap"],
        why: "delays each post in ib_write_lat; rdmabw lat runs the ping-pong back to back",
    },
    Refused {
        names: &["cpu_util"],
        why: "shows the CPU's use in ib_write_lat's duration tests; rdmabw lat does not measure \
              CPU",
    },
    Refused {
        names: &["W", "report-counters", "report_counters"],
        why: "reports counter deltas in ib_write_lat; rdmabw lat reports none: read `rdmabw \
              counters` before and after it",
    },
    Refused {
        names: &["output"],
        why: "prints one figure in ib_write_lat; rdmabw lat prints the table, or --json",
    },
];

/// The flag name of an argument: `--name` (before any `=`) or `-X` (the first letter), or
/// `None` for a value or a positional.
fn flag_name(arg: &str) -> Option<&str> {
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or(long);
        return (!name.is_empty()).then_some(name);
    }
    let short = arg.strip_prefix('-')?;
    let first = short.chars().next()?;
    (first.is_ascii_alphabetic()).then(|| &short[..first.len_utf8()])
}

/// The first argument that is a perftest flag rdmabw refuses, as a usage error naming it:
/// ib_write_lat's that `rdmabw lat` lacks when the first argument is `lat`, then ib_write_bw's
/// for every mode. Arguments after `--` are left alone.
pub fn refuse_unsupported<S: AsRef<str>>(args: &[S]) -> Result<(), Usage> {
    if args.first().is_some_and(|a| a.as_ref() == "lat") {
        refuse(args, LAT_REFUSED, "rdmabw lat")?;
    }
    refuse(args, REFUSED, "rdmabw")
}

/// The first argument of `args` that `table` refuses, as a usage error naming it and `tool`.
fn refuse<S: AsRef<str>>(args: &[S], table: &[Refused], tool: &str) -> Result<(), Usage> {
    for arg in args.iter().map(AsRef::as_ref) {
        if arg == "--" {
            break;
        }
        let Some(name) = flag_name(arg) else {
            continue;
        };
        if let Some(r) = table.iter().find(|r| r.names.contains(&name)) {
            let dashes = if name.len() == 1 { "-" } else { "--" };
            return Err(Usage(format!(
                "{dashes}{name}: not supported by {tool}: it {} (see the README's compatibility \
                 table)",
                r.why
            )));
        }
    }
    Ok(())
}

/// Whether rdmabw refuses flag `name` (no dashes) by name.
#[cfg(test)]
pub(crate) fn is_refused(name: &str) -> bool {
    REFUSED.iter().any(|r| r.names.contains(&name))
}

/// Whether `rdmabw lat` refuses flag `name` (no dashes) by name.
#[cfg(test)]
pub(crate) fn lat_refuses(name: &str) -> bool {
    LAT_REFUSED.iter().any(|r| r.names.contains(&name)) || is_refused(name)
}

/// The names of `rdmabw lat`'s own refusals.
#[cfg(test)]
pub(crate) fn lat_refused_names() -> impl Iterator<Item = &'static str> {
    LAT_REFUSED.iter().flat_map(|r| r.names.iter().copied())
}

/// The flags the reference perftest's `--help` lists (`-a`, `--all`, ...), without dashes.
#[cfg(test)]
pub(crate) fn reference_flags(help: &str) -> Vec<String> {
    let mut flags = Vec::new();
    for line in help.lines() {
        for token in line.split_whitespace() {
            let Some(spec) = token.strip_prefix('-') else {
                break;
            };
            let name = spec.trim_start_matches('-').trim_end_matches(',');
            let name = name.split(['=', '[', '<']).next().unwrap_or(name);
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                flags.push(name.to_string());
            }
            if !token.ends_with(',') {
                break;
            }
        }
    }
    flags.sort();
    flags.dedup();
    flags
}

/// Every long name, alias and short letter of `c`'s own arguments.
#[cfg(test)]
pub(crate) fn arg_names(c: &clap::Command) -> Vec<String> {
    let mut names = Vec::new();
    for a in c.get_arguments() {
        names.extend(a.get_long().map(str::to_string));
        names.extend(
            a.get_all_aliases()
                .into_iter()
                .flatten()
                .map(str::to_string),
        );
        names.extend(a.get_short().map(|c| c.to_string()));
        names.extend(
            a.get_all_short_aliases()
                .into_iter()
                .flatten()
                .map(|c| c.to_string()),
        );
    }
    names
}

/// What a flag test checks against the reference perftest `tool` (ib_write_bw, ib_write_lat):
/// each flag its live `--help` lists (the lab's perftest 25.x under scripts/lab.d once scripts/lab
/// --prepare fetched it, else the machine's; at least `at_least` of them, so that a help that
/// did not parse cannot pass) is in `taken` or refused by name: `refuse(ARG)` refuses it with a
/// message that starts with `says(ARG)`. The flags and the counts are printed; the flags are
/// returned for further checks.
#[cfg(test)]
#[allow(clippy::expect_used)]
pub(crate) fn check_reference_flags(
    tool: &str,
    at_least: usize,
    taken: &[String],
    is_refused: impl Fn(&str) -> bool,
    refuse: impl Fn(&str) -> Result<(), Usage>,
    says: impl Fn(&str) -> String,
) -> Vec<String> {
    let lab = format!("{}/../scripts/lab.d/{tool}", env!("CARGO_MANIFEST_DIR"));
    // perftest's --version exits 1; what it prints is what tells.
    let version_of = |bin: &str| {
        std::process::Command::new(bin)
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|v| v.starts_with("Version:"))
    };
    let (reference, version) = match version_of(&lab) {
        Some(v) => (lab.as_str(), v),
        None => (tool, version_of(tool).unwrap_or_default()),
    };
    let out = std::process::Command::new(reference)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| {
            panic!("{tool} is the reference: run scripts/lab --prepare, or install perftest ({e})")
        });
    let help =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let flags = reference_flags(&help);
    assert!(
        flags.len() >= at_least,
        "only {} flags read from {tool} --help:\n{help}",
        flags.len()
    );
    let missing: Vec<&String> = flags
        .iter()
        .filter(|f| !taken.contains(f) && !is_refused(f))
        .collect();
    assert!(
        missing.is_empty(),
        "{tool} flags rdmabw neither takes nor refuses: {missing:?}"
    );
    for f in flags.iter().filter(|f| is_refused(f)) {
        let arg = if f.len() == 1 {
            format!("-{f}")
        } else {
            format!("--{f}")
        };
        let e = refuse(&arg).expect_err("refused");
        assert!(e.0.starts_with(&says(&arg)), "{}", e.0);
    }
    results::say!(
        "{} flags of {reference} --help ({version}): {} taken, {} refused by name",
        flags.len(),
        flags.iter().filter(|f| taken.contains(f)).count(),
        flags.iter().filter(|f| is_refused(f)).count()
    );
    flags
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_refused_flag_is_named_with_what_to_do() {
        let e = refuse_unsupported(&["-d", "mlx5_0", "--typical_pkt_size=512", "10.0.0.2"])
            .unwrap_err();
        assert!(
            e.0.starts_with("--typical_pkt_size: not supported by rdmabw: it sizes"),
            "{}",
            e.0
        );
        assert!(refuse_unsupported(&["--rate_limit=5", "--run_infinitely", "h"]).is_ok());
        let e = refuse_unsupported(&["-R", "10.0.0.2"]).unwrap_err();
        assert!(
            e.0.starts_with("-R: not supported") && e.0.contains("--tclass"),
            "{}",
            e.0
        );
        assert!(refuse_unsupported(&["-d", "mlx5_0", "-s", "64K", "--tclass=41", "h"]).is_ok());
        // Values and what follows -- are not flags.
        assert!(refuse_unsupported(&["--", "-R"]).is_ok());
        assert!(refuse_unsupported(&["-5"]).is_ok());
    }

    /// Every long name, alias and short letter the parser takes, in the root command and its
    /// subcommands, help and version included.
    fn accepted() -> Vec<String> {
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let mut names = super::arg_names(&cmd);
        for sub in cmd.get_subcommands() {
            names.extend(super::arg_names(sub));
        }
        names
    }

    /// Each flag of the reference perftest, read from its live `--help` (so that the list cannot
    /// drift), is either taken by rdmabw's parser or refused here by name.
    #[test]
    fn every_flag_of_the_installed_ib_write_bw_is_taken_or_refused_by_name() {
        super::check_reference_flags(
            "ib_write_bw",
            61,
            &accepted(),
            is_refused,
            |arg| refuse_unsupported(&[arg, "10.0.0.2"]),
            |arg| format!("{arg}: not supported by rdmabw: it "),
        );
    }

    /// No flag is both accepted by the parser and refused here.
    #[test]
    fn refused_flags_are_not_also_accepted() {
        let accepted = accepted();
        for r in REFUSED {
            for n in r.names {
                assert!(
                    !accepted.iter().any(|a| a == n),
                    "{n} is accepted and refused"
                );
            }
        }
    }
}

//! The checks of this process on its host: `memlock` (the locked-memory limit and
//! `CAP_IPC_LOCK`) and `dev-shm` (how big `/dev/shm` is), with the readings they share with
//! the test's own pre-flight ([`Memlock`]) and with `rdmabw` ([`human`]).

use std::fs;

use wire::probe::{Check, Status};

use super::verdict::check;
use crate::sysfs::{self, SysRoots};

/// `CAP_IPC_LOCK`: registration ignores the memlock limit when it is effective.
pub const CAP_IPC_LOCK: u32 = 14;

pub(super) const MIB: u64 = 1024 * 1024;

pub(super) const GIB: u64 = 1024 * MIB;

/// The effective capability set from `<proc>/self/status` (`CapEff`).
pub fn cap_eff(roots: &SysRoots) -> Option<u64> {
    let text = fs::read_to_string(roots.proc.join("self/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

/// What bounds RDMA memory registration in this process: the memlock limit (`ulimit -l`),
/// unless `CAP_IPC_LOCK` is effective. The one reading of that policy, for `rdmabw probe`'s
/// check and for the test's own pre-flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memlock {
    /// `ulimit -l` in KiB (`u64::MAX`: unlimited); `None` if unreadable.
    pub limit_kib: Option<u64>,
    /// The effective capability set; `None` if unreadable.
    pub caps: Option<u64>,
}

impl Memlock {
    /// This process's limit and capabilities.
    pub fn read(roots: &SysRoots) -> Memlock {
        Memlock {
            limit_kib: sysfs::memlock_limit_kib(roots),
            caps: cap_eff(roots),
        }
    }

    /// Whether `CAP_IPC_LOCK` is effective (`None`: the capabilities are unreadable).
    pub fn ipc_lock(&self) -> Option<bool> {
        self.caps.map(|c| c & (1 << CAP_IPC_LOCK) != 0)
    }

    /// Whether `bytes` may be registered: `None` when neither IPC_LOCK nor a readable limit
    /// says.
    pub fn allows(&self, bytes: u64) -> Option<bool> {
        if self.ipc_lock() == Some(true) {
            return Some(true);
        }
        self.limit_kib
            .map(|k| k == u64::MAX || k.saturating_mul(1024) >= bytes)
    }
}

/// Whether `caps` holds every capability up to `<proc>/sys/kernel/cap_last_cap` (what a
/// privileged container gets).
pub fn is_full_capability_set(roots: &SysRoots, caps: u64) -> bool {
    let last = sysfs::read_attr(&roots.proc.join("sys/kernel/cap_last_cap"))
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(40)
        .min(63);
    let all = if last == 63 {
        u64::MAX
    } else {
        (1u64 << (last + 1)) - 1
    };
    caps & all == all
}

/// What backs `/dev/shm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShmInfo {
    /// File system type (`tmpfs`), or `None` when `/dev/shm` is no mount of its own.
    pub fstype: Option<String>,
    /// Size in bytes; `None` when unknown.
    pub bytes: Option<u64>,
    /// Where the size came from, for the message.
    pub source: String,
}

pub(super) fn size_option(opts: &str) -> Option<u64> {
    let v = opts.split(',').find_map(|o| o.strip_prefix("size="))?;
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1024),
        'm' | 'M' => (&v[..v.len() - 1], MIB),
        'g' | 'G' => (&v[..v.len() - 1], GIB),
        _ => (v, 1),
    };
    num.parse::<u64>().ok().map(|n| n.saturating_mul(mult))
}

fn mem_total_bytes(roots: &SysRoots) -> Option<u64> {
    let text = fs::read_to_string(roots.proc.join("meminfo")).ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Reads how big `/dev/shm` is from `<proc>/self/mountinfo`: the `size=` option of its
/// tmpfs, or half of `MemTotal` (tmpfs's default) when there is none; a `/dev/shm` that is no
/// mount of its own has the size of the `/dev` mount.
pub fn shm_info(roots: &SysRoots) -> Option<ShmInfo> {
    let text = fs::read_to_string(roots.proc.join("self/mountinfo")).ok()?;
    let mounts: Vec<(String, String, String)> = text
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mp = pre.split_whitespace().nth(4)?.to_string();
            let mut p = post.split_whitespace();
            let fstype = p.next()?.to_string();
            let _source = p.next();
            let opts = p.next().unwrap_or("").to_string();
            Some((mp, fstype, opts))
        })
        .collect();
    // The last mount on a point is the one in effect.
    let find = |mp: &str| mounts.iter().rev().find(|(m, _, _)| m == mp);
    if let Some((_, fstype, opts)) = find("/dev/shm") {
        let (bytes, source) = match size_option(opts) {
            Some(b) => (Some(b), format!("{fstype} size={}", human(b))),
            None if fstype == "tmpfs" => (
                mem_total_bytes(roots).map(|m| m / 2),
                format!("{fstype} without size=, so half of the memory"),
            ),
            None => (None, format!("{fstype} of unknown size")),
        };
        return Some(ShmInfo {
            fstype: Some(fstype.clone()),
            bytes,
            source,
        });
    }
    let (_, fstype, opts) = find("/dev")?;
    Some(ShmInfo {
        fstype: None,
        bytes: size_option(opts),
        source: format!("no mount of its own, part of /dev ({fstype})"),
    })
}

/// `64 MiB`, `1.5 GiB`, `512 KiB`.
pub fn human(bytes: u64) -> String {
    if bytes >= GIB {
        let g = bytes as f64 / GIB as f64;
        if g.fract() == 0.0 {
            format!("{g:.0} GiB")
        } else {
            format!("{g:.1} GiB")
        }
    } else if bytes >= MIB {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

pub(super) fn check_memlock(roots: &SysRoots) -> Check {
    let m = Memlock::read(roots);
    let (caps, ipc_lock, limit) = (m.caps, m.ipc_lock(), m.limit_kib);
    let lim_text = match limit {
        Some(u64::MAX) => "unlimited".to_string(),
        Some(k) => human(k.saturating_mul(1024)),
        None => "unknown".to_string(),
    };
    let caps_text = match caps {
        Some(c) => format!("CapEff {c:016x}"),
        None => "CapEff unreadable".to_string(),
    };
    const FIX: &str = "add the IPC_LOCK capability (securityContext.capabilities.add), or raise \
the container runtime's memlock limit to unlimited (CRI-O default_ulimits, containerd's \
LimitMEMLOCK=infinity)";
    match (ipc_lock, limit) {
        (Some(true), _) => check(
            "memlock",
            Status::Pass,
            format!("IPC_LOCK is effective ({caps_text}): the memlock limit ({lim_text}) does not bind registrations"),
            None,
        ),
        (_, Some(u64::MAX)) => check(
            "memlock",
            Status::Pass,
            format!("memlock unlimited ({caps_text}, no IPC_LOCK needed)"),
            None,
        ),
        (_, Some(k)) if k.saturating_mul(1024) < 64 * MIB => check(
            "memlock",
            Status::Fail,
            format!(
                "memlock limit {lim_text} and no IPC_LOCK ({caps_text}): RDMA pins every \
                 buffer it registers, so registrations beyond {lim_text} fail (NCCL falls back to TCP)"
            ),
            Some(FIX),
        ),
        (_, Some(k)) if k.saturating_mul(1024) < GIB => check(
            "memlock",
            Status::Warn,
            format!(
                "memlock limit {lim_text} and no IPC_LOCK ({caps_text}): enough for rdmabw, \
                 tight for NCCL"
            ),
            Some(FIX),
        ),
        (_, Some(_)) => check(
            "memlock",
            Status::Pass,
            format!("memlock limit {lim_text} ({caps_text})"),
            None,
        ),
        (_, None) => check(
            "memlock",
            Status::Warn,
            format!("memlock limit unreadable ({caps_text})"),
            Some(FIX),
        ),
    }
}

pub(super) fn check_dev_shm(roots: &SysRoots) -> Check {
    const FIX: &str = "mount a memory-backed emptyDir at /dev/shm (emptyDir: {medium: Memory}, \
with a sizeLimit of several GiB)";
    if !roots.dev.join("shm").is_dir() {
        return check(
            "dev-shm",
            Status::Fail,
            "no /dev/shm: NCCL and UCX keep their shared memory segments there".into(),
            Some(FIX),
        );
    }
    match shm_info(roots) {
        Some(ShmInfo {
            bytes: Some(b),
            source,
            ..
        }) => {
            if b <= 64 * MIB {
                check(
                    "dev-shm",
                    Status::Fail,
                    format!(
                        "/dev/shm is {} ({source}), the container default: one NCCL shared \
                         memory segment alone is larger",
                        human(b)
                    ),
                    Some(FIX),
                )
            } else if b < GIB {
                check(
                    "dev-shm",
                    Status::Warn,
                    format!(
                        "/dev/shm is {} ({source}): NCCL asks for at least 1 GiB",
                        human(b)
                    ),
                    Some(FIX),
                )
            } else {
                check(
                    "dev-shm",
                    Status::Pass,
                    format!("/dev/shm is {} ({source})", human(b)),
                    None,
                )
            }
        }
        Some(ShmInfo { source, .. }) => check(
            "dev-shm",
            Status::Warn,
            format!("/dev/shm size unknown ({source})"),
            Some(FIX),
        ),
        None => check(
            "dev-shm",
            Status::Warn,
            format!(
                "{} unreadable: /dev/shm size unknown",
                roots.proc.join("self/mountinfo").display()
            ),
            None,
        ),
    }
}

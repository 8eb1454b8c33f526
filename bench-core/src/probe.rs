//! `rdmabw probe`: can an RDMA test run in this pod, and if not, why not.
//!
//! Each check ends PASS, WARN or FAIL with one line of explanation and the fix; WARN also
//! stands for "does not apply here" (a cluster DNS check outside Kubernetes, a GPU check on a
//! node without GPUs), said so in the detail. The checks, in order:
//!
//! | name | what it reads | FAIL when |
//! | --- | --- | --- |
//! | `rails` | [`crate::rails`] | no rail (`rdmaN`, `netN` with an RDMA device) in this namespace |
//! | `uverbs-files` | `<dev>/infiniband/uverbs*`, `<sys>/class/infiniband_verbs` | no uverbs file although sysfs shows devices |
//! | `uverbs-open` | `open(O_RDWR)` of each uverbs file | an open fails: EPERM although the file is there is the container's device cgroup |
//! | `memlock` | `<proc>/self/limits`, `CapEff` of `<proc>/self/status` (bit 14, `CAP_IPC_LOCK`) | the limit is below 64 MiB without IPC_LOCK |
//! | `memory-registration` | a real 64 KiB registration on each rail's device | it fails |
//! | `rdma-netns-mode` | `<sys>/module/ib_core/parameters/netns_mode` | exclusive, with IPvlan children whose master device is not visible |
//! | `rail-gids` | [`crate::rails`] | a rail has no usable GID here |
//! | `host-network` | PF netdevs and bridges in `<sys>/class/net`, `<proc>/sys/kernel/hostname` | never; WARN for a hostNetwork pod (the node's host name and ports) |
//! | `cluster-dns` | `<etc>/resolv.conf`, a lookup of `kubernetes.default.svc.<domain>` | in Kubernetes, cluster names do not resolve |
//! | `dev-shm` | the `/dev/shm` line of `<proc>/self/mountinfo` (`size=`), else half of `MemTotal` | 64 MiB or less (NCCL's segments alone are larger) |
//! | `gpu-isolation` | `<dev>/nvidia*` opened, GPUs in sysfs, `NVIDIA_VISIBLE_DEVICES`, `CapEff` | fewer GPUs open than given; WARN when a privileged pod can open every GPU of the node |
//!
//! Everything outside the file system (environment variables, `open`, DNS, memory
//! registration, port queries) goes through [`ProbeSystem`], so that the checks run on fixture
//! trees; [`LiveSystem`] is the real one.

use std::fs;
use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use results::rdmabw::probe::{Check, ProbeReport, Status, Summary};
use results::rdmabw::rails::{Attachment, RailsReport};
use results::rdmabw::REPORT_SCHEMA_VERSION;

use crate::rails::{self, netif, PortQuery};
use crate::sysfs::{self, SysRoots};
use crate::topology;
use crate::verbs::Device;

/// The roots the probe reads: sysfs, devfs and procfs ([`SysRoots`]) and `/etc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRoots {
    /// `/sys`, `/dev`, `/proc`.
    pub sys: SysRoots,
    /// Where `/etc` is (for `resolv.conf`).
    pub etc: PathBuf,
}

impl Default for ProbeRoots {
    fn default() -> Self {
        ProbeRoots {
            sys: SysRoots::default(),
            etc: PathBuf::from("/etc"),
        }
    }
}

impl ProbeRoots {
    /// `<root>/sys`, `<root>/dev`, `<root>/proc` and `<root>/etc`, as the fixtures lay them out.
    pub fn under(root: &Path) -> ProbeRoots {
        ProbeRoots {
            sys: SysRoots::under(root),
            etc: root.join("etc"),
        }
    }
}

/// What the probe does outside the file system, so that tests can stand in for it.
pub trait ProbeSystem: PortQuery {
    /// An environment variable of this process.
    fn env(&self, name: &str) -> Option<String>;
    /// Opens `path` for reading and writing and closes it again.
    fn open_rw(&self, path: &Path) -> io::Result<()>;
    /// Resolves a host name, giving up after `timeout`.
    fn lookup_host(&self, name: &str, timeout: Duration) -> io::Result<Vec<IpAddr>>;
    /// Opens `device`, allocates a protection domain and registers `bytes` of host memory.
    fn register_memory(&self, device: &str, bytes: u64) -> Result<(), String>;
}

/// The real system: the process environment, `open(2)`, the system resolver and libibverbs.
#[derive(Debug)]
pub struct LiveSystem {
    roots: SysRoots,
    verbs: rails::VerbsQuery,
}

impl LiveSystem {
    /// The real system; `roots` serve the engine's error messages.
    pub fn new(roots: &SysRoots) -> LiveSystem {
        LiveSystem {
            roots: roots.clone(),
            verbs: rails::VerbsQuery::new(roots),
        }
    }
}

impl PortQuery for LiveSystem {
    fn active_mtu(&self, device: &str, port: u8) -> Option<u32> {
        self.verbs.active_mtu(device, port)
    }

    fn populated_gids(&self, device: &str) -> Option<Vec<(u8, u32)>> {
        self.verbs.populated_gids(device)
    }
}

impl ProbeSystem for LiveSystem {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn open_rw(&self, path: &Path) -> io::Result<()> {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map(drop)
    }

    fn lookup_host(&self, name: &str, timeout: Duration) -> io::Result<Vec<IpAddr>> {
        let (tx, rx) = mpsc::channel();
        let host = name.to_string();
        // getaddrinfo has no timeout: ask on a thread and stop waiting for it.
        thread::Builder::new()
            .name("probe-dns".into())
            .spawn(move || {
                let r = (host.as_str(), 0)
                    .to_socket_addrs()
                    .map(|it| it.map(|a| a.ip()).collect::<Vec<_>>());
                let _ = tx.send(r);
            })?;
        match rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {:.0} s", timeout.as_secs_f64()),
            )),
        }
    }

    fn register_memory(&self, device: &str, bytes: u64) -> Result<(), String> {
        let dev = Device::open_with(&self.roots, device).map_err(|e| e.to_string())?;
        let pd = dev.alloc_pd().map_err(|e| e.to_string())?;
        pd.alloc_host_buffer(bytes)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// `CAP_IPC_LOCK`: registration ignores the memlock limit when it is effective.
pub const CAP_IPC_LOCK: u32 = 14;

/// Bytes the `memory-registration` check registers.
pub const PROBE_MR_BYTES: u64 = 64 * 1024;

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

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

fn size_option(opts: &str) -> Option<u64> {
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

fn check(name: &str, status: Status, detail: String, fix: Option<&str>) -> Check {
    Check {
        name: name.to_string(),
        status,
        detail,
        fix: fix.map(str::to_string),
    }
}

fn list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        items.join(", ")
    } else {
        format!("{}, ... ({} in all)", items[..max].join(", "), items.len())
    }
}

const FIX_DEVICES: &str = "give the container the RDMA devices: an RDMA device plugin \
(rdma-shared-dev-plugin, or sriov-network-device-plugin with isRdma: true), privileged: true, or \
CRI-O's io.kubernetes.cri-o.Devices annotation; a hostPath mount of /dev/infiniband is not enough";

fn check_rails(rails: &RailsReport, devices: usize) -> Check {
    if rails.rails.iter().all(|r| r.device.is_none()) {
        return check(
            "rails",
            Status::Fail,
            format!(
                "no rail interface (rdmaN, netN) with an RDMA device in this network namespace \
                 ({} rail interfaces, {devices} RDMA devices in sysfs)",
                rails.rails.len()
            ),
            Some(
                "run with hostNetwork: true to use the node's rails, or attach one network per \
                 rail (Multus with IPvlan on the rail, or SR-IOV VFs with isRdma: true)",
            ),
        );
    }
    let mut kinds: Vec<&str> = rails
        .rails
        .iter()
        .map(|r| attachment_name(r.attachment))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let names: Vec<String> = rails
        .rails
        .iter()
        .map(|r| match &r.device {
            Some(d) => format!("{} ({d})", r.iface),
            None => r.iface.clone(),
        })
        .collect();
    check(
        "rails",
        Status::Pass,
        format!(
            "{} rails ({}): {}",
            rails.rails.len(),
            kinds.join(", "),
            list(&names, 4)
        ),
        None,
    )
}

/// The word `rdmabw rails` prints for an attachment.
pub fn attachment_name(a: Attachment) -> &'static str {
    match a {
        Attachment::HostNetwork => "hostNetwork",
        Attachment::Ipvlan => "IPvlan",
        Attachment::Sriov => "SR-IOV VF",
        Attachment::Software => "software (rxe)",
        Attachment::Unknown => "unknown",
    }
}

fn uverbs_files(roots: &SysRoots) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(roots.dev.join("infiniband"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("uverbs"))
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| netif::natural_cmp(a, b));
    v
}

fn check_uverbs_files(
    roots: &SysRoots,
    inv: &sysfs::Inventory,
    rails: &RailsReport,
    files: &[String],
) -> Check {
    let devices = inv.devices.len();
    if devices == 0 {
        return check(
            "uverbs-files",
            Status::Fail,
            format!(
                "no RDMA device in {} and {} uverbs files",
                roots.sys.join("class/infiniband").display(),
                files.len()
            ),
            Some("load the NIC's RDMA driver on the node (mlx5_ib), or check the RDMA netns mode"),
        );
    }
    if files.is_empty() {
        return check(
            "uverbs-files",
            Status::Fail,
            format!(
                "no uverbs file in {}: sysfs shows {devices} RDMA devices, but libibverbs can \
                 open none (ibv_devices lists nothing)",
                roots.dev.join("infiniband").display()
            ),
            Some(FIX_DEVICES),
        );
    }
    let missing: Vec<String> = rails
        .rails
        .iter()
        .filter_map(|r| {
            let d = inv.device(r.device.as_deref()?)?;
            (!d.uverbs_present).then(|| {
                format!(
                    "{} ({} {})",
                    r.iface,
                    d.name,
                    d.uverbs.as_deref().unwrap_or("no uverbs")
                )
            })
        })
        .collect();
    let cm = roots.dev.join("infiniband/rdma_cm").exists();
    if !missing.is_empty() {
        return check(
            "uverbs-files",
            Status::Warn,
            format!(
                "{} uverbs files, but not for the devices of {}",
                files.len(),
                list(&missing, 4)
            ),
            Some(FIX_DEVICES),
        );
    }
    check(
        "uverbs-files",
        Status::Pass,
        format!(
            "{} uverbs files for {devices} RDMA devices in sysfs{}",
            files.len(),
            if cm { ", and rdma_cm" } else { "" }
        ),
        None,
    )
}

fn check_uverbs_open(
    roots: &SysRoots,
    sys: &dyn ProbeSystem,
    files: &[String],
) -> (Check, Vec<String>) {
    if files.is_empty() {
        return (
            check(
                "uverbs-open",
                Status::Warn,
                "not applicable: no uverbs file to open".into(),
                None,
            ),
            Vec::new(),
        );
    }
    let mut ok = Vec::new();
    let mut eperm = Vec::new();
    let mut other = Vec::new();
    for f in files {
        let path = roots.dev.join("infiniband").join(f);
        match sys.open_rw(&path) {
            Ok(()) => ok.push(f.clone()),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => eperm.push(f.clone()),
            Err(e) => other.push(format!("{f}: {e}")),
        }
    }
    let c = if !eperm.is_empty() {
        let mode = fs::metadata(roots.dev.join("infiniband").join(&eperm[0]))
            .map(|m| {
                use std::os::unix::fs::PermissionsExt;
                format!("{:04o}", m.permissions().mode() & 0o7777)
            })
            .unwrap_or_else(|_| "?".into());
        check(
            "uverbs-open",
            Status::Fail,
            format!(
                "open() of {} of {} uverbs files fails with EPERM (Operation not permitted) \
                 although the files are there (mode {mode}): the container's device cgroup does \
                 not allow them",
                eperm.len(),
                files.len()
            ),
            Some(
                "a hostPath mount adds the files, not the permission to open them: use an RDMA \
                 device plugin, privileged: true, or CRI-O's io.kubernetes.cri-o.Devices \
                 annotation (with the devices in allowed_devices)",
            ),
        )
    } else if !other.is_empty() {
        check(
            "uverbs-open",
            Status::Fail,
            format!("cannot open {}", list(&other, 3)),
            Some("EACCES: run as root or in the group that owns the files; ENXIO/ENODEV: the device went away"),
        )
    } else {
        check(
            "uverbs-open",
            Status::Pass,
            format!("opened all {} uverbs files read-write", ok.len()),
            None,
        )
    };
    (c, ok)
}

fn check_memlock(roots: &SysRoots) -> Check {
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

fn check_registration(
    sys: &dyn ProbeSystem,
    inv: &sysfs::Inventory,
    rails: &RailsReport,
    opened: &[String],
) -> Check {
    // The devices of the rails, else every device; only those whose uverbs file opened.
    let mut devs: Vec<String> = rails
        .rails
        .iter()
        .filter_map(|r| r.device.clone())
        .collect();
    if devs.is_empty() {
        devs = inv.device_names();
    }
    let mut seen = Vec::new();
    devs.retain(|d| {
        let keep = !seen.contains(d)
            && inv
                .device(d)
                .and_then(|x| x.uverbs.as_ref())
                .is_some_and(|u| opened.contains(u));
        seen.push(d.clone());
        keep
    });
    if devs.is_empty() {
        return check(
            "memory-registration",
            Status::Warn,
            "not attempted: no RDMA device whose uverbs file opens".into(),
            None,
        );
    }
    let mut failed = Vec::new();
    for d in &devs {
        if let Err(e) = sys.register_memory(d, PROBE_MR_BYTES) {
            failed.push(format!("{d}: {e}"));
        }
    }
    if failed.is_empty() {
        check(
            "memory-registration",
            Status::Pass,
            format!(
                "registered {} of host memory on {}",
                human(PROBE_MR_BYTES),
                list(&devs, 4)
            ),
            None,
        )
    } else {
        check(
            "memory-registration",
            Status::Fail,
            format!(
                "registering {} failed on {} of {} devices: {}",
                human(PROBE_MR_BYTES),
                failed.len(),
                devs.len(),
                failed.first().map(String::as_str).unwrap_or_default()
            ),
            Some("see memlock and uverbs-open above; with a missing libibverbs provider, install rdma-core's providers (ibverbs-providers) in the image"),
        )
    }
}

fn check_netns_mode(roots: &SysRoots, inv: &sysfs::Inventory, rails: &RailsReport) -> Check {
    let mode = sysfs::read_attr(&roots.sys.join("module/ib_core/parameters/netns_mode"));
    let orphan_children: Vec<String> = rails
        .rails
        .iter()
        .filter(|r| r.device.is_none())
        .filter(|r| {
            netif::read_interface(roots, &r.iface).is_some_and(|n| n.is_virtual() && n.is_stacked())
        })
        .map(|r| r.iface.clone())
        .collect();
    match mode.as_deref() {
        Some("Y") | Some("1") => check(
            "rdma-netns-mode",
            Status::Pass,
            format!(
                "shared (Y): all {} RDMA devices are visible in every namespace; only the GIDs \
                 of this namespace's addresses are usable here",
                inv.devices.len()
            ),
            None,
        ),
        Some("N") | Some("0") if !orphan_children.is_empty() => check(
            "rdma-netns-mode",
            Status::Fail,
            format!(
                "exclusive (N): each RDMA device belongs to one namespace, so the masters' \
                 devices of the IPvlan children {} are not visible here",
                list(&orphan_children, 4)
            ),
            Some(
                "IPvlan needs the shared mode (options ib_core netns_mode=1 in \
                 /etc/modprobe.d/ib_core.conf, or rdma system set netns shared); or give pods \
                 SR-IOV VFs",
            ),
        ),
        Some("N") | Some("0") => check(
            "rdma-netns-mode",
            Status::Pass,
            format!(
                "exclusive (N): only this namespace's RDMA devices are visible ({})",
                inv.devices.len()
            ),
            None,
        ),
        Some(other) => check(
            "rdma-netns-mode",
            Status::Warn,
            format!("netns_mode reads {other:?}"),
            None,
        ),
        None => check(
            "rdma-netns-mode",
            Status::Warn,
            format!(
                "{} unreadable: ib_core not loaded, or sysfs not mounted",
                roots
                    .sys
                    .join("module/ib_core/parameters/netns_mode")
                    .display()
            ),
            None,
        ),
    }
}

fn check_rail_gids(rails: &RailsReport) -> Check {
    if rails.rails.is_empty() {
        return check(
            "rail-gids",
            Status::Warn,
            "not applicable: no rails (see rails)".into(),
            None,
        );
    }
    let bad: Vec<String> = rails
        .rails
        .iter()
        .filter(|r| !r.usable)
        .map(|r| {
            format!(
                "rail {} ({}): {}",
                r.rail,
                r.iface,
                r.reason.as_deref().unwrap_or("not usable")
            )
        })
        .collect();
    if bad.is_empty() {
        let mut idx: Vec<u32> = rails.rails.iter().filter_map(|r| r.gid_index).collect();
        idx.sort_unstable();
        idx.dedup();
        let idx: Vec<String> = idx.iter().map(u32::to_string).collect();
        check(
            "rail-gids",
            Status::Pass,
            format!(
                "every rail has the RoCE v2 GID of its own address (GID index {})",
                idx.join(", ")
            ),
            None,
        )
    } else {
        check(
            "rail-gids",
            Status::Fail,
            format!(
                "{} of {} rails cannot be used: {}",
                bad.len(),
                rails.rails.len(),
                list(&bad, 2)
            ),
            Some("`rdmabw rails` lists every rail with its reason"),
        )
    }
}

/// Whether this is the node's own network namespace, and what shows it.
fn node_namespace_evidence(ifs: &[netif::NetIf]) -> Vec<String> {
    let mut v: Vec<String> = ifs
        .iter()
        .filter(|n| n.is_pf())
        .map(|n| format!("PF {}", n.name))
        .collect();
    v.extend(
        ifs.iter()
            .filter(|n| n.bridge)
            .map(|n| format!("bridge {}", n.name)),
    );
    v
}

fn check_host_network(roots: &SysRoots, in_k8s: bool, evidence: &[String], host: &str) -> Check {
    match (evidence.is_empty(), in_k8s) {
        (false, true) => check(
            "host-network",
            Status::Warn,
            format!(
                "hostNetwork: this pod is in the node's network namespace ({}): it has the node's \
                 host name {host} and shares the node's ports",
                list(evidence, 3)
            ),
            Some(
                "pick ports no node service uses (the node's sshd has 22: run the workers' sshd \
                 on 2222 and tell mpirun); set dnsPolicy: ClusterFirstWithHostNet",
            ),
        ),
        (false, false) => check(
            "host-network",
            Status::Pass,
            format!(
                "the node's own network namespace ({}), not a Kubernetes pod; host name {host}",
                list(evidence, 3)
            ),
            None,
        ),
        (true, _) => check(
            "host-network",
            Status::Pass,
            format!(
                "own network namespace ({} interfaces, no PF or bridge of the node); host name {host}",
                netif::interfaces(roots).len()
            ),
            None,
        ),
    }
}

/// `nameserver` and `search` of a resolv.conf.
fn resolv_conf(etc: &Path) -> (Vec<String>, Vec<String>) {
    let text = fs::read_to_string(etc.join("resolv.conf")).unwrap_or_default();
    let mut ns = Vec::new();
    let mut search = Vec::new();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        match f.next() {
            Some("nameserver") => ns.extend(f.next().map(str::to_string)),
            Some("search") => search = f.map(str::to_string).collect(),
            _ => {}
        }
    }
    (ns, search)
}

fn check_cluster_dns(
    roots: &ProbeRoots,
    sys: &dyn ProbeSystem,
    in_k8s: bool,
    host_network: bool,
) -> Check {
    let (ns, search) = resolv_conf(&roots.etc);
    let conf = format!(
        "nameserver {}, search {}",
        if ns.is_empty() {
            "none".into()
        } else {
            ns.join(" ")
        },
        if search.is_empty() {
            "none".into()
        } else {
            search.join(" ")
        }
    );
    if !in_k8s {
        return check(
            "cluster-dns",
            Status::Warn,
            format!("not applicable: not in a Kubernetes pod (KUBERNETES_SERVICE_HOST is unset); {conf}"),
            None,
        );
    }
    let domain = search
        .iter()
        .find_map(|s| s.strip_prefix("svc."))
        .unwrap_or("cluster.local");
    let name = format!("kubernetes.default.svc.{domain}");
    match sys.lookup_host(&name, Duration::from_secs(2)) {
        Ok(a) if !a.is_empty() => check(
            "cluster-dns",
            Status::Pass,
            format!(
                "{name} resolves to {} ({conf})",
                a.iter()
                    .map(IpAddr::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            None,
        ),
        r => {
            let why = match r {
                Err(e) => e.to_string(),
                Ok(_) => "no address".into(),
            };
            check(
                "cluster-dns",
                Status::Fail,
                format!("{name} does not resolve ({why}; {conf}): cluster names (an MPI job's workers) will not either"),
                Some(if host_network {
                    "a hostNetwork pod gets the node's DNS settings: set dnsPolicy: ClusterFirstWithHostNet"
                } else {
                    "check the pod's dnsPolicy and the cluster DNS service (CoreDNS)"
                }),
            )
        }
    }
}

fn check_dev_shm(roots: &SysRoots) -> Check {
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

fn nvidia_device_files(roots: &SysRoots) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(&roots.dev)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.strip_prefix("nvidia")
                        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| netif::natural_cmp(a, b));
    v
}

/// How many GPUs this container was given: a list in `NVIDIA_VISIBLE_DEVICES` (indexes, UUIDs
/// or CDI names); `all` means every GPU of the node; unset, `void` (CDI) or `none` say nothing.
fn given_gpus(value: Option<&str>, node: usize) -> Option<usize> {
    let v = value?.trim();
    match v {
        "" | "void" => None,
        "none" => Some(0),
        "all" => Some(node),
        list => Some(list.split(',').filter(|s| !s.trim().is_empty()).count()),
    }
}

fn check_gpus(roots: &SysRoots, sys: &dyn ProbeSystem) -> Check {
    let node = topology::sysfs_gpus(roots).len();
    let files = nvidia_device_files(roots);
    let openable: Vec<String> = files
        .iter()
        .filter(|f| sys.open_rw(&roots.dev.join(f)).is_ok())
        .cloned()
        .collect();
    let nvd = sys.env("NVIDIA_VISIBLE_DEVICES");
    let given = given_gpus(nvd.as_deref(), node);
    let privileged = cap_eff(roots).is_some_and(|c| is_full_capability_set(roots, c));
    let open_n = openable.len();
    let given_text = match (&nvd, given) {
        (Some(v), Some(k)) => format!("given {k} (NVIDIA_VISIBLE_DEVICES={v})"),
        (Some(v), None) => {
            format!("which were given is not said (NVIDIA_VISIBLE_DEVICES={v}: CDI)")
        }
        (None, _) => "which were given is not said (NVIDIA_VISIBLE_DEVICES unset)".to_string(),
    };
    const RISK: &str =
        "CUDA uses every GPU it can open, so CUDA device 0 here is the node's first \
GPU whatever the device plugin gave: two jobs on one node run on the same GPUs";
    const FIX: &str = "drop privileged: true (it adds every device of the node); give the RDMA \
devices through a device plugin or CRI-O's io.kubernetes.cri-o.Devices annotation with \
privileged_without_host_devices = true; or set CUDA_VISIBLE_DEVICES to the given GPUs";
    if node == 0 && files.is_empty() {
        return check(
            "gpu-isolation",
            Status::Warn,
            "not applicable: no NVIDIA GPU in sysfs and no /dev/nvidiaN".into(),
            None,
        );
    }
    match given {
        Some(k) if open_n > k => check(
            "gpu-isolation",
            Status::Warn,
            format!(
                "can open {open_n} GPUs ({}) of the node's {node} but was {given_text}{}: {RISK}",
                list(&openable, 4),
                if privileged { ", privileged" } else { "" }
            ),
            Some(FIX),
        ),
        Some(k) if open_n < k => check(
            "gpu-isolation",
            Status::Fail,
            format!(
                "was {given_text} but can open only {open_n} ({} /dev/nvidiaN files)",
                files.len()
            ),
            Some("the GPU device files are missing or blocked by the device cgroup: check the GPU device plugin or CDI spec"),
        ),
        None if privileged && open_n > 0 && open_n == node => check(
            "gpu-isolation",
            Status::Warn,
            format!("privileged: can open all {node} GPUs of the node; {given_text}: {RISK}"),
            Some(FIX),
        ),
        _ => check(
            "gpu-isolation",
            Status::Pass,
            format!(
                "can open {open_n} of the node's {node} GPUs; {given_text}{}",
                if privileged {
                    " (privileged: it would see every GPU even if it had asked for fewer)"
                } else {
                    ""
                }
            ),
            None,
        ),
    }
}

/// Runs every check.
pub fn probe(roots: &ProbeRoots, sys: &dyn ProbeSystem) -> ProbeReport {
    let s = &roots.sys;
    let inv = sysfs::discover(s).unwrap_or(sysfs::Inventory {
        devices: Vec::new(),
        netdevs: Vec::new(),
    });
    let rails = match rails::discover(s, sys) {
        Ok(r) => r,
        Err(_) => RailsReport {
            schema_version: REPORT_SCHEMA_VERSION,
            rdmabw_version: env!("CARGO_PKG_VERSION").to_string(),
            capabilities: results::rdmabw::rails::Capability::OURS.to_vec(),
            host: String::new(),
            rails: Vec::new(),
            not_rails: Vec::new(),
        },
    };
    let host = sysfs::read_attr(&s.proc.join("sys/kernel/hostname"))
        .unwrap_or_else(|| "unknown".to_string());
    let files = uverbs_files(s);
    let in_k8s = sys
        .env("KUBERNETES_SERVICE_HOST")
        .is_some_and(|v| !v.is_empty());
    let ifs = netif::interfaces(s);
    let evidence = node_namespace_evidence(&ifs);

    let mut checks = vec![
        check_rails(&rails, inv.devices.len()),
        check_uverbs_files(s, &inv, &rails, &files),
    ];
    let (open_check, opened) = check_uverbs_open(s, sys, &files);
    checks.push(open_check);
    checks.push(check_memlock(s));
    checks.push(check_registration(sys, &inv, &rails, &opened));
    checks.push(check_netns_mode(s, &inv, &rails));
    checks.push(check_rail_gids(&rails));
    checks.push(check_host_network(s, in_k8s, &evidence, &host));
    checks.push(check_cluster_dns(roots, sys, in_k8s, !evidence.is_empty()));
    checks.push(check_dev_shm(s));
    checks.push(check_gpus(s, sys));

    let mut summary = Summary::default();
    for c in &checks {
        match c.status {
            Status::Pass => summary.pass += 1,
            Status::Warn => summary.warn += 1,
            Status::Fail => summary.fail += 1,
        }
    }
    ProbeReport {
        schema_version: REPORT_SCHEMA_VERSION,
        rdmabw_version: env!("CARGO_PKG_VERSION").to_string(),
        host,
        checks,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memlock_allows_what_the_limit_or_ipc_lock_allows() {
        let m = |limit_kib, caps| Memlock { limit_kib, caps };
        let ipc = 1 << CAP_IPC_LOCK;
        assert_eq!(m(Some(64), Some(0)).allows(64 * 1024), Some(true));
        assert_eq!(m(Some(64), Some(0)).allows(64 * 1024 + 1), Some(false));
        assert_eq!(m(Some(64), Some(ipc)).allows(u64::MAX), Some(true));
        assert_eq!(m(Some(u64::MAX), None).allows(u64::MAX), Some(true));
        assert_eq!(m(None, Some(0)).allows(1), None);
        assert_eq!(m(None, None).ipc_lock(), None);
    }

    #[test]
    fn shm_sizes() {
        assert_eq!(size_option("rw,size=65536k,inode64"), Some(64 * MIB));
        assert_eq!(size_option("rw,size=32g"), Some(32 * GIB));
        assert_eq!(size_option("rw,inode64"), None);
        assert_eq!(human(64 * MIB), "64 MiB");
        assert_eq!(human(32 * GIB), "32 GiB");
        assert_eq!(human(64 * 1024), "64 KiB");
    }

    #[test]
    fn gpus_given() {
        assert_eq!(given_gpus(Some("0,1,2,3"), 8), Some(4));
        assert_eq!(given_gpus(Some("all"), 8), Some(8));
        assert_eq!(given_gpus(Some("void"), 8), None);
        assert_eq!(given_gpus(Some("none"), 8), Some(0));
        assert_eq!(given_gpus(None, 8), None);
    }

    #[test]
    fn status_json_is_upper_case() {
        assert_eq!(
            serde_json::to_string(&Status::Warn).unwrap_or_default(),
            "\"WARN\""
        );
    }
}

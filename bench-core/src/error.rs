//! Typed errors of the verbs engine, sysfs discovery and GID choice: the base layer of
//! bench-core's errors, which imports nothing of the crate. The GPU layer's error wraps this one.
//!
//! Every error names what it was doing (device, port, GID index, QP number) and, where the
//! cause is usually outside the program (memlock limit, a missing provider library, a dead
//! peer), says what to do about it. The `Display` text is meant to be shown to the user as is.

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::path::PathBuf;

/// A GID that can be used from this network namespace, as listed in error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsableGid {
    /// GID table index.
    pub index: u32,
    /// The netdev the GID belongs to (in this namespace).
    pub netdev: String,
    /// The IP address the GID carries (IPv4-mapped GIDs show as IPv4).
    pub ip: Option<IpAddr>,
}

impl fmt::Display for UsableGid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ip {
            Some(ip) => write!(f, "{} ({} {})", self.index, self.netdev, ip),
            None => write!(f, "{} ({})", self.index, self.netdev),
        }
    }
}

/// Why a GID table entry cannot be used from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidUnusable {
    /// The entry reads as all zeros (empty, or hidden because it belongs to another namespace).
    Zero,
    /// Its netdev cannot be read (the kernel refuses for entries of other network namespaces
    /// and for empty entries) or is not a netdev of this namespace.
    ForeignOrEmpty,
    /// It is not a RoCE v2 GID and the port is Ethernet.
    NotRoceV2,
}

impl fmt::Display for GidUnusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GidUnusable::Zero => {
                "reads as all zeros (empty, or owned by another network namespace)"
            }
            GidUnusable::ForeignOrEmpty => "belongs to another network namespace or is empty",
            GidUnusable::NotRoceV2 => "is not a RoCE v2 GID",
        })
    }
}

fn list_or_none<T: fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The C name of an errno value, e.g. `ENOMEM`.
pub fn errno_symbol(code: i32) -> &'static str {
    match code {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        _ => "errno",
    }
}

fn errno_name(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            let desc = text.split(" (os error").next().unwrap_or(&text);
            format!("{} ({desc})", errno_symbol(code))
        }
        None => e.to_string(),
    }
}

/// Everything that can go wrong in bench-core's engine, discovery and GID choice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// libibverbs.so.1 could not be loaded at run time.
    #[error(
        "libibverbs could not be loaded ({}): install rdma-core's libibverbs \
         (Debian/Ubuntu: libibverbs1 ibverbs-providers; RHEL: libibverbs rdma-core) \
         and the provider for your NIC (mlx5, rxe, ...)", errno_name(.source)
    )]
    VerbsLibraryMissing {
        /// The errno libibverbs' loader left.
        source: io::Error,
    },

    /// libibverbs loaded but the kernel has no RDMA support for it.
    #[error("libibverbs found no RDMA support in the kernel ({}): load ib_uverbs and the NIC's RDMA driver (mlx5_ib, rdma_rxe)", errno_name(.source))]
    NoKernelSupport {
        /// The errno of ibv_get_device_list.
        source: io::Error,
    },

    /// No RDMA device at all.
    #[error("no RDMA devices found{}", if *.sysfs_devices == 0 {
        " (/sys/class/infiniband is empty: load the RDMA driver, or give the container the RDMA device)".to_string()
    } else {
        format!(" by libibverbs although sysfs lists {}: install the provider library for them (Debian/Ubuntu: ibverbs-providers)", .sysfs_devices)
    })]
    NoDevices {
        /// How many devices sysfs lists.
        sysfs_devices: usize,
    },

    /// A device name that does not exist.
    #[error("RDMA device {name} not found; devices here: {}", list_or_none(.available))]
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// The devices that exist.
        available: Vec<String>,
    },

    /// A netdev that maps to no RDMA device in this namespace.
    #[error("network interface {netdev} maps to no RDMA device in this network namespace{}; interfaces that do: {}",
        if *.exists { "" } else { " (it does not exist here)" }, list_or_none(.available))]
    UnknownNetdev {
        /// The interface asked for.
        netdev: String,
        /// Whether an interface of that name exists in this namespace at all.
        exists: bool,
        /// `netdev -> device` pairs that do exist.
        available: Vec<String>,
    },

    /// The netdev maps to more than one RDMA device or port.
    #[error("network interface {netdev} maps to several RDMA ports ({}); name the device with --ib-dev", .candidates.join(", "))]
    AmbiguousNetdev {
        /// The interface asked for.
        netdev: String,
        /// `device port N` for each candidate.
        candidates: Vec<String>,
    },

    /// The device and the netdev named by the user do not belong together.
    #[error("network interface {netdev} is not on RDMA device {device}; it is on {}", list_or_none(.actual))]
    NetdevNotOnDevice {
        /// The device asked for.
        device: String,
        /// The interface asked for.
        netdev: String,
        /// The devices it is on.
        actual: Vec<String>,
    },

    /// No device was named and none has a usable GID in this network namespace.
    #[error("no RDMA device has a usable RoCE v2 IPv4 GID in this network namespace; devices here: {}; name one with --ib-dev/-d or --netdev", list_or_none(.devices))]
    NoUsableDevice {
        /// The devices that exist.
        devices: Vec<String>,
    },

    /// `ibv_open_device` failed.
    #[error("cannot open RDMA device {device}: {}{}", errno_name(.source), if .uverbs.is_empty() { String::new() } else {
        format!(" (is {} present and accessible in this container?)", .uverbs)
    })]
    OpenDevice {
        /// Device name.
        device: String,
        /// The uverbs character device path, if known.
        uverbs: String,
        /// The errno.
        source: io::Error,
    },

    /// A port number beyond the device's port count.
    #[error("RDMA device {device} has no port {port} (ports: 1..={ports})")]
    NoSuchPort {
        /// Device name.
        device: String,
        /// The port asked for.
        port: u8,
        /// How many ports it has.
        ports: u8,
    },

    /// The port is not ACTIVE.
    #[error("port {port} of RDMA device {device} is {state} (physical state {phys_state}); the link is down or not configured")]
    PortDown {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// Logical state, e.g. `DOWN`.
        state: String,
        /// Physical state, e.g. `Disabled`.
        phys_state: String,
    },

    /// A verbs query (device or port) failed.
    #[error("querying {what} of RDMA device {device} failed: {}", errno_name(.source))]
    Query {
        /// Device name.
        device: String,
        /// What was queried, e.g. `port 1`.
        what: String,
        /// The errno.
        source: io::Error,
    },

    /// An explicit GID index beyond the table.
    #[error("GID index {index} of {device} port {port} is out of range (the table has {table_len} entries); usable here: {}", list_or_none(.usable))]
    GidIndexOutOfRange {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// The index asked for.
        index: u32,
        /// GID table length.
        table_len: u32,
        /// GIDs that can be used from this namespace.
        usable: Vec<UsableGid>,
    },

    /// An explicit GID index that cannot be used from here.
    #[error("GID index {index} of {device} port {port} {reason}; usable here: {}", list_or_none(.usable))]
    GidNotUsable {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// The index asked for.
        index: u32,
        /// Why not.
        reason: GidUnusable,
        /// GIDs that can be used from this namespace.
        usable: Vec<UsableGid>,
    },

    /// No GID index given and none qualifies.
    #[error("{device} port {port} has no RoCE v2 IPv4 GID in this network namespace{}; its GIDs here: {}{}",
        match .netdev { Some(n) => format!(" on {n}"), None => String::new() }, list_or_none(.usable),
        if .other_devices.is_empty() { "; pick one with -x/--gid-index".to_string() } else {
            format!("; devices with one here: {}", .other_devices.join(", "))
        })]
    NoUsableGid {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// The `--netdev` filter, if any.
        netdev: Option<String>,
        /// GIDs of any type that are in this namespace (maybe IPv6 or RoCE v1).
        usable: Vec<UsableGid>,
        /// Other devices that do have one here, as `dev (netdev ip)`.
        other_devices: Vec<String>,
    },

    /// A GID index does not fit the 8-bit field of the address vector.
    #[error("GID index {index} does not fit the address vector's 8-bit sgid_index")]
    GidIndexTooLarge {
        /// The index.
        index: u32,
    },

    /// A sysfs file that must be readable was not.
    #[error("cannot read {}: {source}", .path.display())]
    Sysfs {
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },

    /// Memory registration failed for lack of locked-memory allowance.
    #[error("registering {bytes} bytes on {device} failed with ENOMEM: {}; raise it (ulimit -l unlimited, or the container's memlock limit / IPC_LOCK capability)",
        match .limit_kib { Some(k) => format!("ulimit -l is {k} KiB"), None => "the locked-memory limit (ulimit -l) is too low".to_string() })]
    MemlockTooLow {
        /// Device name.
        device: String,
        /// Bytes being registered.
        bytes: u64,
        /// The soft RLIMIT_MEMLOCK in KiB; `None` when unknown.
        limit_kib: Option<u64>,
    },

    /// Memory registration failed otherwise.
    #[error("registering {bytes} bytes of {kind} memory on {device} failed: {}", errno_name(.source))]
    RegisterMemory {
        /// Device name.
        device: String,
        /// `host` or `dma-buf`.
        kind: &'static str,
        /// Bytes being registered.
        bytes: u64,
        /// The errno.
        source: io::Error,
    },

    /// The device cannot register dma-buf memory.
    #[error("device {device} cannot register dma-buf memory ({why}); what can: an mlx5 NIC with a recent driver on the dma-buf path (kernel >= 5.12 and a GPU driver with dma-buf support), or the peermem path (--cuda-mem peermem) with nvidia_peermem loaded")]
    DmabufUnsupported {
        /// Device name.
        device: String,
        /// Driver-specific reason, e.g. `rxe has no dma-buf support`.
        why: String,
    },

    /// Protection domain, CQ or QP creation failed.
    #[error("creating {what} on {device} failed: {}", errno_name(.source))]
    Create {
        /// Device name.
        device: String,
        /// What, e.g. `a completion queue of 4096 entries`.
        what: String,
        /// The errno.
        source: io::Error,
    },

    /// A QP state transition failed.
    #[error("moving QP {qpn:#x} on {device} port {port} from {from} to {to} failed: {}{}", errno_name(.source),
        if .hint.is_empty() { String::new() } else { format!(" ({})", .hint) })]
    QpTransition {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// QP number.
        qpn: u32,
        /// State before.
        from: &'static str,
        /// State asked for.
        to: &'static str,
        /// The errno.
        source: io::Error,
        /// What probably caused it.
        hint: String,
    },

    /// `ibv_post_send` (or `ibv_wr_complete`) failed.
    #[error("posting RDMA WRITEs on QP {qpn:#x} of {device} port {port} failed: {}", errno_name(.source))]
    PostSend {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// QP number.
        qpn: u32,
        /// The errno.
        source: io::Error,
    },

    /// `ibv_poll_cq` failed.
    #[error("polling the completion queue of {device} failed: {}", errno_name(.source))]
    PollCq {
        /// Device name.
        device: String,
        /// The errno.
        source: io::Error,
    },

    /// Arming the completion queue, or taking or waiting for its completion event, failed
    /// (event mode, `-e`).
    #[error("{call} on the completion queue of {device} failed: {}", errno_name(.source))]
    CqEvent {
        /// Device name.
        device: String,
        /// The call that failed (`ibv_req_notify_cq`, `ibv_get_cq_event`, ...).
        call: &'static str,
        /// The errno.
        source: io::Error,
    },

    /// A work completion came back with an error status.
    #[error("RDMA WRITE on QP {qpn:#x} of {device} port {port} completed with {status_str} (status {status}, vendor error {vendor_err:#x}): {hint}")]
    WorkCompletion {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// QP number.
        qpn: u32,
        /// Numeric `ibv_wc_status`.
        status: u32,
        /// `ibv_wc_status_str` text.
        status_str: &'static str,
        /// Vendor error syndrome.
        vendor_err: u32,
        /// What it most likely means.
        hint: &'static str,
    },

    /// No completion arrived for a long time while writes were outstanding.
    #[error("no completion on {device} port {port} for {stalled_s:.1} s with {outstanding} writes outstanding: the peer stopped responding (its process died or the rail is down){hint}")]
    Stalled {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// Seconds without progress.
        stalled_s: f64,
        /// Writes outstanding.
        outstanding: u64,
        /// Why the device did not report it itself, when known (starts with `; `), else empty.
        hint: String,
    },

    /// The caller's stop flag was raised (typically: the control channel saw the peer die).
    #[error("the run on {device} port {port} was stopped after {completed_sizes} message size(s): the caller asked to stop (peer gone or interrupted)")]
    Stopped {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// Sizes finished before the stop.
        completed_sizes: usize,
    },

    /// The endpoints exchanged with the peer do not fit this side.
    #[error("the peer's endpoint data does not match this side: {0}")]
    PeerMismatch(String),

    /// Parameters that cannot work (e.g. a message larger than the buffer).
    #[error("invalid parameters: {0}")]
    InvalidParams(String),

    /// GPU memory for the buffer could not be had or registered (`--use_cuda`). The cause is
    /// the GPU layer's own error, which sits above this one (it wraps an [`Error`] met while
    /// registering) and puts itself here by its `From` impl: downcast the payload to read it.
    /// Its text is shown as is.
    #[error("{0}")]
    Gpu(Box<dyn std::error::Error + Send + Sync>),
}

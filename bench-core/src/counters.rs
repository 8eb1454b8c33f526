//! Counter snapshots of one rail: every counter its RDMA port and its netdev publish, read
//! just before and just after a measured window, and their deltas. What is missing or
//! unreadable is left out, never an error: counters are evidence, not a requirement.

use std::collections::BTreeMap;
use std::fs;
use std::time::Instant;

use crate::sysfs::SysRoots;
use wire::counters::{CounterDelta, CounterReport, CounterSource, CounterUnit};
use wire::report::Role;

/// Every counter of one rail at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    values: BTreeMap<(CounterSource, String), u64>,
    at: Instant,
    read_ms: f64,
}

/// What a snapshot reads: a device's port and, when known, its netdev.
#[derive(Debug, Clone)]
pub struct CounterTarget {
    /// RDMA device.
    pub device: String,
    /// Its port.
    pub port: u8,
    /// The rail's interface.
    pub netdev: Option<String>,
    /// The device's RDMA netlink index, looked up by the first read that needs it and kept
    /// for the reads after it (`None` inside: not found).
    nl_index: std::sync::OnceLock<Option<u32>>,
}

impl CounterTarget {
    /// The counters of `device`'s `port` and, when known, of its `netdev`.
    pub fn new(device: impl Into<String>, port: u8, netdev: Option<String>) -> CounterTarget {
        CounterTarget {
            device: device.into(),
            port,
            netdev,
            nl_index: std::sync::OnceLock::new(),
        }
    }
}

impl Snapshot {
    /// Reads every counter of `t` under `roots` now. ethtool statistics come from the kernel
    /// (an ioctl in this network namespace), not from a tree: they are read only when `roots`
    /// is the real `/sys`.
    pub fn read(roots: &SysRoots, t: &CounterTarget) -> Snapshot {
        let t0 = Instant::now();
        let mut values = BTreeMap::new();
        let port = roots.port_dir(&t.device, t.port);
        read_dir_into(&mut values, CounterSource::Port, &port.join("counters"));
        read_dir_into(&mut values, CounterSource::Hw, &port.join("hw_counters"));
        // A device seen from another network namespace (rdma's shared mode: the "compat" device
        // a pod sees) has no hw_counters in sysfs; RDMA netlink still has them.
        let real = roots.sys == std::path::Path::new("/sys");
        if real && !values.keys().any(|(s, _)| *s == CounterSource::Hw) {
            let index = *t.nl_index.get_or_init(|| rdma_nl::device_index(&t.device));
            for (name, v) in index
                .map(|i| rdma_nl::hw_counters(i, t.port))
                .unwrap_or_default()
            {
                values.insert((CounterSource::Hw, name), v);
            }
        }
        if let Some(ifname) = &t.netdev {
            let net = roots.sys.join("class/net").join(ifname);
            read_dir_into(&mut values, CounterSource::Netdev, &net.join("statistics"));
            if let Some(v) = read_u64(&net.join("carrier_changes")) {
                values.insert((CounterSource::Netdev, "carrier_changes".into()), v);
            }
            if real {
                for (name, v) in crate::ffi::ethtool_stats(ifname) {
                    values.entry((CounterSource::Netdev, name)).or_insert(v);
                }
            }
        }
        Snapshot {
            values,
            at: Instant::now(),
            read_ms: t0.elapsed().as_secs_f64() * 1e3,
        }
    }

    /// Milliseconds the read took.
    pub fn read_ms(&self) -> f64 {
        self.read_ms
    }

    /// How many counters were read.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether none could be read.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The counters as they stand: source, name, value, unit.
    pub fn values(&self) -> impl Iterator<Item = (CounterSource, &str, u64, CounterUnit)> {
        self.values
            .iter()
            .map(|((s, n), v)| (*s, n.as_str(), *v, unit_of(*s, n)))
    }

    /// The deltas from `self` (before) to `after`, on side `role` of target `t`.
    pub fn delta(&self, after: &Snapshot, role: Role, t: &CounterTarget) -> CounterReport {
        let deltas: Vec<CounterDelta> = self
            .values
            .iter()
            .filter_map(|(k, before)| {
                let now = *after.values.get(k)?;
                (now >= *before).then(|| CounterDelta {
                    source: k.0,
                    name: k.1.clone(),
                    delta: now - before,
                    unit: unit_of(k.0, &k.1),
                })
            })
            .collect();
        CounterReport {
            role,
            device: t.device.clone(),
            port: t.port,
            netdev: t.netdev.clone(),
            span_s: after.at.saturating_duration_since(self.at).as_secs_f64(),
            read_ms: self.read_ms.max(after.read_ms),
            counters_read: deltas.len(),
            deltas,
        }
    }
}

/// A progress probe for [`crate::control::PeerWatch::start_watching`]: the sum of the rail's
/// traffic counters that exist (the port's `port_rcv_data`/`port_xmit_data`, the driver's
/// `rcvd_pkts`/`sent_pkts`, the netdev's `rx_bytes`/`tx_bytes`), which grows while the test
/// moves data in either direction; `None` when none can be read.
pub fn traffic_probe(roots: &SysRoots, t: &CounterTarget) -> crate::control::Progress {
    let port = roots.port_dir(&t.device, t.port);
    let mut files = vec![
        port.join("counters/port_rcv_data"),
        port.join("counters/port_xmit_data"),
        port.join("hw_counters/rcvd_pkts"),
        port.join("hw_counters/sent_pkts"),
    ];
    if let Some(ifname) = &t.netdev {
        let stats = roots.sys.join("class/net").join(ifname).join("statistics");
        files.extend([stats.join("rx_bytes"), stats.join("tx_bytes")]);
    }
    files.retain(|f| f.exists());
    Box::new(move || {
        let values: Vec<u64> = files.iter().filter_map(|f| read_u64(f)).collect();
        (!values.is_empty()).then(|| values.iter().fold(0u64, |a, v| a.wrapping_add(*v)))
    })
}

fn read_u64(path: &std::path::Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Every file of `dir` that holds one unsigned number (`lifespan` is a setting, not a
/// counter, and is skipped by name).
fn read_dir_into(
    into: &mut BTreeMap<(CounterSource, String), u64>,
    source: CounterSource,
    dir: &std::path::Path,
) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "lifespan" {
            continue;
        }
        if let Some(v) = read_u64(&e.path()) {
            into.insert((source, name), v);
        }
    }
}

/// The unit of a counter, from the kernel's documentation of its name.
pub fn unit_of(source: CounterSource, name: &str) -> CounterUnit {
    if source == CounterSource::Port && (name == "port_xmit_data" || name == "port_rcv_data") {
        return CounterUnit::Words4;
    }
    if name.ends_with("_duration") {
        return CounterUnit::Microseconds;
    }
    if name.ends_with("bytes") || name.ends_with("_octets") || name.contains("_bytes_") {
        return CounterUnit::Bytes;
    }
    if name.ends_with("packets")
        || name.ends_with("_pkts")
        || name.ends_with("_pause")
        || name.ends_with("frames")
        || name.contains("_packets_")
    {
        return CounterUnit::Packets;
    }
    CounterUnit::Events
}

/// The driver's hardware counters of a port through RDMA netlink (what `rdma statistic show
/// link DEV/PORT` prints): find the device's index in a dump of the devices, then ask for the
/// port's statistics. Empty on any error; no call waits more than a second.
mod rdma_nl {
    use std::time::Duration;

    use crate::ffi::netlink;

    const NLDEV: u16 = 5;
    const CMD_GET: u16 = 1;
    const CMD_STAT_GET: u16 = 17;
    const ATTR_DEV_INDEX: u16 = 1;
    const ATTR_DEV_NAME: u16 = 2;
    const ATTR_PORT_INDEX: u16 = 3;
    const ATTR_HWCOUNTERS: u16 = 80;
    const ATTR_HWCOUNTER_ENTRY: u16 = 81;
    const ATTR_HWCOUNTER_NAME: u16 = 82;
    const ATTR_HWCOUNTER_VALUE: u16 = 83;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_DUMP: u16 = 0x300;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    const HDR: usize = 16;

    fn request(kind: u16, flags: u16, seq: u32, attrs: &[(u16, u32)]) -> Vec<u8> {
        let mut m = vec![0u8; HDR];
        for (t, v) in attrs {
            m.extend_from_slice(&8u16.to_ne_bytes());
            m.extend_from_slice(&t.to_ne_bytes());
            m.extend_from_slice(&v.to_ne_bytes());
        }
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m[4..6].copy_from_slice(&((NLDEV << 10) + kind).to_ne_bytes());
        m[6..8].copy_from_slice(&flags.to_ne_bytes());
        m[8..12].copy_from_slice(&seq.to_ne_bytes());
        m
    }

    /// The netlink messages of one datagram: (type, payload).
    fn messages(buf: &[u8]) -> Vec<(u16, &[u8])> {
        let mut out = Vec::new();
        let mut at = 0;
        while at + HDR <= buf.len() {
            let len = u32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
            if len < HDR || at + len > buf.len() {
                break;
            }
            let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
            out.push((kind, &buf[at + HDR..at + len]));
            at += len.div_ceil(4) * 4;
        }
        out
    }

    /// The attributes of a payload: (type without the nested flag, data).
    pub(super) fn attrs(buf: &[u8]) -> Vec<(u16, &[u8])> {
        let mut out = Vec::new();
        let mut at = 0;
        while at + 4 <= buf.len() {
            let len = u16::from_ne_bytes([buf[at], buf[at + 1]]) as usize;
            let kind = u16::from_ne_bytes([buf[at + 2], buf[at + 3]]) & 0x3fff;
            if len < 4 || at + len > buf.len() {
                break;
            }
            out.push((kind, &buf[at + 4..at + len]));
            at += len.div_ceil(4) * 4;
        }
        out
    }

    fn u32_of(d: &[u8]) -> Option<u32> {
        Some(u32::from_ne_bytes(d.get(..4)?.try_into().ok()?))
    }

    fn text_of(d: &[u8]) -> String {
        let end = d.iter().position(|&c| c == 0).unwrap_or(d.len());
        String::from_utf8_lossy(&d[..end]).into_owned()
    }

    /// The counters of a STAT_GET reply's payload.
    pub(super) fn parse_stats(payload: &[u8]) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for (t, table) in attrs(payload) {
            if t != ATTR_HWCOUNTERS {
                continue;
            }
            for (e, entry) in attrs(table) {
                if e != ATTR_HWCOUNTER_ENTRY {
                    continue;
                }
                let (mut name, mut value) = (None, None);
                for (k, d) in attrs(entry) {
                    match k {
                        ATTR_HWCOUNTER_NAME => name = Some(text_of(d)),
                        ATTR_HWCOUNTER_VALUE => {
                            value = d
                                .get(..8)
                                .and_then(|b| b.try_into().ok())
                                .map(u64::from_ne_bytes)
                        }
                        _ => {}
                    }
                }
                if let (Some(n), Some(v)) = (name, value) {
                    out.push((n, v));
                }
            }
        }
        out
    }

    /// The RDMA netlink index of `device`, from a dump of the devices.
    pub(super) fn device_index(device: &str) -> Option<u32> {
        let sock = netlink::rdma_socket(Duration::from_secs(1))?;
        let mut buf = vec![0u8; 64 * 1024];
        netlink::send(&sock, &request(CMD_GET, NLM_F_REQUEST | NLM_F_DUMP, 1, &[]))?;
        let mut index = None;
        'dump: for _ in 0..64 {
            let n = netlink::recv(&sock, &mut buf)?;
            for (kind, payload) in messages(&buf[..n]) {
                if kind == NLMSG_DONE || kind == NLMSG_ERROR {
                    break 'dump;
                }
                let a = attrs(payload);
                let name = a
                    .iter()
                    .find(|(t, _)| *t == ATTR_DEV_NAME)
                    .map(|(_, d)| text_of(d));
                if name.as_deref() == Some(device) {
                    index = a
                        .iter()
                        .find(|(t, _)| *t == ATTR_DEV_INDEX)
                        .and_then(|(_, d)| u32_of(d));
                }
            }
        }
        index
    }

    /// The statistics of port `port` of the device of netlink index `index`.
    pub(super) fn hw_counters(index: u32, port: u8) -> Vec<(String, u64)> {
        let Some(sock) = netlink::rdma_socket(Duration::from_secs(1)) else {
            return Vec::new();
        };
        let mut buf = vec![0u8; 64 * 1024];
        let req = request(
            CMD_STAT_GET,
            NLM_F_REQUEST,
            2,
            &[(ATTR_DEV_INDEX, index), (ATTR_PORT_INDEX, u32::from(port))],
        );
        if netlink::send(&sock, &req).is_none() {
            return Vec::new();
        }
        let Some(n) = netlink::recv(&sock, &mut buf) else {
            return Vec::new();
        };
        messages(&buf[..n])
            .into_iter()
            .filter(|(k, _)| *k == (NLDEV << 10) + CMD_STAT_GET)
            .flat_map(|(_, p)| parse_stats(p))
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::path::Path;

    fn write(root: &Path, rel: &str, v: u64) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{v}\n")).unwrap();
    }

    #[test]
    fn reads_port_hw_and_netdev_counters_and_their_deltas() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let base = "sys/class/infiniband/rxe0/ports/1";
        write(root, &format!("{base}/counters/port_xmit_data"), 100);
        write(root, &format!("{base}/hw_counters/rcvd_seq_err"), 5);
        write(root, &format!("{base}/hw_counters/lifespan"), 10);
        write(root, "sys/class/net/net1/statistics/rx_dropped", 1);
        write(root, "sys/class/net/net1/carrier_changes", 2);
        fs::write(root.join("sys/class/net/net1/statistics/junk"), "n/a").unwrap();
        let roots = SysRoots::under(root);
        let t = CounterTarget::new("rxe0", 1, Some("net1".into()));
        let before = Snapshot::read(&roots, &t);
        assert_eq!(before.len(), 4, "{:?}", before.values);
        write(root, &format!("{base}/counters/port_xmit_data"), 350);
        write(root, &format!("{base}/hw_counters/rcvd_seq_err"), 9);
        write(root, "sys/class/net/net1/carrier_changes", 1);
        let after = Snapshot::read(&roots, &t);
        let r = before.delta(&after, Role::Client, &t);
        assert_eq!(r.get(CounterSource::Port, "port_xmit_data"), Some(250));
        assert_eq!(r.get(CounterSource::Hw, "rcvd_seq_err"), Some(4));
        assert_eq!(r.get(CounterSource::Netdev, "rx_dropped"), Some(0));
        // A counter that went backwards (reset) says nothing.
        assert_eq!(r.get(CounterSource::Netdev, "carrier_changes"), None);
        assert_eq!(r.get(CounterSource::Hw, "lifespan"), None);
        let unit = |n: &str| r.deltas.iter().find(|x| x.name == n).unwrap().unit;
        assert_eq!(unit("port_xmit_data"), CounterUnit::Words4);
        assert_eq!(unit("rcvd_seq_err"), CounterUnit::Events);
    }

    #[test]
    fn a_device_without_counters_gives_an_empty_snapshot() {
        let d = tempfile::tempdir().unwrap();
        let t = CounterTarget::new("nope", 1, None);
        assert!(Snapshot::read(&SysRoots::under(d.path()), &t).is_empty());
    }

    /// A netlink attribute: length, type, data padded to 4 bytes.
    fn attr(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut a = ((4 + data.len()) as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(data);
        a.resize(a.len().div_ceil(4) * 4, 0);
        a
    }

    #[test]
    fn rdma_netlink_statistics_parse() {
        let entry = |name: &str, v: u64| {
            let mut e = attr(82, format!("{name}\0").as_bytes());
            e.extend(attr(83, &v.to_ne_bytes()));
            attr(81 | 0x8000, &e)
        };
        let mut table = entry("sent_pkts", 12345);
        table.extend(entry("rcvd_seq_err", 7));
        let mut payload = attr(1, &3u32.to_ne_bytes());
        payload.extend(attr(80 | 0x8000, &table));
        assert_eq!(
            rdma_nl::parse_stats(&payload),
            [
                ("sent_pkts".to_string(), 12345),
                ("rcvd_seq_err".to_string(), 7)
            ]
        );
        // A truncated attribute ends the parse without a panic.
        assert!(rdma_nl::attrs(&payload[..payload.len() - 3]).len() <= 2);
    }

    #[test]
    fn units_follow_the_names() {
        use CounterSource::*;
        assert_eq!(
            unit_of(Netdev, "rx_prio3_pause_duration"),
            CounterUnit::Microseconds
        );
        assert_eq!(unit_of(Netdev, "tx_prio3_pause"), CounterUnit::Packets);
        assert_eq!(unit_of(Netdev, "tx_prio0_bytes"), CounterUnit::Bytes);
        assert_eq!(unit_of(Netdev, "rx_packets"), CounterUnit::Packets);
        assert_eq!(unit_of(Hw, "np_cnp_sent"), CounterUnit::Events);
    }
}

//! Where the polling thread runs: a CPU of the NIC's NUMA node by default, as perftest 6.29
//! pins itself, so that completions and the buffer stay on the NIC's side of the machine.

use crate::sysfs::SysRoots;
use results::rdmabw::params::CpuChoice;

/// The CPUs of a kernel cpulist (`0-3,8-11`, `5`), in order; `None` when it does not parse.
pub fn parse_cpulist(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// The NUMA node of RDMA device `device` and that node's CPUs, when sysfs knows them (a
/// software device such as rxe has no PCI device, hence no node).
pub fn nic_node(roots: &SysRoots, device: &str) -> Option<(u32, Vec<u32>)> {
    let node_file = roots
        .sys
        .join("class/infiniband")
        .join(device)
        .join("device/numa_node");
    let node: i64 = std::fs::read_to_string(node_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let node = u32::try_from(node).ok()?;
    let list = std::fs::read_to_string(
        roots
            .sys
            .join(format!("devices/system/node/node{node}/cpulist")),
    )
    .ok()?;
    Some((node, parse_cpulist(&list)?))
}

/// `choice` made concrete for `device`: `Numa` becomes the first CPU of the NIC's node that
/// this process may run on (`allowed`), or `Unbound` when the node or such a CPU is unknown.
pub fn resolve(roots: &SysRoots, device: &str, choice: CpuChoice, allowed: &[u32]) -> CpuChoice {
    match choice {
        CpuChoice::Numa => nic_node(roots, device)
            .and_then(|(_, cpus)| cpus.into_iter().find(|c| allowed.contains(c)))
            .map_or(CpuChoice::Unbound, CpuChoice::Cpu),
        other => other,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn cpulists_parse() {
        assert_eq!(parse_cpulist("0-3,8-9\n"), Some(vec![0, 1, 2, 3, 8, 9]));
        assert_eq!(parse_cpulist("5"), Some(vec![5]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("x"), None);
    }

    /// Two nodes, the NIC on node 1 (CPUs 4-7); this process may run on 0-5.
    #[test]
    fn the_first_allowed_cpu_of_the_nics_node_is_chosen() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let dev = root.join("sys/class/infiniband/mlx5_0/device");
        fs::create_dir_all(&dev).unwrap();
        fs::write(dev.join("numa_node"), "1\n").unwrap();
        for (n, list) in [(0, "0-3"), (1, "4-7")] {
            let p = root.join(format!("sys/devices/system/node/node{n}"));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("cpulist"), list).unwrap();
        }
        let roots = SysRoots::under(root);
        let allowed = [0, 1, 2, 3, 4, 5];
        assert_eq!(nic_node(&roots, "mlx5_0"), Some((1, vec![4, 5, 6, 7])));
        assert_eq!(
            resolve(&roots, "mlx5_0", CpuChoice::Numa, &allowed),
            CpuChoice::Cpu(4)
        );
        assert_eq!(
            resolve(&roots, "mlx5_0", CpuChoice::Numa, &[6, 7]),
            CpuChoice::Cpu(6)
        );
        // None of the node's CPUs allowed, an unknown node (rxe: -1), or no such device.
        assert_eq!(
            resolve(&roots, "mlx5_0", CpuChoice::Numa, &[0]),
            CpuChoice::Unbound
        );
        fs::write(dev.join("numa_node"), "-1\n").unwrap();
        assert_eq!(
            resolve(&roots, "mlx5_0", CpuChoice::Numa, &allowed),
            CpuChoice::Unbound
        );
        assert_eq!(
            resolve(&roots, "rxe0", CpuChoice::Numa, &allowed),
            CpuChoice::Unbound
        );
        // An explicit choice stays.
        assert_eq!(
            resolve(&roots, "rxe0", CpuChoice::Cpu(1), &allowed),
            CpuChoice::Cpu(1)
        );
        assert_eq!(
            resolve(&roots, "mlx5_0", CpuChoice::Unbound, &allowed),
            CpuChoice::Unbound
        );
    }

    #[test]
    fn the_calling_thread_is_pinned_where_asked() {
        let allowed = crate::ffi::allowed_cpus().unwrap();
        let cpu = *allowed.last().unwrap();
        let t = std::thread::spawn(move || {
            crate::ffi::pin_current_thread(cpu).unwrap();
            (
                crate::ffi::allowed_cpus().unwrap(),
                crate::ffi::current_cpu(),
            )
        });
        let (now, on) = t.join().unwrap();
        assert_eq!(now, vec![cpu]);
        assert_eq!(on, Some(cpu));
    }
}

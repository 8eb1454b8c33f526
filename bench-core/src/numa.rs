//! Where the polling thread runs: a CPU of the NIC's NUMA node by default, as perftest 6.29
//! pins itself, so that completions and the buffer stay on the NIC's side of the machine.

use crate::sysfs::SysRoots;
use wire::params::CpuChoice;

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

/// The CPUs of NUMA node `node` (`devices/system/node/nodeN/cpulist`).
pub fn node_cpus(roots: &SysRoots, node: u32) -> Option<Vec<u32>> {
    let list = std::fs::read_to_string(
        roots
            .sys
            .join(format!("devices/system/node/node{node}/cpulist")),
    )
    .ok()?;
    parse_cpulist(&list)
}

/// `choice` made concrete for a NIC on NUMA node `nic_node` (the rail's, as sysfs gave it: a
/// software device such as rxe has none): `Numa` becomes the first CPU of that node that this
/// process may run on (`allowed`), or `Unbound` when the node or such a CPU is unknown.
pub fn cpu_for(
    roots: &SysRoots,
    nic_node: Option<u32>,
    choice: CpuChoice,
    allowed: &[u32],
) -> CpuChoice {
    match choice {
        CpuChoice::Numa => nic_node
            .and_then(|node| node_cpus(roots, node))
            .and_then(|cpus| cpus.into_iter().find(|c| allowed.contains(c)))
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
        for (n, list) in [(0, "0-3"), (1, "4-7")] {
            let p = root.join(format!("sys/devices/system/node/node{n}"));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("cpulist"), list).unwrap();
        }
        let roots = SysRoots::under(root);
        let allowed = [0, 1, 2, 3, 4, 5];
        assert_eq!(node_cpus(&roots, 1), Some(vec![4, 5, 6, 7]));
        assert_eq!(
            cpu_for(&roots, Some(1), CpuChoice::Numa, &allowed),
            CpuChoice::Cpu(4)
        );
        assert_eq!(
            cpu_for(&roots, Some(1), CpuChoice::Numa, &[6, 7]),
            CpuChoice::Cpu(6)
        );
        // None of the node's CPUs allowed, a node sysfs does not list, or no node (rxe).
        assert_eq!(
            cpu_for(&roots, Some(1), CpuChoice::Numa, &[0]),
            CpuChoice::Unbound
        );
        assert_eq!(
            cpu_for(&roots, Some(7), CpuChoice::Numa, &allowed),
            CpuChoice::Unbound
        );
        assert_eq!(
            cpu_for(&roots, None, CpuChoice::Numa, &allowed),
            CpuChoice::Unbound
        );
        // The node comes from the device's sysfs entry: a PCI device's `numa_node`, where -1
        // (no node) reads as none, like a software device's missing one.
        let pci = root.join("sys/devices/pci0000:00/0000:5a:00.0");
        fs::create_dir_all(&pci).unwrap();
        fs::create_dir_all(root.join("sys/class/infiniband/mlx5_0")).unwrap();
        std::os::unix::fs::symlink(&pci, root.join("sys/class/infiniband/mlx5_0/device")).unwrap();
        let node = || crate::sysfs::read_identity(&roots, "mlx5_0").and_then(|d| d.numa_node);
        fs::write(pci.join("numa_node"), "1\n").unwrap();
        assert_eq!(node(), Some(1));
        assert_eq!(
            cpu_for(&roots, node(), CpuChoice::Numa, &allowed),
            CpuChoice::Cpu(4)
        );
        fs::write(pci.join("numa_node"), "-1\n").unwrap();
        assert_eq!(
            cpu_for(&roots, node(), CpuChoice::Numa, &allowed),
            CpuChoice::Unbound
        );
        // An explicit choice stays.
        assert_eq!(
            cpu_for(&roots, None, CpuChoice::Cpu(1), &allowed),
            CpuChoice::Cpu(1)
        );
        assert_eq!(
            cpu_for(&roots, Some(1), CpuChoice::Unbound, &allowed),
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

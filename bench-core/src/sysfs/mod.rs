//! RDMA device discovery from sysfs, with injectable roots so that it runs on fixture trees.
//!
//! What is read, per device under `<sys>/class/infiniband/<dev>`:
//! - `device` (a link to the PCI function: its basename is the PCI address; virtual devices such
//!   as rxe have none), `device/numa_node`, `device/driver` (link; basename is the driver),
//!   `node_type`, `parent` (rxe/siw: the netdev they were created on, informational only);
//! - per port `ports/<n>/`: `state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `link_layer`,
//!   `rate` ("100 Gb/sec (4X EDR)"), `lid`;
//! - the GID table, `ports/<n>/gids/<i>` (always readable; unused or hidden entries read as
//!   zeros), `ports/<n>/gid_attrs/types/<i>` ("RoCE v2", "IB/RoCE v1"; the read fails for empty
//!   entries) and `ports/<n>/gid_attrs/ndevs/<i>` (the netdev; the read fails for empty
//!   entries and for GIDs whose netdev lives in another network namespace).
//!
//! A failed read is recorded as `None`, never as an error: that is how the kernel says "not
//! yours" or "empty". (Fixture trees emulate a failing read with a missing file or with a
//! directory in its place.)
//!
//! Which netdev of this namespace belongs to which device: physical NICs (PF or VF) show it as
//! `<sys>/class/net/<if>/device/infiniband/<dev>`; rxe devices and IPvlan/macvlan children only
//! through the `gid_attrs/ndevs` entries.
//!
//! Whether a GID belongs to *this* network namespace: its netdev must be readable, an interface
//! of that name must exist in `<sys>/class/net` (sysfs is mounted per network namespace in
//! containers and by `ip netns exec`), **and** the GID's address must be configured here:
//! an IPv6 GID must appear with that interface in `<proc>/net/if_inet6`, an IPv4-mapped GID
//! must be a local address in `<proc>/net/fib_trie` (both files show the reading process's
//! namespace). The address check is what matters in practice: on the lab's kernel (7.2, shared
//! RDMA netns mode) `ndevs` reads succeed for other namespaces' GIDs too, and every pod calls
//! its rail interface `net1`, so names alone collide. When neither `/proc/net` file can be read,
//! the check falls back to the name alone (see [`LocalAddrs::known`]).
//!
//! `<sys>/class/infiniband_verbs/uverbs<N>/ibdev` maps devices to their `/dev/infiniband/uverbs<N>`
//! node, which is checked under the `dev` root: a container can see a device in sysfs without
//! having been given its character device.
//!
//! One file a concern: `roots.rs` (the roots and small readers), `addrs.rs` (this namespace's
//! addresses), `inventory.rs` (what is found), `discover.rs` (how it is read).

mod addrs;
mod discover;
mod inventory;
mod roots;

pub use addrs::{parse_fib_trie_local, parse_if_inet6, LocalAddrs};
pub use discover::{
    discover, discover_with, read_device, read_device_scoped, read_identity, uverbs_node, GidScope,
    PopulatedGids,
};
pub use inventory::{
    BindingSource, GidEntry, Inventory, LinkLayer, NetdevBinding, Port, PortState, RdmaDevice,
};
pub(crate) use roots::{dir_names, link_basename};
pub use roots::{
    host_name, interface_mtu, is_pci_address, memlock_limit_kib, natural_cmp, normalize_bus_id,
    parse_rate_gbps, read_attr, SysRoots,
};

#[cfg(test)]
mod tests;

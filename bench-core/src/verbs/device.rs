//! Opening a device, querying it, and the protection domain that owns everything else.

use std::io;
use std::sync::Arc;

use sideway::ibverbs::device::{
    DeviceInfo, DeviceList, GetDeviceListErrorKind, OpenDeviceErrorKind,
};
use sideway::ibverbs::device_context::{
    AllocateProtectionDomainErrorKind, DeviceContext, QueryDeviceErrorKind, QueryGidErrorKind,
    QueryPortErrorKind,
};
use sideway::ibverbs::protection_domain::ProtectionDomain;

use super::PathMtu;
use crate::error::Error;
use crate::gid::Gid;
use crate::sysfs::{self, LinkLayer, PortState, SysRoots};

/// Device facts every child handle carries for its error messages.
#[derive(Debug)]
pub(crate) struct DevMeta {
    pub(crate) name: String,
    pub(crate) is_rxe: bool,
    pub(crate) driver: String,
    pub(crate) roots: SysRoots,
}

/// Limits of the device that the engine sizes its queues by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Physical ports.
    pub ports: u8,
    /// Max work requests per queue.
    pub max_qp_wr: u32,
    /// Max CQ entries.
    pub max_cqe: u32,
    /// Max QPs.
    pub max_qp: u32,
    /// Max bytes per memory region.
    pub max_mr_size: u64,
}

/// A port as verbs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number.
    pub num: u8,
    /// Logical state.
    pub state: PortState,
    /// Physical state code (5 = LinkUp).
    pub phys_state: u8,
    /// Active path MTU; `None` if the driver reports a value outside the IB set.
    pub active_mtu: Option<PathMtu>,
    /// Largest MTU the port supports.
    pub max_mtu: Option<PathMtu>,
    /// LID.
    pub lid: u16,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// GID table length.
    pub gid_table_len: u32,
}

fn phys_state_name(p: u8) -> &'static str {
    match p {
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "PhyTest",
        _ => "NoStateChange",
    }
}

fn list_error(kind: GetDeviceListErrorKind) -> Error {
    let source = match kind {
        GetDeviceListErrorKind::Ibverbs(e) => e,
        other => io::Error::other(other.to_string()),
    };
    match source.raw_os_error() {
        // rdma-core-mummy's loader sets EOPNOTSUPP when libibverbs.so.1 could not be opened.
        Some(libc::EOPNOTSUPP) => Error::VerbsLibraryMissing { source },
        _ => Error::NoKernelSupport { source },
    }
}

/// An open RDMA device (an `ibv_context`).
#[derive(Debug, Clone)]
pub struct Device {
    pub(crate) ctx: Arc<DeviceContext>,
    pub(crate) meta: Arc<DevMeta>,
    caps: DeviceCaps,
}

impl Device {
    /// Names of the devices libibverbs lists.
    pub fn list() -> Result<Vec<String>, Error> {
        let list = DeviceList::new().map_err(|e| list_error(e.0))?;
        Ok(list.iter().map(|d| d.name()).collect())
    }

    /// Opens `name`, using the real `/sys`, `/dev` and `/proc` for diagnostics.
    pub fn open(name: &str) -> Result<Device, Error> {
        Self::open_with(&SysRoots::default(), name)
    }

    /// Opens `name`; `roots` are where sysfs facts for error messages are read from.
    pub fn open_with(roots: &SysRoots, name: &str) -> Result<Device, Error> {
        let list = DeviceList::new().map_err(|e| list_error(e.0))?;
        let names: Vec<String> = list.iter().map(|d| d.name()).collect();
        let Some(dev) = list.iter().find(|d| d.name() == name) else {
            if names.is_empty() {
                let sysfs_devices = sysfs::discover(roots).map(|i| i.devices.len()).unwrap_or(0);
                return Err(Error::NoDevices { sysfs_devices });
            }
            return Err(Error::UnknownDevice {
                name: name.to_string(),
                available: names,
            });
        };
        // Only who the device is: this runs for every test, and the ports were read when the
        // rail was resolved.
        let sys = sysfs::read_identity(roots, name);
        let ctx = dev.open().map_err(|e| Error::OpenDevice {
            device: name.to_string(),
            uverbs: sysfs::uverbs_node(roots, name)
                .map(|u| roots.dev.join("infiniband").join(u).display().to_string())
                .unwrap_or_default(),
            source: match e.0 {
                OpenDeviceErrorKind::Ibverbs(e) => e,
                other => io::Error::other(other.to_string()),
            },
        })?;
        let attr = ctx.query_device().map_err(|e| Error::Query {
            device: name.to_string(),
            what: "the device attributes".into(),
            source: match e.0 {
                QueryDeviceErrorKind::Ibverbs(e) => e,
                other => io::Error::other(other.to_string()),
            },
        })?;
        let u = |v: i32| u32::try_from(v).unwrap_or(0);
        let caps = DeviceCaps {
            ports: attr.phys_port_cnt(),
            max_qp_wr: u(attr.max_qp_wr()),
            max_cqe: u(attr.max_cqe()),
            max_qp: u(attr.max_qp()),
            max_mr_size: attr.max_mr_size(),
        };
        let is_rxe = sys.as_ref().map_or(name.starts_with("rxe"), |d| d.is_rxe());
        let driver = sys
            .as_ref()
            .map_or_else(|| "unknown driver".into(), |d| d.driver_label());
        Ok(Device {
            ctx,
            meta: Arc::new(DevMeta {
                name: name.to_string(),
                is_rxe,
                driver,
                roots: roots.clone(),
            }),
            caps,
        })
    }

    /// Device name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Whether this is Soft-RoCE (rxe).
    pub fn is_rxe(&self) -> bool {
        self.meta.is_rxe
    }

    /// Device limits.
    pub fn caps(&self) -> DeviceCaps {
        self.caps
    }

    /// Queries a port (`ibv_query_port`).
    pub fn port(&self, port: u8) -> Result<PortInfo, Error> {
        if port == 0 || port > self.caps.ports {
            return Err(Error::NoSuchPort {
                device: self.meta.name.clone(),
                port,
                ports: self.caps.ports,
            });
        }
        let pa = self.ctx.query_port(port).map_err(|e| Error::Query {
            device: self.meta.name.clone(),
            what: format!("port {port}"),
            source: match e.source {
                QueryPortErrorKind::Ibverbs(e) => e,
                other => io::Error::other(other.to_string()),
            },
        })?;
        let a = &pa.attr;
        let state = match a.state {
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            5 => PortState::ActiveDefer,
            s => PortState::Other(format!("{s}")),
        };
        let link_layer = match a.link_layer {
            1 => LinkLayer::InfiniBand,
            2 => LinkLayer::Ethernet,
            // IBV_LINK_LAYER_UNSPECIFIED: old drivers, means InfiniBand.
            0 => LinkLayer::InfiniBand,
            o => LinkLayer::Other(format!("{o}")),
        };
        Ok(PortInfo {
            num: port,
            state,
            phys_state: a.phys_state,
            active_mtu: PathMtu::from_ibv(a.active_mtu),
            max_mtu: PathMtu::from_ibv(a.max_mtu),
            lid: a.lid,
            link_layer,
            gid_table_len: u32::try_from(a.gid_tbl_len).unwrap_or(0),
        })
    }

    /// Queries a port and requires it to be ACTIVE with a known active MTU.
    pub fn active_port(&self, port: u8) -> Result<PortInfo, Error> {
        let info = self.port(port)?;
        if info.state != PortState::Active {
            return Err(Error::PortDown {
                device: self.meta.name.clone(),
                port,
                state: info.state.name().to_string(),
                phys_state: phys_state_name(info.phys_state).to_string(),
            });
        }
        Ok(info)
    }

    /// Reads a GID through verbs (`ibv_query_gid`).
    pub fn gid(&self, port: u8, index: u32) -> Result<Gid, Error> {
        self.ctx
            .query_gid(port, index)
            .map(|g| Gid(g.raw))
            .map_err(|e| Error::Query {
                device: self.meta.name.clone(),
                what: format!("GID index {index} of port {port}"),
                source: match e.source {
                    QueryGidErrorKind::Ibverbs(e) => e,
                    other => io::Error::other(other.to_string()),
                },
            })
    }

    /// The populated entries of every port's GID table, as `(port, index)`, in one call
    /// (`ibv_query_gid_table`) where sysfs needs a file read per entry.
    pub fn populated_gids(&self) -> Result<Vec<(u8, u32)>, Error> {
        let table = self.ctx.query_gid_table().map_err(|e| Error::Query {
            device: self.meta.name.clone(),
            what: "the GID table".into(),
            source: match e.0 {
                sideway::ibverbs::device_context::QueryGidTableErrorKind::Ibverbs(e) => e,
                other => io::Error::other(other.to_string()),
            },
        })?;
        Ok(table
            .iter()
            .filter_map(|g| Some((u8::try_from(g.port_num()).ok()?, g.gid_index())))
            .collect())
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<Pd, Error> {
        let pd = self.ctx.alloc_pd().map_err(|e| Error::Create {
            device: self.meta.name.clone(),
            what: "a protection domain".into(),
            source: match e.0 {
                AllocateProtectionDomainErrorKind::Ibverbs(e) => e,
                other => io::Error::other(other.to_string()),
            },
        })?;
        Ok(Pd {
            pd,
            ctx: Arc::clone(&self.ctx),
            meta: Arc::clone(&self.meta),
            caps: self.caps,
        })
    }
}

/// A protection domain; registers memory (`buffer.rs`) and creates CQs (`cq.rs`) and QPs
/// (`qp.rs`): each kind of child has its constructors in its own file.
#[derive(Debug, Clone)]
pub struct Pd {
    pub(crate) pd: Arc<ProtectionDomain>,
    pub(crate) ctx: Arc<DeviceContext>,
    pub(crate) meta: Arc<DevMeta>,
    pub(crate) caps: DeviceCaps,
}

impl Pd {
    /// Name of the device.
    pub fn device_name(&self) -> &str {
        &self.meta.name
    }
}

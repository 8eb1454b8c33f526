//! GID values: the 128-bit GID, its type, and its text form (on the control channel and in
//! reports). A leaf: it imports nothing of the crate, so that sysfs discovery, the verbs
//! wrappers and rail selection ([`crate::rails::select`]) can all use it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A 128-bit GID in network byte order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// Whether every byte is zero (empty entry, or hidden from this namespace).
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), as RoCE v2 builds from an
    /// interface's IPv4 address.
    pub fn ipv4_mapped(&self) -> Option<Ipv4Addr> {
        self.to_ipv6().to_ipv4_mapped()
    }

    /// Whether it is an IPv6 link-local (`fe80::/10`) GID.
    pub fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && (self.0[1] & 0xc0) == 0x80
    }

    /// The GID as an IPv6 address.
    pub fn to_ipv6(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }

    /// The IP address shown to users: IPv4 for IPv4-mapped GIDs.
    pub fn ip(&self) -> IpAddr {
        match self.ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(self.to_ipv6()),
        }
    }
}

impl fmt::Display for Gid {
    /// The kernel's sysfs format: eight groups of four hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(
                f,
                "{:02x}{:02x}",
                pair[0],
                pair.get(1).copied().unwrap_or(0)
            )?;
        }
        Ok(())
    }
}

/// The text is not a GID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a GID: {0:?}")]
pub struct ParseGidError(pub String);

impl FromStr for Gid {
    type Err = ParseGidError;

    /// Accepts the sysfs format and any IPv6 text form.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim()
            .parse::<Ipv6Addr>()
            .map(|a| Gid(a.octets()))
            .map_err(|_| ParseGidError(s.to_string()))
    }
}

impl From<[u8; 16]> for Gid {
    fn from(raw: [u8; 16]) -> Self {
        Gid(raw)
    }
}

/// GID type (`gid_attrs/types/<i>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GidType {
    /// `RoCE v2`: UDP/IP encapsulation, routable. What railbench uses on Ethernet.
    RoceV2,
    /// `IB/RoCE v1`: native IB GIDs, or RoCE v1 (Ethernet, not routable).
    IbRoceV1,
    /// Anything else, verbatim.
    Other(String),
}

impl GidType {
    /// Parses the sysfs text.
    pub fn parse(s: &str) -> GidType {
        match s.trim() {
            "RoCE v2" => GidType::RoceV2,
            "IB/RoCE v1" => GidType::IbRoceV1,
            other => GidType::Other(other.to_string()),
        }
    }
}

impl fmt::Display for GidType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GidType::RoceV2 => f.write_str("RoCE v2"),
            GidType::IbRoceV1 => f.write_str("IB/RoCE v1"),
            GidType::Other(s) => f.write_str(s),
        }
    }
}

/// Formats a GID as eight colon-separated groups of four hex digits (as `ibv_devinfo -v`):
/// [`Gid`]'s `Display`.
pub fn format_gid(gid: &[u8; 16]) -> String {
    Gid(*gid).to_string()
}

/// Parses a GID written as an IPv6 address: the full eight-group form of [`format_gid`], or
/// any shortened form (`fe80::1`, `::ffff:10.0.0.1`).
pub fn parse_gid(text: &str) -> Option<[u8; 16]> {
    text.parse::<Ipv6Addr>().ok().map(|a| a.octets())
}

/// A raw GID (`[u8; 16]`) as its text in serde (`#[serde(with = "crate::gid::text")]`).
pub(crate) mod text {
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(gid: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_gid(gid))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
        let text = String::deserialize(d)?;
        super::parse_gid(&text).ok_or_else(|| {
            de::Error::custom(format_args!(
                "invalid GID {text:?}: expected 8 colon-separated hex groups"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_parse_display() {
        let g: Gid = "0000:0000:0000:0000:0000:ffff:0ae0:0001"
            .parse()
            .unwrap_or_default();
        assert_eq!(g.ipv4_mapped(), Some(Ipv4Addr::new(10, 224, 0, 1)));
        assert_eq!(g.to_string(), "0000:0000:0000:0000:0000:ffff:0ae0:0001");
        assert_eq!(g.ip().to_string(), "10.224.0.1");
        let ll: Gid = "fe80:0000:0000:0000:5054:00ff:fe12:3401"
            .parse()
            .unwrap_or_default();
        assert!(ll.is_link_local());
        assert!(ll.ipv4_mapped().is_none());
        assert!(Gid::default().is_zero());
        assert!("zz".parse::<Gid>().is_err());
    }
}

//! The small languages of the mode options: rail patterns (`rdma-ipvlan-{0..15}`), resource
//! requests (`nvidia.com/hostdev=16`), taint tolerations (`nvidia.com/gpu:NoSchedule`) and
//! device number lists (`0-17`).

use std::collections::BTreeSet;

use super::ModeError;

/// The longest range a pattern may expand to: rails are counted in tens, a typo such as
/// `{0..1500}` should fail rather than build a pod with 1501 networks.
const MAX_EXPANSION: u32 = 256;

/// Expand a comma-separated list whose items may hold one `{A..B}` range each:
/// `rdma-ipvlan-{0..3}` is `rdma-ipvlan-0,rdma-ipvlan-1,rdma-ipvlan-2,rdma-ipvlan-3`, and
/// `a,b-{1..2}` is `a,b-1,b-2`. Order is kept (the Multus networks annotation is in rail
/// order); commas inside braces do not split.
pub fn expand_pattern(s: &str) -> Result<Vec<String>, ModeError> {
    let bad = |why: &str| ModeError::Pattern {
        pattern: s.to_string(),
        why: why.to_string(),
    };
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.checked_sub(1).ok_or_else(|| bad("`}` without `{`"))?,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if depth != 0 {
        return Err(bad("`{` without `}`"));
    }
    items.push(cur);

    let mut out = Vec::new();
    for item in items.iter().map(|i| i.trim()) {
        if item.is_empty() {
            return Err(bad("empty item"));
        }
        let Some(open) = item.find('{') else {
            out.push(item.to_string());
            continue;
        };
        let close = item.find('}').ok_or_else(|| bad("`{` without `}`"))?;
        let (head, range, tail) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
        if tail.contains('{') {
            return Err(bad("only one `{A..B}` range per item"));
        }
        let (a, b) = range
            .split_once("..")
            .ok_or_else(|| bad("a range is written `{A..B}`, as `{0..15}`"))?;
        let num = |t: &str| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| bad(&format!("`{t}` is not a number")))
        };
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(bad("the range runs backwards"));
        }
        if b - a >= MAX_EXPANSION {
            return Err(bad(&format!(
                "a range may hold at most {MAX_EXPANSION} items"
            )));
        }
        out.extend((a..=b).map(|i| format!("{head}{i}{tail}")));
    }
    Ok(out)
}

/// A number list `0-17` or `0,2,4-7`, sorted and without duplicates.
pub fn number_list(s: &str) -> Result<Vec<u32>, ModeError> {
    let bad = |why: String| ModeError::Pattern {
        pattern: s.to_string(),
        why,
    };
    let mut set = BTreeSet::new();
    for part in s.split(',').map(str::trim) {
        let num = |t: &str| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| bad(format!("`{t}` is not a number")))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b || b - a >= MAX_EXPANSION {
                    return Err(bad(format!(
                        "`{part}` is not a range of at most {MAX_EXPANSION}"
                    )));
                }
                set.extend(a..=b);
            }
            None => {
                set.insert(num(part)?);
            }
        }
    }
    Ok(set.into_iter().collect())
}

/// One resource a container asks for: `nvidia.com/hostdev=16`, as limits (and so requests:
/// extended resources cannot be overcommitted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceSpec {
    /// Resource name, `vendor-domain/name` for device plugin resources.
    pub name: String,
    /// How many, as a Kubernetes quantity (`16`, `1`).
    pub quantity: String,
}

impl ResourceSpec {
    /// Parse `NAME=COUNT`; `NAME` may hold a `{A..B}` range (one resource per rail, as SR-IOV
    /// policies often define: `nvidia.com/sriov_rdma_rail{0..7}=1`).
    pub fn parse_many(s: &str) -> Result<Vec<ResourceSpec>, ModeError> {
        let (name, qty) = s.rsplit_once('=').ok_or_else(|| ModeError::Pattern {
            pattern: s.to_string(),
            why: "a resource is written NAME=COUNT, as nvidia.com/hostdev=16".into(),
        })?;
        let qty = qty.trim();
        let valid_qty = !qty.is_empty()
            && qty.len() <= 12
            && qty.chars().all(|c| c.is_ascii_digit())
            && qty.parse::<u64>().is_ok_and(|n| n > 0);
        if !valid_qty {
            return Err(ModeError::Pattern {
                pattern: s.to_string(),
                why: format!(
                    "`{qty}` is not a positive whole number (device plugin resources are counted)"
                ),
            });
        }
        let names = expand_pattern(name.trim())?;
        for n in &names {
            if !is_resource_name(n) {
                return Err(ModeError::Pattern {
                    pattern: s.to_string(),
                    why: format!("`{n}` is not a resource name (DOMAIN/NAME, as nvidia.com/gpu)"),
                });
            }
        }
        Ok(names
            .into_iter()
            .map(|name| ResourceSpec {
                name,
                quantity: qty.to_string(),
            })
            .collect())
    }
}

/// `cpu`, `memory`, `ephemeral-storage`, or `PREFIX/NAME` as Kubernetes validates an extended
/// resource name: PREFIX a DNS-1123 subdomain (lower case, digits, `-` and `.`; no dot needed:
/// smarter-device-manager's `smarter-devices/infiniband_uverbs0` is valid and served), NAME a
/// qualified name's part (letters, digits, `-`, `_`, `.`, beginning and ending alphanumeric).
fn is_resource_name(n: &str) -> bool {
    let ends_alnum = |t: &str| {
        t.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && t.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let prefix = |t: &str| {
        t.len() <= 253
            && t.split('.').all(|label| {
                label.len() <= 63
                    && ends_alnum(label)
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    };
    let name = |t: &str| {
        t.len() <= 63
            && ends_alnum(t)
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    match n.split_once('/') {
        Some((p, rest)) => prefix(p) && name(rest),
        None => matches!(n, "cpu" | "memory" | "ephemeral-storage"),
    }
}

/// A taint the pods tolerate: `KEY[=VALUE][:EFFECT]`, with operator `Exists` when there is no
/// value and `Equal` when there is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TolerationSpec {
    /// Taint key, as `nvidia.com/gpu`.
    pub key: String,
    /// Taint value; `None` tolerates every value.
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`; `None` tolerates every effect.
    pub effect: Option<String>,
}

impl TolerationSpec {
    /// The toleration GPU nodes usually need: `nvidia.com/gpu:NoSchedule`, as in the field
    /// reports' pods.
    pub fn gpu() -> Self {
        TolerationSpec {
            key: "nvidia.com/gpu".into(),
            value: None,
            effect: Some("NoSchedule".into()),
        }
    }
}

impl std::str::FromStr for TolerationSpec {
    type Err = ModeError;

    fn from_str(s: &str) -> Result<Self, ModeError> {
        let bad = |why: &str| ModeError::Pattern {
            pattern: s.to_string(),
            why: why.to_string(),
        };
        let (kv, effect) = match s.rsplit_once(':') {
            Some((kv, e)) => (kv, Some(e)),
            None => (s, None),
        };
        if let Some(e) = effect {
            if !matches!(e, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                return Err(bad(
                    "the effect is NoSchedule, PreferNoSchedule or NoExecute",
                ));
            }
        }
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (kv, None),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(bad("a toleration is written KEY[=VALUE][:EFFECT]"));
        }
        Ok(TolerationSpec {
            key: key.to_string(),
            value,
            effect: effect.map(str::to_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rail_patterns_expand_in_order() {
        assert_eq!(
            expand_pattern("rdma-ipvlan-{0..3}").expect("ok"),
            [
                "rdma-ipvlan-0",
                "rdma-ipvlan-1",
                "rdma-ipvlan-2",
                "rdma-ipvlan-3"
            ]
        );
        assert_eq!(
            expand_pattern("a, ns/b-{9..10}-x ,c").expect("ok"),
            ["a", "ns/b-9-x", "ns/b-10-x", "c"]
        );
        assert_eq!(expand_pattern("rdma-ipvlan-{0..15}").expect("ok").len(), 16);
        for bad in [
            "",
            "a,,b",
            "x-{3..1}",
            "x-{0..15",
            "x-0..15}",
            "x-{a..b}",
            "x-{0..9}{0..9}",
            "x-{0..999}",
        ] {
            assert!(expand_pattern(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn number_lists() {
        assert_eq!(number_list("0-3,7,2").expect("ok"), [0, 1, 2, 3, 7]);
        assert_eq!(number_list("0-17").expect("ok").len(), 18);
        assert!(number_list("3-1").is_err());
        assert!(number_list("x").is_err());
    }

    #[test]
    fn resources() {
        let r = ResourceSpec::parse_many("nvidia.com/hostdev=16").expect("ok");
        assert_eq!(
            r,
            [ResourceSpec {
                name: "nvidia.com/hostdev".into(),
                quantity: "16".into()
            }]
        );
        let per_rail = ResourceSpec::parse_many("nvidia.com/sriov_rdma_rail{0..1}=1").expect("ok");
        assert_eq!(per_rail.len(), 2);
        assert_eq!(per_rail[1].name, "nvidia.com/sriov_rdma_rail1");
        // A prefix without a dot is a valid DNS-1123 subdomain: smarter-device-manager's.
        let uverbs =
            ResourceSpec::parse_many("smarter-devices/infiniband_uverbs{0..1}=1").expect("ok");
        assert_eq!(uverbs[1].name, "smarter-devices/infiniband_uverbs1");
        for bad in [
            "nvidia.com/hostdev",
            "nvidia.com/hostdev=0",
            "nvidia.com/hostdev=1.5",
            "hostdev=1",
            "=1",
            "Nvidia.com/hostdev=1",
            "nvidia..com/hostdev=1",
            "-nvidia.com/hostdev=1",
            "nvidia.com/_hostdev=1",
            "nvidia.com/=1",
        ] {
            assert!(
                ResourceSpec::parse_many(bad).is_err(),
                "{bad:?} must be refused"
            );
        }
    }

    #[test]
    fn tolerations() {
        let t: TolerationSpec = "nvidia.com/gpu:NoSchedule".parse().expect("ok");
        assert_eq!(t, TolerationSpec::gpu());
        let v: TolerationSpec = "dedicated=rdma".parse().expect("ok");
        assert_eq!(v.value.as_deref(), Some("rdma"));
        assert_eq!(v.effect, None);
        assert!("k:Sometimes".parse::<TolerationSpec>().is_err());
        assert!(":NoSchedule".parse::<TolerationSpec>().is_err());
    }
}

//! A group of nodes named as the culprit on a rail: `railsweep fleet --pattern topology
//! --topology-label KEY` groups the nodes by a node label (a rack, a leaf switch) and names a
//! group whose cross-group pairs are all slow while its inside pairs are fine (its uplink), not
//! its nodes. Part of the machine output: the JSON envelope's `group_culprits` and the
//! OpenMetrics `railbench_group_*` gauges.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One group named as the culprit on one rail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupCulprit {
    /// The node label that groups the nodes (`--topology-label`), e.g. `example.com/rack`.
    pub label: String,
    /// The group: the label's value on its nodes (`(none)` for the nodes without the label).
    pub value: String,
    /// The rail.
    pub rail: u32,
    /// How many of its cross-group pairs were measured on that rail (all of them slow).
    pub cross_pairs: u64,
    /// Median average bandwidth of those pairs, Gb/s (a failed pair counts 0).
    pub cross_median_gbps: f64,
    /// How many of its inside pairs were measured on that rail.
    pub inside_pairs: u64,
    /// Median average bandwidth of those pairs, Gb/s.
    pub inside_median_gbps: f64,
    /// Every group with cross-group pairs was named with it: the pairs between the groups are
    /// slow, not one group's (the spine, or every group's uplink).
    pub every_group: bool,
}

impl GroupCulprit {
    /// The group's name, `KEY=VALUE`.
    pub fn name(&self) -> String {
        format!("{}={}", self.label, self.value)
    }
}

/// The `suspect:` line's text after `suspect: `.
impl fmt::Display for GroupCulprit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "group {}: cross-group pairs slow on rail {} (all {}, median {:.3} Gb/s), inside pairs fine ({}, median {:.3} Gb/s): ",
            self.name(),
            self.rail,
            self.cross_pairs,
            self.cross_median_gbps,
            self.inside_pairs,
            self.inside_median_gbps
        )?;
        if self.every_group {
            f.write_str("so are every other group's: suspect the spine, or every group's uplink")
        } else {
            f.write_str("suspect its uplink")
        }
    }
}

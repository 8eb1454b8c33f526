//! `railsweep fleet`: every rail of every pair of nodes, in rounds of disjoint pairs.
//!
//! * [`schedule`]: which pairs are measured in which round (`all-pairs`, `ring`, `one-to-all`);
//! * [`culprit`]: per-rail fleet medians, outliers, and the likely culprits.
#![forbid(unsafe_code)]

pub mod culprit;
pub mod schedule;

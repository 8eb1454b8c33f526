//! railsweep's library: rail-by-rail rdmabw sweeps between two pods, through the Kubernetes API
//! or network namespaces of this machine.
//!
//! * [`runner`]: where commands run ([`runner::Runner`], with a Kubernetes and a local runner).
#![forbid(unsafe_code)]

pub mod runner;

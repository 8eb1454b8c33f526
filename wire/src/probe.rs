//! What `rdmabw probe --json` prints: can an RDMA test run in this pod, check by check (the
//! checks themselves are bench-core's `probe` module).

use serde::{Deserialize, Serialize};

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Fine.
    Pass,
    /// Works, with a risk or a cost; or the check does not apply here (the detail says so).
    Warn,
    /// RDMA (or NCCL) will not work as it is.
    Fail,
}

impl Status {
    /// `PASS`, `WARN` or `FAIL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Short name, e.g. `uverbs-open`.
    pub name: String,
    /// Outcome.
    pub status: Status,
    /// One line: what was found.
    pub detail: String,
    /// One line: what to do about it; `None` for a PASS.
    pub fix: Option<String>,
}

/// How many checks ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// PASS count.
    pub pass: usize,
    /// WARN count.
    pub warn: usize,
    /// FAIL count.
    pub fail: usize,
}

/// What `rdmabw probe --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// [`super::REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Version of the rdmabw that printed it.
    pub rdmabw_version: String,
    /// Host (pod) name.
    pub host: String,
    /// The checks in order.
    pub checks: Vec<Check>,
    /// Counts per status.
    pub summary: Summary,
}

impl ProbeReport {
    /// Whether any check failed (`rdmabw probe` then exits 1).
    pub fn failed(&self) -> bool {
        self.summary.fail > 0
    }

    /// The check named `name`.
    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

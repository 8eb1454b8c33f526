//! How a check ends: passed, failed (an assertion about the output did not hold: exit 1), or
//! could not be made (a file that does not read, a bad argument: exit 2).

use std::fmt;

use results::RailResult;

/// An assertion about the output that did not hold.
#[derive(Debug)]
pub struct Failed(pub String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

/// A failed assertion, as an error the caller returns.
pub fn failed(what: impl Into<String>) -> anyhow::Error {
    Failed(what.into()).into()
}

/// `check!(cond, "format", args...)`: return a [`Failed`] saying what did not hold.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($arg:tt)+) => {
        let held: bool = $cond;
        if !held {
            return Err($crate::outcome::failed(format!($($arg)+)));
        }
    };
}

/// An optional value as a message shows it: the value, or `none`.
pub fn or_none<T: fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".to_string(), |v| v.to_string())
}

/// A row in one line, for messages: where it ran and how it ended.
pub fn describe(r: &RailResult) -> String {
    let bw = r
        .bw_avg_gbps
        .map_or_else(|| "-".to_string(), |b| format!("{b:.4}"));
    let mut s = format!(
        "{} rail {}: {} {} {} -> {} {} {}: {} {bw} Gb/s",
        r.network_mode.as_str(),
        r.rail,
        r.client_node,
        r.client_interface,
        r.client_rdma_device,
        r.server_node,
        r.server_interface,
        r.server_rdma_device,
        r.status.as_str(),
    );
    if let Some(e) = &r.error {
        s.push_str(&format!(" ({e})"));
    }
    s
}

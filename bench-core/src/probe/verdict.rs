//! How a check says what it found: one [`Check`] row, and lists cut short for its detail.

use wire::probe::{Check, Status};

pub(super) fn check(name: &str, status: Status, detail: String, fix: Option<&str>) -> Check {
    Check {
        name: name.to_string(),
        status,
        detail,
        fix: fix.map(str::to_string),
    }
}

pub(super) fn list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        items.join(", ")
    } else {
        format!("{}, ... ({} in all)", items[..max].join(", "), items.len())
    }
}

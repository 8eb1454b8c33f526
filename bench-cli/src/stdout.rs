//! Machine output on standard output, written so that a reader that went away comes back as an
//! `io::Error` (`print!` would panic on EPIPE); [`crate::exit`] turns that into exit 0.

use std::io::{self, Write};

use serde::Serialize;

/// Writes `text` as it is, and flushes it.
pub fn text(text: &str) -> io::Result<()> {
    let mut w = io::stdout().lock();
    w.write_all(text.as_bytes())?;
    w.flush()
}

/// Writes `line` and a newline, and flushes them.
pub fn line(line: &str) -> io::Result<()> {
    text(&format!("{line}\n"))
}

/// One JSON document, indented, and a newline.
pub fn json_pretty<T: Serialize>(v: &T) -> anyhow::Result<()> {
    Ok(line(&serde_json::to_string_pretty(v)?)?)
}

/// One JSON document on one line.
pub fn json_line<T: Serialize>(v: &T) -> anyhow::Result<()> {
    Ok(line(&serde_json::to_string(v)?)?)
}

/// A listing: with `json`, `v` as one indented JSON document; else `render(v)`.
pub fn listing<T: Serialize>(
    json: bool,
    v: &T,
    render: impl FnOnce(&T) -> String,
) -> anyhow::Result<()> {
    if json {
        json_pretty(v)
    } else {
        Ok(text(&render(v))?)
    }
}

//! What the CLI tests share: rdmabw run with arguments, its output as text, the sysfs fixtures.
//! Each test binary includes this file and uses what it needs of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// A sysfs tree of bench-core's fixtures.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../bench-core/tests/fixtures")
        .join(name)
}

/// `rdmabw ARGS...`, run to its end.
pub fn rdmabw(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running rdmabw: {e}"))
}

/// Bytes a command printed, as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

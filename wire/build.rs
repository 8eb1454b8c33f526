//! The build's version: the workspace's release (`CARGO_PKG_VERSION`) plus, as semver build
//! metadata, the commit it was built from (`0.1.0+cd06ab8`, `git describe --always`;
//! uncommitted changes are not shown). Without git or a checkout (a source tarball) it is the
//! release alone. Written to `$OUT_DIR/version.rs`, a file rather than an environment variable,
//! so that a compiler cache keyed by the sources sees it change.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The file behind git's name `what` (HEAD, refs/heads/main), from this crate's folder.
fn git_path(what: &str) -> Option<PathBuf> {
    git(&["rev-parse", "--git-path", what]).map(|p| Path::new(env!("CARGO_MANIFEST_DIR")).join(p))
}

fn main() {
    let release = env!("CARGO_PKG_VERSION");
    let version = match git(&["describe", "--always", "--abbrev=7"]) {
        // Semver's build metadata is dot-separated [0-9A-Za-z-].
        Some(d) => format!(
            "{release}+{}",
            d.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', ".")
        ),
        None => release.to_string(),
    };
    // Run again when the commit moves: HEAD, and the branch it names.
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for p in std::iter::once("HEAD")
        .chain(branch.as_deref())
        .filter_map(git_path)
    {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("version.rs");
    let text = format!(
        "/// This build's version: the release, then `+` and the commit it was built from.\n\
         pub const VERSION: &str = {version:?};\n"
    );
    // Written only when it changes: an unchanged version rebuilds nothing.
    if std::fs::read_to_string(&out).ok().as_deref() != Some(text.as_str()) {
        std::fs::write(&out, text).expect("writes version.rs");
    }
}

//! `rdmabw --version` names the build: the release, then `+` and the commit it was built from
//! (`git describe --always --abbrev=7` of this checkout), so that two builds of one release
//! can be told apart in a pod, a report or a bug.

use std::process::Command;

fn git_describe() -> Option<String> {
    let out = Command::new("git")
        .args(["describe", "--always", "--abbrev=7"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let d = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !d.is_empty()).then_some(d)
}

#[test]
fn the_version_is_the_release_and_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .arg("--version")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let version = text.strip_prefix("rdmabw ").expect("rdmabw X.Y.Z");
    assert_eq!(version, results::VERSION);
    match git_describe() {
        Some(d) => assert_eq!(version, format!("{}+{d}", env!("CARGO_PKG_VERSION"))),
        // A build from a source tarball: the release alone.
        None => assert_eq!(version, env!("CARGO_PKG_VERSION")),
    }
}

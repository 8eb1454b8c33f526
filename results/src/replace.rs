//! Replacing a file whole: the one way railbench writes a file that a reader may be reading
//! (the sink's JSON snapshot, `-o`, `--metrics`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Result, ResultsError};

/// Names tried for a temporary file before giving up (each taken already, by a file or a link).
const TRIES: u32 = 64;

/// Replace `path` with `bytes` atomically: written to a temporary file beside it, synced, and
/// renamed over it, so that a reader (or a crash) sees the old file or the new one, whole.
///
/// The temporary file is created exclusively in `path`'s folder (`O_CREAT|O_EXCL`, which fails
/// on a link rather than follow it), under a name of this process, a counter and the clock
/// (`.NAME.PID-N-NANOS.tmp`), the next name tried when one is taken: a link planted at any name
/// there is never followed, so no other file is written through one. (Its name used to be
/// `NAME.tmp` or `NAME.tmp-PID`, opened like any file: a symbolic link planted there had its
/// target overwritten.) It gets the mode an ordinary file gets (0666 less the umask), so that a
/// reader running as another user (node-exporter's textfile collector) still reads the
/// result; a failed write leaves no temporary file behind. std alone: the rdmabw that
/// `--inject` copies links this crate and gains no dependency.
///
/// # Errors
///
/// [`ResultsError::Io`] naming `path` when the folder cannot take the temporary file, or the
/// write, the sync or the rename fails.
pub fn replace_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let (tmp, mut file) = create_beside(path).map_err(|e| ResultsError::io(path.display(), e))?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(ResultsError::io(path.display(), e));
    }
    sync_parent(path);
    Ok(())
}

/// A new file in `path`'s folder, created exclusively under a name no one else has taken.
fn create_beside(path: &Path) -> std::io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut last = None;
    for _ in 0..TRIES {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}-{n}-{nanos}.tmp", std::process::id()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AlreadyExists)))
}

/// Make a created or renamed directory entry durable. Best effort: some
/// file systems do not support syncing a directory, and the data itself has
/// already been synced.
pub(crate) fn sync_parent(path: &Path) {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(dir) = File::open(parent) {
        let _ = dir.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// Issue 53, finding 4: the temporary file beside a file being replaced followed a
    /// symbolic link planted at its name (`NAME.tmp`, `NAME.tmp-PID`) and overwrote the link's
    /// target. With a link at every name the old code used, the target is untouched, the file
    /// holds the new bytes, and nothing is left beside it.
    #[test]
    fn a_link_planted_beside_the_file_is_never_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").expect("victim");
        let out = dir.path().join("out.prom");
        let pid = std::process::id();
        let planted: Vec<String> = vec![
            "out.prom.tmp".into(),
            format!("out.prom.tmp-{pid}"),
            ".out.prom.tmp".into(),
        ];
        for name in &planted {
            symlink(&victim, dir.path().join(name)).expect("plant a link");
        }
        for round in 0..2 {
            replace_file(&out, format!("new {round}").as_bytes()).expect("replaces");
            assert_eq!(std::fs::read(&victim).expect("victim"), b"keep me");
            assert_eq!(
                std::fs::read_to_string(&out).expect("out"),
                format!("new {round}")
            );
        }
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("lists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want = planted;
        want.extend(["out.prom".into(), "victim".into()]);
        want.sort();
        assert_eq!(left, want, "no temporary file left");
    }

    /// The file gets an ordinary file's mode, not a temporary file's 0600.
    #[test]
    fn the_file_is_made_with_an_ordinary_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("m.prom");
        replace_file(&out, b"x").expect("writes");
        let mode = std::fs::metadata(&out).expect("meta").permissions().mode() & 0o777;
        let umask = {
            let probe = dir.path().join("probe");
            std::fs::write(&probe, b"").expect("probe");
            0o666
                & !(std::fs::metadata(&probe)
                    .expect("meta")
                    .permissions()
                    .mode()
                    & 0o777)
        };
        assert_eq!(mode, 0o666 & !umask, "mode {mode:o}");
    }

    /// A folder that cannot take the file is an error naming the file.
    #[test]
    fn a_missing_folder_is_named() {
        let e = replace_file(Path::new("/nonexistent/dir/out.csv"), b"x").expect_err("fails");
        assert!(
            e.to_string().starts_with("/nonexistent/dir/out.csv: "),
            "{e}"
        );
    }
}

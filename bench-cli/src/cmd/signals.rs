//! How a test is stopped: SIGINT/SIGTERM, or (`--exit-on-stdin-eof`) the end of standard input.

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::exit::Exit;

/// SIGINT/SIGTERM raise `stop` and `signalled`; a test then ends within milliseconds and tells
/// its peer. `signalled` tells a signal from the other ways `stop` is raised (the end of standard
/// input), which are no interruption. If the process is still there 6 s later (blocked in a
/// set-up phase), it exits anyway. The thread sleeps in the signal iterator until a signal
/// comes: no periodic wake-up during the window.
pub fn install_signals(stop: &Arc<AtomicBool>, signalled: &Arc<AtomicBool>) -> std::io::Result<()> {
    let sigs = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM];
    for sig in sigs {
        signal_hook::flag::register(sig, Arc::clone(signalled))?;
        signal_hook::flag::register(sig, Arc::clone(stop))?;
    }
    let mut signals = signal_hook::iterator::Signals::new(sigs)?;
    thread::Builder::new()
        .name("rdmabw-signal".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                exit_after_grace("interrupted");
            }
        })?;
    Ok(())
}

/// After `stop` was raised: give the tests 6 s to end and tell their peers, then exit as
/// interrupted if the process is still there (blocked in a set-up phase), saying `why`.
fn exit_after_grace(why: &str) -> ! {
    thread::sleep(Duration::from_secs(6));
    results::say!("rdmabw: {why}");
    std::process::exit(i32::from(Exit::Interrupted.code()));
}

/// `--exit-on-stdin-eof`: a thread reads standard input (what follows the secret line) to its
/// end, then raises `stop` as SIGTERM would, and exits after 6 s if the process is still there
/// (as after a signal). A launcher that holds the input open ends the daemon by closing it, and
/// the daemon does not outlive a launcher that died.
pub fn stop_at_stdin_eof(stop: &Arc<AtomicBool>) -> std::io::Result<()> {
    let stop = Arc::clone(stop);
    thread::Builder::new()
        .name("rdmabw-stdin".into())
        .spawn(move || {
            use std::io::Read;
            let mut sink = [0u8; 4096];
            let mut input = std::io::stdin().lock();
            loop {
                match input.read(&mut sink) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        results::say!("rdmabw server: cannot read standard input ({e}): stopping");
                        break;
                    }
                }
            }
            results::say!("rdmabw server: standard input closed: stopping");
            stop.store(true, Ordering::SeqCst);
            exit_after_grace("stopped at the end of standard input");
        })?;
    Ok(())
}

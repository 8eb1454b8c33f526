//! What the daemon tests share: a free port, the daemon started as a launcher starts it, and
//! its stderr as lines on a channel.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// The secret the tests' daemons are given on their first line of input: 128 bits as 32 hex
/// digits, the shortest rdmabw takes (railsweep's are as long).
pub const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// A free TCP port on the loopback address.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    l.local_addr().expect("address").port()
}

/// `rdmabw server --daemon --bind BIND -p PORT --secret-stdin EXTRA...` on a free port, its
/// secret written and its input left open; its stderr lines on the receiver.
pub fn daemon_on(bind: &str, extra: &[&str]) -> (Child, mpsc::Receiver<String>, u16) {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .args(["server", "--daemon", "--bind", bind, "-p"])
        .arg(port.to_string())
        .arg("--secret-stdin")
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts rdmabw server --daemon");
    child
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(format!("{SECRET}\n").as_bytes())
        .expect("writes the secret");
    let rx = lines(child.stderr.take().expect("stderr"));
    (child, rx, port)
}

/// The lines of `from`, read on a thread of their own, as they come.
pub fn lines(from: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

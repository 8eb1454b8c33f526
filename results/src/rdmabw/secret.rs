//! A run's shared secret: railsweep makes one per sweep and hands it to the rdmabw daemon and
//! clients it starts on their standard input; the daemon serves only clients whose `Hello`
//! carries it, so that another pod of the node's network cannot run tests on it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// rdmabw's flag that reads the run's secret from the first line of standard input.
pub const SECRET_STDIN: &str = "--secret-stdin";

/// A run's secret. Its `Debug` hides the value, so it cannot reach a log by accident; it
/// travels in the `Hello` and on standard input, never on a command line.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunSecret(String);

impl RunSecret {
    /// The longest secret taken, in bytes (railsweep's are 32 hex digits).
    pub const MAX_LEN: usize = 256;

    /// A secret from its text, trimmed; `None` when empty, too long or not printable ASCII.
    pub fn new(text: &str) -> Option<RunSecret> {
        let t = text.trim();
        (!t.is_empty() && t.len() <= Self::MAX_LEN && t.bytes().all(|b| b.is_ascii_graphic()))
            .then(|| RunSecret(t.to_string()))
    }

    /// A secret of `bytes` (random ones: the caller's), as hex digits.
    pub fn from_bytes(bytes: &[u8]) -> Option<RunSecret> {
        RunSecret::new(&bytes.iter().map(|x| format!("{x:02x}")).collect::<String>())
    }

    /// The secret's text, to hand to a child process.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What a process started with [`SECRET_STDIN`] reads first: the secret and a newline.
    pub fn stdin_line(&self) -> Vec<u8> {
        format!("{}\n", self.0).into_bytes()
    }

    /// Whether `presented` is this secret, compared in time that does not depend on where
    /// the two differ.
    pub fn admits(&self, presented: Option<&RunSecret>) -> bool {
        let Some(p) = presented else {
            return false;
        };
        let (a, b) = (self.0.as_bytes(), p.0.as_bytes());
        let mut diff = a.len() ^ b.len();
        for (i, x) in a.iter().enumerate() {
            diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
        }
        diff == 0
    }
}

impl fmt::Debug for RunSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunSecret(..)")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_trimmed_checked_and_hidden() {
        let s = RunSecret::new(" 0123abcd\n").unwrap();
        assert_eq!(s.expose(), "0123abcd");
        assert_eq!(s.stdin_line(), b"0123abcd\n");
        assert_eq!(format!("{s:?}"), "RunSecret(..)");
        assert!(RunSecret::new("").is_none());
        assert!(RunSecret::new("has space").is_none());
        assert!(RunSecret::new(&"x".repeat(RunSecret::MAX_LEN + 1)).is_none());
        assert_eq!(
            RunSecret::from_bytes(&[0x01, 0xab]).unwrap().expose(),
            "01ab"
        );
    }

    #[test]
    fn only_the_same_secret_is_admitted() {
        let s = RunSecret::new("run-4f2a").unwrap();
        assert!(s.admits(RunSecret::new("run-4f2a").as_ref()));
        assert!(!s.admits(RunSecret::new("run-4f2b").as_ref()));
        assert!(!s.admits(RunSecret::new("run-4f2").as_ref()));
        assert!(!s.admits(RunSecret::new("run-4f2aa").as_ref()));
        assert!(!s.admits(None));
    }
}

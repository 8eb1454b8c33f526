//! A run's shared secret: railsweep makes one per sweep and hands it to the rdmabw daemon and
//! clients it starts on their standard input; the daemon serves only clients whose `Hello`
//! carries it, so that another pod of the node's network cannot run tests on it. rdmabw takes
//! a secret of 128 bits at least ([`RunSecret::given`]: 32 hex digits or more).

use std::fmt;

use serde::{Deserialize, Serialize};

/// rdmabw's flag that reads the run's secret from the first line of standard input.
pub const SECRET_STDIN: &str = "--secret-stdin";

/// A run's secret. Its `Debug` hides the value, so it cannot reach a log by accident; it
/// travels in the `Hello` and on standard input, never on a command line.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunSecret(String);

/// Why rdmabw does not take a secret it is given ([`RunSecret::given`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// Nothing but white space.
    #[error("it is empty: give 32 hex digits or more (`openssl rand -hex 16` makes one)")]
    Empty,
    /// White space inside, or a character that is not printable ASCII.
    #[error(
        "it has a space or a character that is not printable ASCII: give 32 to {max} printable \
         characters (`openssl rand -hex 16` makes one)",
        max = RunSecret::MAX_LEN
    )]
    NotPrintable,
    /// Longer than [`RunSecret::MAX_LEN`].
    #[error(
        "it is {len} characters, more than the {max} taken",
        max = RunSecret::MAX_LEN
    )]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// Shorter than [`RunSecret::MIN_LEN`].
    #[error(
        "it is {len} characters, fewer than {min}: a secret holds at least 128 bits, written as \
         {min} hex digits or more (railsweep's are; `openssl rand -hex 16` makes one)",
        min = RunSecret::MIN_LEN
    )]
    TooShort {
        /// Its length.
        len: usize,
    },
}

impl RunSecret {
    /// The longest secret taken, in bytes (railsweep's are 32 hex digits).
    pub const MAX_LEN: usize = 256;

    /// The fewest characters of a secret rdmabw is given ([`RunSecret::given`]): 128 bits
    /// written as hex digits, as railsweep makes them ([`RunSecret::from_bytes`] of 16 random
    /// bytes). A secret of other characters counts by its length too: 32 characters at least.
    pub const MIN_LEN: usize = 32;

    /// A secret given to rdmabw to serve or present (`--secret-stdin`, `RDMABW_SECRET`,
    /// `rdmabw batch`'s first line), trimmed: 32 ([`RunSecret::MIN_LEN`]) to 256 printable
    /// ASCII characters without spaces. The one rule for what rdmabw takes; a hello may still
    /// present anything, which is only compared.
    pub fn given(text: &str) -> Result<RunSecret, SecretError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(SecretError::Empty);
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(SecretError::NotPrintable);
        }
        if t.len() > Self::MAX_LEN {
            return Err(SecretError::TooLong { len: t.len() });
        }
        if t.len() < Self::MIN_LEN {
            return Err(SecretError::TooShort { len: t.len() });
        }
        Ok(RunSecret(t.to_string()))
    }

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
    fn a_given_secret_holds_128_bits_and_railsweeps_do() {
        // railsweep's: 16 random bytes as 32 hex digits.
        let ours = RunSecret::from_bytes(&[0x5a; 16]).unwrap();
        assert_eq!(RunSecret::given(ours.expose()), Ok(ours));
        assert_eq!(
            RunSecret::given(&"a".repeat(31)),
            Err(SecretError::TooShort { len: 31 })
        );
        assert_eq!(
            RunSecret::from_bytes(&[0x5a; 15]).map(|s| RunSecret::given(s.expose())),
            Some(Err(SecretError::TooShort { len: 30 }))
        );
        let e = RunSecret::given("abc123").unwrap_err().to_string();
        assert!(
            e.contains("fewer than 32")
                && e.contains("128 bits")
                && e.contains("openssl rand -hex 16"),
            "{e}"
        );
        assert_eq!(RunSecret::given(" \n"), Err(SecretError::Empty));
        assert_eq!(
            RunSecret::given(&format!("{} x", "a".repeat(40))),
            Err(SecretError::NotPrintable)
        );
        assert_eq!(
            RunSecret::given(&"a".repeat(RunSecret::MAX_LEN + 1)),
            Err(SecretError::TooLong { len: 257 })
        );
        assert!(RunSecret::given(&format!(" {}\n", "f".repeat(32))).is_ok());
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

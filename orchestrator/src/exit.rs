//! railsweep's exit codes, for every subcommand, in one place (ripgrep's way: commands return
//! what they found, and only `main` turns it into a status).
//!
//! | code | meaning |
//! |------|---------|
//! | 0    | all is well (also: stdout was closed early, a broken pipe) |
//! | 1    | the command ran but found a problem: a rail failed or fell below a threshold, a mode or a pair was not measured |
//! | 2    | usage or set-up error (clap uses the same for bad arguments) |
//! | 130  | interrupted by Ctrl-C (128 + SIGINT, as shells report it) |

use std::process::ExitCode;

/// How a command that ran to its end came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Everything asked for was measured and is ok (exit 0).
    Ok,
    /// The command ran but found a problem in the results (exit 1).
    Problems,
    /// Ctrl-C ended it; what was measured is kept (exit 130).
    Interrupted,
}

impl Verdict {
    /// [`Verdict::Problems`] when `bad`, else [`Verdict::Ok`].
    pub fn problems_if(bad: bool) -> Verdict {
        if bad {
            Verdict::Problems
        } else {
            Verdict::Ok
        }
    }

    /// The worse of two verdicts (interrupted over problems over ok).
    #[must_use]
    pub fn and(self, other: Verdict) -> Verdict {
        match (self, other) {
            (Verdict::Interrupted, _) | (_, Verdict::Interrupted) => Verdict::Interrupted,
            (Verdict::Problems, _) | (_, Verdict::Problems) => Verdict::Problems,
            _ => Verdict::Ok,
        }
    }
}

/// The status after Ctrl-C; also what a second Ctrl-C leaves with at once.
pub const INTERRUPTED: u8 = 130;
/// The status of a run that found a problem.
const PROBLEMS: u8 = 1;
/// The status of a usage or set-up error.
const ERROR: u8 = 2;

/// What a command's help says of its exit statuses: what 0, 1 and 2 mean for it, and 130 where
/// it can be interrupted. The numbers are written here only.
pub fn help(ok: &str, problems: &str, error: &str, interrupted: Option<&str>) -> String {
    let mut s = format!("Exit status: 0 {ok}; {PROBLEMS} {problems}; {ERROR} {error}");
    if let Some(i) = interrupted {
        s += &format!("; {INTERRUPTED} {i}");
    }
    s + "."
}

/// Whether `err` is, anywhere in its chain, a broken pipe: the reader of stdout went away
/// (`railsweep report ... | head`), which is no failure of railsweep.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// An error and its causes in words for a user, outermost first, joined with `: `: each cause
/// once (one whose text an outer one already holds is left out), and a Kubernetes API error in
/// kubectl's words (`Error from server (NotFound): pods "A" not found`), never kube-rs's form
/// of it, which repeats the message and adds Rust's debug form of the whole `Status`.
pub fn words(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let (text, last) = match cause.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(s)) => (
                format!(
                    "Error from server ({}): {}",
                    if s.reason.is_empty() {
                        s.code.to_string()
                    } else {
                        s.reason.clone()
                    },
                    s.message
                ),
                true,
            ),
            Some(kube::Error::HyperError(_) | kube::Error::Service(_)) => {
                ("cannot reach the Kubernetes API server".to_string(), false)
            }
            _ => (cause.to_string(), false),
        };
        if !parts.iter().any(|p| p.contains(text.as_str())) {
            parts.push(text);
        }
        if last {
            break;
        }
    }
    parts.join(": ")
}

/// The exit status of a command's outcome; an error is printed (to stderr) unless it is a
/// broken pipe.
pub fn status(outcome: anyhow::Result<Verdict>) -> ExitCode {
    match outcome {
        Ok(Verdict::Ok) => ExitCode::SUCCESS,
        Ok(Verdict::Problems) => ExitCode::from(PROBLEMS),
        Ok(Verdict::Interrupted) => ExitCode::from(INTERRUPTED),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            results::say!("railsweep: error: {}", words(&err));
            ExitCode::from(ERROR)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn a_broken_pipe_anywhere_in_the_chain_is_success() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let err = Err::<(), _>(pipe)
            .context("cannot write to stdout")
            .context("printing the table")
            .expect_err("an error");
        assert!(is_broken_pipe(&err));
        assert_eq!(status(Err(err)), ExitCode::SUCCESS);
        let other = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(!is_broken_pipe(&other.context("cannot read x")));
    }

    #[test]
    fn a_kubernetes_error_is_the_servers_words_once_and_no_debug_form() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "message": "pods \"A\" not found", "reason": "NotFound", "code": 404,
            "details": {"name": "A", "kind": "pods"}
        }))
        .expect("a Status");
        let err =
            anyhow::Error::new(kube::Error::Api(status.boxed())).context("cannot get pod lab/A");
        assert_eq!(
            words(&err),
            "cannot get pod lab/A: Error from server (NotFound): pods \"A\" not found"
        );
        assert!(!format!("{err:#}").is_empty() && !words(&err).contains("Status {"));
        // A cause already said by its context is said once.
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let said = io.to_string();
        let err = anyhow::Error::new(io).context(format!("cannot read x.csv: {said}"));
        assert_eq!(words(&err), format!("cannot read x.csv: {said}"));
    }

    #[test]
    fn verdicts_combine_to_the_worse() {
        assert_eq!(Verdict::Ok.and(Verdict::Problems), Verdict::Problems);
        assert_eq!(
            Verdict::Problems.and(Verdict::Interrupted),
            Verdict::Interrupted
        );
        assert_eq!(Verdict::Ok.and(Verdict::Ok), Verdict::Ok);
        assert_eq!(Verdict::problems_if(true), Verdict::Problems);
    }
}

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

/// An error said on stderr already, before a clean-up that could have hidden it (a pod's
/// diagnosis, issue 56): it still ends the command with exit 2, and is not said again.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AlreadySaid(pub String);

/// Whether `err` was said already ([`AlreadySaid`]).
pub fn already_said(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<AlreadySaid>())
}

/// What a second Ctrl-C says before railsweep leaves at once: the pods a clean-up in progress
/// would leave behind and how to delete them (`None` where nothing would be left).
type LeaveWords = Box<dyn Fn() -> Option<String> + Send>;

/// The words of the clean-up in progress, if any.
static LEAVING: std::sync::Mutex<Option<LeaveWords>> = std::sync::Mutex::new(None);

/// While a clean-up runs, what [`leave_now`] says; `None` when it has ended.
pub fn on_leave(words: Option<LeaveWords>) {
    if let Ok(mut l) = LEAVING.lock() {
        *l = words;
    }
}

/// A second Ctrl-C: say what is left behind (the pods of a clean-up in progress, with the
/// command that deletes them) and exit 130 at once. The lock is held to the exit, so two
/// listeners of the same Ctrl-C say it once.
pub fn leave_now() -> ! {
    let guard = LEAVING.lock();
    if let Ok(g) = &guard {
        if let Some(said) = g.as_ref().and_then(|f| f()) {
            results::say!("{said}");
        }
    }
    std::process::exit(i32::from(INTERRUPTED));
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
    chain_words(err.chain().collect())
}

/// [`words`] of an error that is not an `anyhow::Error` (a typed error holding a kube-rs
/// error as its source).
pub fn error_words(err: &(dyn std::error::Error + 'static)) -> String {
    chain_words(std::iter::successors(Some(err), |e| e.source()).collect())
}

/// The API error among `causes`, in kubectl's words, and its text as kube-rs writes it (which
/// an outer error may hold, as kube-runtime's do: `failed to start watching object: ApiError:
/// ... (Status { ... })`).
fn api_cause(causes: &[&(dyn std::error::Error + 'static)]) -> Option<(String, String)> {
    causes.iter().find_map(|c| {
        if let Some(k) = c.downcast_ref::<kube::Error>() {
            Some((k.to_string(), kube_words(k)))
        } else if let Some(s) = c.downcast_ref::<kube::core::Status>() {
            Some((s.to_string(), status_words(s)))
        } else {
            c.downcast_ref::<Box<kube::core::Status>>()
                .map(|s| (s.to_string(), status_words(s)))
        }
    })
}

fn chain_words(causes: Vec<&(dyn std::error::Error + 'static)>) -> String {
    let api = api_cause(&causes);
    let mut parts: Vec<String> = Vec::new();
    for cause in &causes {
        let (text, last) = match api_cause(std::slice::from_ref(cause)) {
            // The API error ends the words: its sources are in them already.
            Some((_, said)) => (said, true),
            None => {
                let mut text = cause.to_string();
                if let Some((raw, said)) = &api {
                    text = text.replace(raw.as_str(), said);
                }
                (text, false)
            }
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

/// A kube-rs error in kubectl's words: the server's `Status` as kubectl prints it; a request
/// that `--request-timeout` gave up, so named; a server that cannot be reached, with why.
pub fn kube_words(err: &kube::Error) -> String {
    use std::error::Error as _;
    match err {
        kube::Error::Api(s) => status_words(s),
        kube::Error::Service(inner)
            if inner
                .downcast_ref::<crate::runner::timeout::RequestTimedOut>()
                .is_some() =>
        {
            inner.to_string()
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            let mut parts = vec!["cannot reach the Kubernetes API server".to_string()];
            let mut next = err.source();
            while let Some(cause) = next {
                next = cause.source();
                let text = cause.to_string();
                if !parts.iter().any(|p| p.contains(text.as_str())) {
                    parts.push(text);
                }
            }
            parts.join(": ")
        }
        other => other.to_string(),
    }
}

/// The reason kube-rs gives an error response whose body is no `Status` (a proxy's page).
const NOT_A_STATUS: &str = "Failed to parse error data";

/// An API server's `Status` as kubectl prints it: `Error from server (REASON): MESSAGE`. An
/// error response that carried no `Status` (a proxy's or a load balancer's page) is said as
/// kubectl says it, from its HTTP status, with the start of its body.
pub fn status_words(s: &kube::core::Status) -> String {
    if s.reason == NOT_A_STATUS || (s.reason.is_empty() && s.message.is_empty()) {
        let (reason, meaning) = http_reason(s.code);
        let body = excerpt(&s.message);
        return format!(
            "Error from server ({reason}): {meaning} (HTTP {}{})",
            s.code,
            if body.is_empty() {
                String::new()
            } else {
                format!(": {body}")
            }
        );
    }
    let reason = if s.reason.is_empty() {
        http_reason(s.code).0.to_string()
    } else {
        s.reason.clone()
    };
    format!("Error from server ({reason}): {}", s.message)
}

/// The reason and meaning kubectl gives an HTTP status whose body says nothing it can read.
fn http_reason(code: u16) -> (&'static str, &'static str) {
    match code {
        400 => ("BadRequest", "the server rejected our request for an unknown reason"),
        401 => ("Unauthorized", "the server has asked for the client to provide credentials"),
        403 => ("Forbidden", "the server does not allow access to the requested resource"),
        404 => ("NotFound", "the server could not find the requested resource"),
        405 => ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
        409 => ("Conflict", "the server reported a conflict"),
        422 => ("Invalid", "the server rejected our request due to an error in our request"),
        429 => ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
        500 => ("InternalError", "an error on the server has prevented the request from succeeding"),
        503 => ("ServiceUnavailable", "the server is currently unable to handle the request"),
        504 => ("Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request"),
        _ => ("Unknown", "an error on the server has prevented the request from succeeding"),
    }
}

/// The start of a response body, on one line: at most 160 characters.
fn excerpt(body: &str) -> String {
    const MAX: usize = 160;
    let line = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// The exit status of a command's outcome; an error is printed (to stderr) unless it is a
/// broken pipe.
pub fn status(outcome: anyhow::Result<Verdict>) -> ExitCode {
    match outcome {
        Ok(Verdict::Ok) => ExitCode::SUCCESS,
        Ok(Verdict::Problems) => ExitCode::from(PROBLEMS),
        Ok(Verdict::Interrupted) => ExitCode::from(INTERRUPTED),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) if already_said(&err) => ExitCode::from(ERROR),
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

    /// Issue 56: a 503 whose body is no `Status`, a 503 with one, and a watch's error wrapped in
    /// kube-runtime's errors (whose text holds kube-rs's debug form) are said as kubectl says
    /// them, never with Rust's debug text.
    #[test]
    fn api_errors_on_every_path_are_kubectls_words() {
        let page =
            kube::core::Status::failure("<html>upstream\n connect error</html>", NOT_A_STATUS)
                .with_code(503);
        let err = anyhow::Error::new(kube::Error::Api(page.boxed())).context("cannot delete pod a");
        assert_eq!(
            words(&err),
            "cannot delete pod a: Error from server (ServiceUnavailable): the server is currently \
             unable to handle the request (HTTP 503: <html>upstream connect error</html>)"
        );
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "message": "etcd is down", "reason": "ServiceUnavailable", "code": 503
        }))
        .expect("a Status");
        let watch = kube::runtime::wait::Error::ProbeFailed(
            kube::runtime::watcher::Error::WatchStartFailed(kube::Error::Api(status.boxed())),
        );
        assert!(
            watch.to_string().contains("Status {"),
            "kube-runtime's own text"
        );
        let said = error_words(&watch);
        assert!(
            said.ends_with("Error from server (ServiceUnavailable): etcd is down"),
            "{said}"
        );
        assert!(
            !said.contains("Status {") && !said.contains("ApiError"),
            "{said}"
        );
        let timed_out = kube::Error::Service(Box::new(crate::runner::timeout::RequestTimedOut(
            std::time::Duration::from_secs(2),
        )));
        assert_eq!(
            kube_words(&timed_out),
            "the server was unable to return a response in the time allotted (--request-timeout \
             2s: give a longer one, or 0 for no limit)"
        );
        let long = "x".repeat(500);
        assert_eq!(excerpt(&long).len(), 163);
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

//! The one guard over the pods (and ResourceClaimTemplates) railsweep creates, for `run`,
//! `compare` and `fleet` alike: from the moment a [`PodGuard`] holds the [`PodSet`], whatever
//! ends the command deletes what the set created. The normal ends are explicit and async:
//! [`PodGuard::finish`] (delete, wait for them to be gone, say so) and [`PodGuard::fail`] (the
//! same for pods that did not start, with the error). Any other end (an error returned with
//! `?`, a panic, a future dropped) drops the guard, and its `Drop` deletes them, under
//! [`DROP_DELETE_TIMEOUT`], without waiting for them to be gone.
//!
//! With `--keep-pods` nothing is deleted; the guard says how to delete them instead.

use std::time::Duration;

use anyhow::Result;
use tokio::runtime::{Handle, RuntimeFlavor};

use super::lifecycle::{LifecycleError, PodSet};
use crate::exit::{self, AlreadySaid, Verdict};

/// How long a dropped guard waits for the API server to take its delete requests.
pub const DROP_DELETE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long railsweep waits for its deleted pods to be gone (so that the next mode of a
/// comparison finds their devices, addresses and ports free).
pub(crate) const DELETE_WAIT: Duration = Duration::from_secs(60);

/// Deletes the pods of its [`PodSet`] at the end, whichever end that is.
#[derive(Debug)]
pub struct PodGuard {
    set: PodSet,
    namespace: String,
    keep: bool,
    /// Still to clean up (`finish` and `fail` disarm it).
    armed: bool,
}

impl PodGuard {
    /// The guard of `set`, whose pods are in `namespace`; `keep` is `--keep-pods`.
    pub fn new(set: PodSet, namespace: &str, keep: bool) -> PodGuard {
        PodGuard {
            set,
            namespace: namespace.to_string(),
            keep,
            armed: true,
        }
    }

    /// The pods: create, wait for and delete them through this.
    pub fn set(&self) -> &PodSet {
        &self.set
    }

    /// Delete the pods (with `--keep-pods`, say how to), and wait up to `wait` for them to be
    /// gone (`None` after Ctrl-C: do not wait); at most [`CLEAN_UP_LIMIT`], said on stderr
    /// while it runs. `true` when Ctrl-C came during it (the command then exits 130); a second
    /// Ctrl-C (a first one after an interrupted command) leaves at once, naming the pods left.
    pub async fn finish(mut self, wait: Option<Duration>) -> bool {
        self.armed = false;
        clean_up(&self.set, self.keep, &self.namespace, wait).await
    }

    /// The end of a command whose pods did not start: the error (a pod's diagnosis) said
    /// first, so that no clean-up can hide it, then the clean-up; `Ok(Verdict::Interrupted)`
    /// after Ctrl-C (before or during the clean-up), else the error with `what` as its context
    /// (e.g. `mode sriov: the pods did not start`), marked as said ([`AlreadySaid`]).
    pub async fn fail(self, e: LifecycleError, what: String) -> Result<Verdict> {
        if let LifecycleError::Interrupted = e {
            results::say!("\nrailsweep: interrupted while the pods were starting");
            self.finish(None).await;
            return Ok(Verdict::Interrupted);
        }
        let said = exit::words(&anyhow::Error::new(e).context(what));
        results::say!("railsweep: error: {said}");
        if self.finish(Some(DELETE_WAIT)).await {
            return Ok(Verdict::Interrupted);
        }
        Err(anyhow::Error::new(AlreadySaid(said)))
    }
}

impl Drop for PodGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let created = self.set.created();
        let templates = self.set.made_templates();
        if created.is_empty() && templates.is_empty() {
            return;
        }
        let names: Vec<String> = created.into_iter().map(|c| c.name).collect();
        if self.keep {
            keep_message(&names, &templates, &self.namespace);
            return;
        }
        results::say!(
            "railsweep: the command ended early; deleting pods {}",
            names.join(", ")
        );
        let set = self.set.clone();
        let delete =
            async move { tokio::time::timeout(DROP_DELETE_TIMEOUT, set.delete_all(None)).await };
        // Drop cannot await: block this thread on the delete where the runtime allows it (the
        // multi-threaded runtime railsweep runs on), else hand it to the runtime, else to one
        // of its own. Nothing here may panic: this also runs while a panic unwinds.
        let done = match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                Some(tokio::task::block_in_place(|| h.block_on(delete)))
            }
            Ok(h) => {
                h.spawn(delete);
                None
            }
            Err(_) => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()
                .map(|rt| rt.block_on(delete)),
        };
        let leftover = |why: String| {
            results::say!(
                "railsweep: warning: {why}; delete them with: kubectl delete pods -n {} {}",
                self.namespace,
                names.join(" ")
            )
        };
        match done {
            Some(Ok((deleted, errors))) => {
                if !deleted.is_empty() {
                    results::say!("railsweep: deleted pods {}", deleted.join(", "));
                }
                for e in errors {
                    leftover(exit::error_words(&e));
                }
            }
            Some(Err(_)) => leftover(format!(
                "the API server did not take the deletes within {} s",
                DROP_DELETE_TIMEOUT.as_secs()
            )),
            None => {} // on a single-threaded runtime, the delete runs as a task of it.
        }
    }
}

/// `--keep-pods`: what to delete, and how.
fn keep_message(names: &[String], templates: &[String], namespace: &str) {
    results::say!(
        "railsweep: keeping pods {} (--keep-pods); delete them with: kubectl delete pods -n {} {}",
        names.join(", "),
        namespace,
        names.join(" ")
    );
    if !templates.is_empty() {
        results::say!(
            "railsweep: and their ResourceClaimTemplate: kubectl delete resourceclaimtemplates -n {namespace} {}",
            templates.join(" ")
        );
    }
}

/// The most a clean-up takes: its deletes (each bounded by `--request-timeout` as well) and the
/// wait for the pods to be gone ([`DELETE_WAIT`]).
pub const CLEAN_UP_LIMIT: Duration = Duration::from_secs(DELETE_WAIT.as_secs() + 30);

/// The command that deletes what `set` still holds, or `None` when it holds nothing.
fn delete_command(set: &PodSet, namespace: &str) -> Option<String> {
    let pods: Vec<String> = set.created().into_iter().map(|c| c.name).collect();
    let templates = set.made_templates();
    let mut cmds = Vec::new();
    if !pods.is_empty() {
        cmds.push(format!(
            "kubectl delete pods -n {namespace} {}",
            pods.join(" ")
        ));
    }
    if !templates.is_empty() {
        cmds.push(format!(
            "kubectl delete resourceclaimtemplates -n {namespace} {}",
            templates.join(" ")
        ));
    }
    (!cmds.is_empty()).then(|| cmds.join(" && "))
}

/// What is left behind, and how to delete it: `railsweep: pods A, B left behind; delete them
/// with: kubectl delete pods -n NS A B`.
fn left_behind(set: &PodSet, namespace: &str) -> Option<String> {
    let cmd = delete_command(set, namespace)?;
    let pods: Vec<String> = set.created().into_iter().map(|c| c.name).collect();
    let what = if pods.is_empty() {
        "ResourceClaimTemplates".to_string()
    } else {
        format!("pods {}", pods.join(", "))
    };
    Some(format!(
        "railsweep: {what} left behind; delete them with: {cmd}"
    ))
}

/// Delete what `set` created, or with `--keep-pods` (`keep`) say how to; `true` when Ctrl-C
/// came during it. Said on stderr as it starts and as it ends; at most [`CLEAN_UP_LIMIT`].
async fn clean_up(set: &PodSet, keep: bool, namespace: &str, wait: Option<Duration>) -> bool {
    let created = set.created();
    let templates = set.made_templates();
    if created.is_empty() && templates.is_empty() {
        return false;
    }
    if keep {
        let names: Vec<String> = created.into_iter().map(|c| c.name).collect();
        keep_message(&names, &templates, namespace);
        return false;
    }
    // After Ctrl-C, the next one leaves at once; before it, the first one lets the clean-up
    // end (bounded) and the command exits 130.
    let after_ctrl_c = wait.is_none();
    let names: Vec<String> = created.iter().map(|c| c.name.clone()).collect();
    results::say!(
        "railsweep: deleting {} pod(s) {} (at most {} s; Ctrl-C {}to leave them)...",
        names.len(),
        names.join(", "),
        CLEAN_UP_LIMIT.as_secs(),
        if after_ctrl_c { "again " } else { "twice " }
    );
    let (leaving, ns) = (set.clone(), namespace.to_string());
    exit::on_leave(Some(Box::new(move || {
        left_behind(&leaving, &ns).map(|s| format!("\n{s}"))
    })));
    let delete = tokio::time::timeout(CLEAN_UP_LIMIT, set.delete_all(wait));
    tokio::pin!(delete);
    let mut interrupted = false;
    let done = loop {
        tokio::select! {
            r = &mut delete => break r,
            Ok(()) = tokio::signal::ctrl_c() => {
                if after_ctrl_c || interrupted {
                    exit::leave_now();
                }
                interrupted = true;
                results::say!(
                    "\nrailsweep: interrupted: finishing the clean-up first (Ctrl-C again to leave the pods)"
                );
            }
        }
    };
    exit::on_leave(None);
    match done {
        Ok((deleted, errors)) => {
            if !deleted.is_empty() {
                results::say!("railsweep: deleted pods {}", deleted.join(", "));
            }
            for e in &errors {
                results::say!("railsweep: warning: {}", exit::error_words(e));
            }
        }
        Err(_) => results::say!(
            "railsweep: warning: the clean-up did not end within {} s",
            CLEAN_UP_LIMIT.as_secs()
        ),
    }
    if let Some(left) = left_behind(set, namespace) {
        results::say!("{left}");
    }
    interrupted
}

//! The basic completion queue (`ibv_create_cq` + `ibv_poll_cq`, polled through
//! [`crate::ffi::poll_cq`] into a buffer on the stack: nothing is allocated per poll), with an
//! optional completion channel of its own for event mode ([`Cq::arm`], [`Cq::wait_event`]).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use sideway::ibverbs::completion::{
    BasicCompletionQueue, CompletionChannel, CreateCompletionChannelErrorKind,
    CreateCompletionQueueErrorKind, GenericCompletionQueue,
};

use super::device::{DevMeta, Pd};
use crate::error::Error;

/// How many completions one `ibv_poll_cq` call asks for at most (into a buffer on the stack).
pub const POLL_BATCH: u32 = 32;

/// One work completion, copied out of the CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The work request id given when posting.
    pub wr_id: u64,
    /// `ibv_wc_status` (0 = success).
    pub status: u32,
    /// `ibv_wc_opcode`.
    pub opcode: u32,
    /// Vendor error syndrome (meaningful when `status != 0`).
    pub vendor_err: u32,
}

impl Completion {
    /// Whether the operation succeeded.
    pub fn is_success(&self) -> bool {
        self.status == 0
    }
}

/// A basic completion queue.
#[derive(Debug, Clone)]
pub struct Cq {
    pub(crate) cq: Arc<BasicCompletionQueue>,
    /// The completion channel of this CQ alone, non-blocking, in event mode. (The CQ holds it
    /// too, and is destroyed before it.)
    channel: Option<Arc<CompletionChannel>>,
    entries: u32,
    pub(crate) meta: Arc<DevMeta>,
}

impl Cq {
    /// A CQ of `entries`; with `events`, on a completion channel of its own.
    pub(crate) fn new(pd: &Pd, entries: u32, events: bool) -> Result<Cq, Error> {
        let channel = if events {
            let ch = CompletionChannel::new(&pd.ctx).map_err(|e| Error::Create {
                device: pd.meta.name.clone(),
                what: "a completion channel".to_string(),
                source: match e.0 {
                    CreateCompletionChannelErrorKind::Ibverbs(e) => e,
                    other => io::Error::other(other.to_string()),
                },
            })?;
            // Non-blocking, so that taking an event never waits: the wait is a poll(2) on
            // the descriptor with a timeout (Cq::wait_event).
            ch.set_nonblocking(true).map_err(|source| Error::Create {
                device: pd.meta.name.clone(),
                what: "a non-blocking completion channel".to_string(),
                source,
            })?;
            Some(ch)
        } else {
            None
        };
        let mut builder = pd.ctx.create_cq_builder();
        builder.setup_cqe(entries);
        if let Some(ch) = &channel {
            builder.setup_comp_channel(ch, 0);
        }
        let cq = builder.build().map_err(|e| Error::Create {
            device: pd.meta.name.clone(),
            what: format!("a completion queue of {entries} entries"),
            source: match e.0 {
                CreateCompletionQueueErrorKind::Ibverbs(e) => e,
                other => io::Error::other(other.to_string()),
            },
        })?;
        Ok(Cq {
            cq,
            channel,
            entries,
            meta: Arc::clone(&pd.meta),
        })
    }

    /// Arms the CQ (`ibv_req_notify_cq`): its next completion raises one event on the channel.
    /// A completion that came before the arm raises none, so poll once more after arming and
    /// before [`Cq::wait_event`].
    pub fn arm(&self) -> Result<(), Error> {
        if self.channel.is_none() {
            return Err(self.event_error(
                "ibv_req_notify_cq",
                io::Error::other("the CQ has no completion channel"),
            ));
        }
        crate::ffi::req_notify_cq(&self.cq).map_err(|rc| {
            self.event_error("ibv_req_notify_cq", io::Error::from_raw_os_error(rc.abs()))
        })
    }

    /// Waits at most `timeout` for the channel's event, then takes and acknowledges it: whether
    /// one came. An event disarms the CQ: [`Cq::arm`] it again before the next wait.
    pub fn wait_event(&self, timeout: Duration) -> Result<bool, Error> {
        let Some(ch) = &self.channel else {
            return Err(self.event_error(
                "ibv_get_cq_event",
                io::Error::other("the CQ has no completion channel"),
            ));
        };
        let take = || {
            crate::ffi::take_cq_event(ch, &self.cq)
                .map_err(|e| self.event_error("ibv_get_cq_event", e))
        };
        if take()? {
            return Ok(true);
        }
        let readable = crate::ffi::wait_fd_readable(ch.as_ref(), timeout)
            .map_err(|e| self.event_error("poll(2) on the completion channel", e))?;
        if readable {
            take()
        } else {
            Ok(false)
        }
    }

    fn event_error(&self, call: &'static str, source: io::Error) -> Error {
        Error::CqEvent {
            device: self.meta.name.clone(),
            call,
            source,
        }
    }

    /// Number of entries asked for.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    pub(crate) fn generic(&self) -> GenericCompletionQueue {
        GenericCompletionQueue::from(Arc::clone(&self.cq))
    }

    /// Polls up to `max` completions into `out` (which is cleared first); returns how many.
    /// Asks the CQ again while it hands out full batches, so that a backlog (the poller was off
    /// its CPU for a while) comes out in one call and the caller stamps it with one time:
    /// reaped over several calls, a backlog would read as a burst of bandwidth in microseconds.
    pub fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, Error> {
        out.clear();
        self.poll_more(out, max)
    }

    /// Like [`Cq::poll`], but appends to `out` until it holds `max` completions or the CQ is
    /// empty; returns how many were added.
    pub fn poll_more(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, Error> {
        let start = out.len();
        while out.len() < max {
            if self.poll_batch(out, max - out.len())? < POLL_BATCH as usize {
                break;
            }
        }
        Ok(out.len() - start)
    }

    /// One `ibv_poll_cq` call for up to `max` (at most [`POLL_BATCH`]) completions, appended to
    /// `out`.
    fn poll_batch(&self, out: &mut Vec<Completion>, max: usize) -> Result<usize, Error> {
        let mut wcs = [const { std::mem::MaybeUninit::uninit() }; POLL_BATCH as usize];
        let take = max.min(wcs.len());
        match crate::ffi::poll_cq(&self.cq, &mut wcs[..take]) {
            Ok(got) => {
                out.extend(got.iter().map(|wc| Completion {
                    wr_id: wc.wr_id,
                    status: wc.status,
                    opcode: wc.opcode,
                    vendor_err: wc.vendor_err,
                }));
                Ok(got.len())
            }
            Err(errno) => Err(Error::PollCq {
                device: self.meta.name.clone(),
                source: io::Error::from_raw_os_error(-errno),
            }),
        }
    }
}

/// Creating completion queues on a protection domain.
impl Pd {
    /// Creates a basic completion queue of at least `entries` entries (capped at the device's
    /// maximum).
    pub fn create_cq(&self, entries: u32) -> Result<Cq, Error> {
        Cq::new(self, entries.clamp(1, self.caps.max_cqe.max(1)), false)
    }

    /// [`Pd::create_cq`] on a completion channel of its own, for event mode ([`Cq::arm`],
    /// [`Cq::wait_event`]).
    pub fn create_cq_with_events(&self, entries: u32) -> Result<Cq, Error> {
        Cq::new(self, entries.clamp(1, self.caps.max_cqe.max(1)), true)
    }
}

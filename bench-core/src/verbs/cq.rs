//! The basic completion queue (`ibv_create_cq` + `ibv_poll_cq`, polled through
//! [`crate::ffi::poll_cq`] into a buffer on the stack: nothing is allocated per poll).

use std::io;
use std::sync::Arc;

use sideway::ibverbs::completion::{
    BasicCompletionQueue, CreateCompletionQueueErrorKind, GenericCompletionQueue,
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
    entries: u32,
    pub(crate) meta: Arc<DevMeta>,
}

impl Cq {
    pub(crate) fn new(pd: &Pd, entries: u32) -> Result<Cq, Error> {
        let cq = pd
            .ctx
            .create_cq_builder()
            .setup_cqe(entries)
            .build()
            .map_err(|e| Error::Create {
                device: pd.meta.name.clone(),
                what: format!("a completion queue of {entries} entries"),
                source: match e.0 {
                    CreateCompletionQueueErrorKind::Ibverbs(e) => e,
                    other => io::Error::other(other.to_string()),
                },
            })?;
        Ok(Cq {
            cq,
            entries,
            meta: Arc::clone(&pd.meta),
        })
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

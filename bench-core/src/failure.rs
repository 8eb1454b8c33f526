//! Each error of the engine, the control channel and perftest's exchange, told as the
//! [`FailureKind`] a failed test's report carries: the one mapping from bench-core's errors to
//! the typed cause railsweep's per-rail verdict reads.

use wire::FailureKind;

use crate::control::ControlError;
use crate::error::Error;
use crate::perftest::PerftestError;
use crate::session::SessionError;

impl Error {
    /// The kind of this error in a failed test's report.
    pub fn kind(&self) -> FailureKind {
        use FailureKind as K;
        match self {
            Error::VerbsLibraryMissing { .. } => K::NoVerbs,
            Error::NoKernelSupport { .. }
            | Error::NoDevices { .. }
            | Error::UnknownDevice { .. }
            | Error::UnknownNetdev { .. }
            | Error::AmbiguousNetdev { .. }
            | Error::NetdevNotOnDevice { .. }
            | Error::NoUsableDevice { .. } => K::NoRdma,
            Error::OpenDevice { .. } => K::DeviceAccess,
            Error::NoSuchPort { .. } | Error::PortDown { .. } => K::PortDown,
            Error::GidIndexOutOfRange { .. }
            | Error::GidNotUsable { .. }
            | Error::NoUsableGid { .. }
            | Error::GidIndexTooLarge { .. } => K::Gid,
            Error::MemlockTooLow { .. } => K::Memlock,
            Error::RegisterMemory { .. } => K::Register,
            Error::DmabufUnsupported { .. } | Error::Gpu(_) => K::Gpu,
            Error::Query { .. }
            | Error::Sysfs { .. }
            | Error::Create { .. }
            | Error::QpTransition { .. }
            | Error::PostSend { .. }
            | Error::PollCq { .. }
            | Error::CqEvent { .. } => K::Verbs,
            Error::WorkCompletion { .. } | Error::Stalled { .. } => K::Transport,
            Error::Stopped { .. } => K::PeerFailed,
            Error::PeerMismatch(_) | Error::InvalidParams(_) => K::Mismatch,
        }
    }
}

impl ControlError {
    /// The kind of this error in a failed test's report.
    pub fn kind(&self) -> FailureKind {
        use FailureKind as K;
        match self {
            ControlError::ConnectFailed { .. } | ControlError::Busy { .. } => K::Unreachable,
            ControlError::Timeout { .. }
            | ControlError::PeerClosed { .. }
            | ControlError::PeerSilent { .. }
            | ControlError::PeerError { .. }
            | ControlError::Io { .. } => K::PeerFailed,
            ControlError::Rejected { .. } => K::Mismatch,
            ControlError::NotRdmabw { .. }
            | ControlError::VersionMismatch { .. }
            | ControlError::Truncated { .. }
            | ControlError::Oversized { .. }
            | ControlError::Malformed { .. }
            | ControlError::Unexpected { .. }
            | ControlError::Protocol { .. } => K::Protocol,
        }
    }
}

impl PerftestError {
    /// The kind of this error in a failed test's report.
    pub fn kind(&self) -> FailureKind {
        use FailureKind as K;
        match self {
            PerftestError::Timeout { .. }
            | PerftestError::Closed { .. }
            | PerftestError::Io { .. }
            | PerftestError::NoFigures { .. } => K::PeerFailed,
            PerftestError::Wire { .. } | PerftestError::TooOld { .. } => K::Protocol,
            PerftestError::Mismatch { .. } | PerftestError::Unsupported { .. } => K::Mismatch,
            PerftestError::Interrupted { .. } => K::Interrupted,
        }
    }
}

impl SessionError {
    /// The kind of this failure in the test's report. Where both the peer and this side's
    /// RDMA failed, the peer's failure is the kind (this side's error followed from it).
    pub fn kind(&self) -> FailureKind {
        use FailureKind as K;
        match self {
            SessionError::Local(e) => e.kind(),
            SessionError::Control(c) => c.kind(),
            SessionError::NotRdmabw(_) => K::Protocol,
            SessionError::ServerSetup(_) => K::PeerSetup,
            SessionError::PeerFailed { cause, .. } => cause.kind(),
            SessionError::Run { error, port_note } => match port_note {
                Some(_) => K::PortDown,
                None => error.kind(),
            },
            SessionError::RailDown { .. } => K::PortDown,
            SessionError::DataValidation(_) => K::Data,
            SessionError::NotAdmitted(cause) => cause.kind(),
            SessionError::Perftest { error, .. } => error.kind(),
            SessionError::Interrupted { .. } => K::Interrupted,
        }
    }
}

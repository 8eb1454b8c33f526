//! rdmabw's documents (the `wire` crate, re-exported here) and the rows railsweep makes of
//! them ([`RdmabwRun`]).

pub use wire::*;

mod rows;

pub use rows::{AskedTest, EndFacts, RdmabwRun, TOOL_IB_WRITE_BW, TOOL_RDMABW};

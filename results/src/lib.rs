//! results: typed rail result records and their reports.
#![forbid(unsafe_code)]

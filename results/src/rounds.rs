//! `rounds.tsv`, the table `railsweep fleet` writes beside its rows: one line per pair of a
//! round (when it started and ended, how many rows it gave, its error). railsweep writes it and
//! the lab's checker reads it, both by these columns.

/// The columns of rounds.tsv, in order (its header line, tab-separated).
pub const COLUMNS: [&str; 8] = [
    "attempt",
    "round",
    "client",
    "server",
    "start_unix",
    "end_unix",
    "rows",
    "error",
];

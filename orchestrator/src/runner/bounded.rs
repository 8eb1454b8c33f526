//! Bounded memory for everything railsweep reads from a pod: of each stream it keeps the end
//! ([`Tail`]), and no line longer than [`MAX_LINE`] (a test that prints one fails, naming
//! it: [`OverlongLine`]). A flooding process used to take railsweep to 498 MB in 4 s, and one
//! line without a newline to 2.2 GB in 8 s; now each stream costs at most its tail.

use std::collections::VecDeque;
use std::fmt;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

/// The longest line railsweep takes from a pod: 1 MiB. rdmabw's largest document, the report
/// of `-a` (23 sizes) with the counters of both sides, is tens of KiB on one line.
pub const MAX_LINE: usize = 1024 * 1024;

/// How much of a command's stream railsweep keeps: its last 2 MiB (whole lines where they
/// fit). The report, rdmabw's last line, is in it, and so are the last words error messages
/// quote.
pub const STREAM_TAIL: usize = 2 * MAX_LINE;

/// A line longer than the limit, in a command's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverlongLine {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// The limit, bytes.
    pub limit: usize,
}

impl fmt::Display for OverlongLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a line longer than {} KiB on its {} (railsweep takes lines up to that long; the \
             line was left out)",
            self.limit / 1024,
            self.stream
        )
    }
}

/// The end of a stream, as it comes: at most `cap` bytes (cut at the start of a line where
/// one starts within them), none of a line longer than `max_line` (left out whole, and noted).
/// A ring of bytes: what goes at the front costs its own length, not the tail's.
#[derive(Debug, Clone)]
pub struct Tail {
    buf: VecDeque<u8>,
    cap: usize,
    max_line: usize,
    /// Bytes of the unfinished last line in `buf`.
    line_len: usize,
    /// In a line that went over `max_line`: drop bytes to its newline.
    skipping: bool,
    overlong: bool,
}

impl Tail {
    /// A tail of at most `cap` bytes (at least `max_line`) taking lines of up to `max_line`.
    pub fn new(cap: usize, max_line: usize) -> Tail {
        Tail {
            buf: VecDeque::new(),
            cap: cap.max(max_line),
            max_line,
            line_len: 0,
            skipping: false,
            overlong: false,
        }
    }

    /// Take the next bytes of the stream.
    pub fn push(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let nl = chunk.iter().position(|&b| b == b'\n');
            let seg = &chunk[..nl.unwrap_or(chunk.len())];
            if !self.skipping {
                if self.line_len + seg.len() > self.max_line {
                    // Its start is in the tail whole (the tail holds at least a line): go.
                    self.buf.truncate(self.buf.len() - self.line_len);
                    (self.skipping, self.overlong) = (true, true);
                } else {
                    self.buf.extend(seg);
                    self.line_len += seg.len();
                }
            }
            if nl.is_some() {
                if !self.skipping {
                    self.buf.push_back(b'\n');
                }
                (self.skipping, self.line_len) = (false, 0);
            }
            chunk = &chunk[(seg.len() + usize::from(nl.is_some())).min(chunk.len())..];
            self.trim();
        }
    }

    /// Keep the last `cap` bytes, from the start of a line where one starts within them (not
    /// within the unfinished last line, which is at most `max_line <= cap` bytes).
    fn trim(&mut self) {
        if self.buf.len() <= self.cap {
            return;
        }
        let mut cut = self.buf.len() - self.cap;
        let line_start = self.buf.len() - self.line_len;
        if self.buf[cut - 1] != b'\n' {
            if let Some(nl) = self.buf.range(cut..line_start).position(|&c| c == b'\n') {
                cut += nl + 1;
            }
        }
        self.buf.drain(..cut);
    }

    /// Note a line over the limit that was left out before it came here (read by
    /// [`BoundedLines`]).
    pub fn left_out_a_line(&mut self) {
        self.overlong = true;
    }

    /// Whether a line went over the limit.
    pub fn overlong(&self) -> bool {
        self.overlong
    }

    /// What was kept.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf.into()
    }
}

/// Append `chunk` to `buf` and keep only its last `cap` bytes, from the start of a line where
/// one starts within them (a line longer than `cap`: its last bytes). For what nobody parses
/// but an error message quoting its end (a server daemon's streams).
pub fn keep_tail(buf: &mut Vec<u8>, chunk: &[u8], cap: usize) {
    buf.extend_from_slice(chunk);
    if buf.len() > cap {
        let mut cut = buf.len() - cap;
        if let Some(nl) = buf[cut..].iter().position(|&c| c == b'\n') {
            if nl + 1 < buf.len() - cut {
                cut += nl + 1;
            }
        }
        buf.drain(..cut);
    }
}

/// Read `r` to its end (or its first error) into a [`Tail`] of `cap` bytes and lines of
/// [`MAX_LINE`], starting with `head` (what came before).
pub async fn read_tail(r: Option<impl AsyncRead + Unpin>, head: &[u8], cap: usize) -> Tail {
    let mut tail = Tail::new(cap, MAX_LINE);
    tail.push(head);
    if let Some(mut r) = r {
        let mut chunk = vec![0u8; 16 * 1024];
        while let Ok(n) = r.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            tail.push(&chunk[..n]);
        }
    }
    tail
}

/// How much of the end of a line over the limit [`BoundedLines`] keeps: room for a marker
/// that follows output without a newline (`rdmabw batch`'s end line).
const OVERLONG_END: usize = 256;

/// A line of a stream read line by line ([`BoundedLines`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A line, without its end (`\n` or `\r\n`), invalid UTF-8 replaced.
    Text(String),
    /// A line longer than the limit, left out but for its last bytes (at most 256).
    Overlong(String),
}

/// The lines of a stream, none held longer than `max` bytes: a longer one is read through and
/// dropped as it comes, and given as [`Line::Overlong`].
#[derive(Debug)]
pub struct BoundedLines<R> {
    r: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> BoundedLines<R> {
    /// The lines of `r`, each at most `max` bytes.
    pub fn new(r: R, max: usize) -> Self {
        BoundedLines {
            r: BufReader::new(r),
            max,
        }
    }

    /// The next line; `None` at the end of the stream (or its first error).
    pub async fn next_line(&mut self) -> Option<Line> {
        let mut line = Vec::new();
        let mut over = false;
        let done = |line: Vec<u8>, over: bool| {
            if over {
                Line::Overlong(text(line))
            } else {
                Line::Text(text(line))
            }
        };
        loop {
            let Ok(buf) = self.r.fill_buf().await else {
                return None;
            };
            if buf.is_empty() {
                return (over || !line.is_empty()).then(|| done(line, over));
            }
            let nl = buf.iter().position(|&b| b == b'\n');
            let take = nl.map_or(buf.len(), |i| i + 1);
            line.extend_from_slice(&buf[..take]);
            if !over && line.len() > self.max + 1 {
                over = true;
            }
            if over && line.len() > OVERLONG_END {
                line.drain(..line.len() - OVERLONG_END);
            }
            self.r.consume(take);
            if nl.is_some() {
                return Some(done(line, over));
            }
        }
    }
}

/// A line's bytes as text, without its end.
fn text(mut line: Vec<u8>) -> String {
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
    String::from_utf8_lossy(&line).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_end_in_whole_lines_and_leaves_out_overlong_ones() {
        let mut t = Tail::new(16, 8);
        t.push(b"one\ntwo\nthree\nfour\nfive\n");
        assert!(!t.overlong());
        assert_eq!(t.clone().into_bytes(), b"three\nfour\nfive\n");
        // A line over 8 bytes, in pieces: left out, noted, the next line kept.
        for piece in [&b"0123"[..], b"45678", b"9abc", b"def\nsix"] {
            t.push(piece);
        }
        assert!(t.overlong());
        assert_eq!(t.into_bytes(), b"four\nfive\nsix");
        // A flood without a newline holds no more than the limits.
        let mut t = Tail::new(1024, 256);
        for _ in 0..10_000 {
            t.push(&[b'x'; 1000]);
        }
        assert!(t.overlong());
        assert!(t.into_bytes().is_empty());
        let mut t = Tail::new(1024, 256);
        for _ in 0..10_000 {
            t.push(b"a line of some length\n");
        }
        let kept = t.into_bytes();
        assert!(
            kept.len() <= 1024 && kept.starts_with(b"a line"),
            "{}",
            kept.len()
        );
    }

    #[tokio::test]
    async fn lines_over_the_limit_are_read_through_and_named() {
        let mut input = b"short\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'y', 100_000));
        input.extend(b"\nafter\nlast");
        let mut lines = BoundedLines::new(&input[..], 1000);
        assert_eq!(lines.next_line().await, Some(Line::Text("short".into())));
        assert_eq!(
            lines.next_line().await,
            Some(Line::Overlong("y".repeat(255)))
        );
        assert_eq!(lines.next_line().await, Some(Line::Text("after".into())));
        assert_eq!(lines.next_line().await, Some(Line::Text("last".into())));
        assert_eq!(lines.next_line().await, None);
        // Exactly the limit is a line.
        let exact = [vec![b'z'; 1000], b"\n".to_vec()].concat();
        let mut lines = BoundedLines::new(&exact[..], 1000);
        assert!(matches!(lines.next_line().await, Some(Line::Text(t)) if t.len() == 1000));
    }

    #[tokio::test]
    async fn reading_a_stream_keeps_its_tail() {
        let data = [
            b"head ".as_slice(),
            &vec![b'q'; 5 * MAX_LINE],
            b"\nthe end\n",
        ]
        .concat();
        let t = read_tail(Some(&data[..]), b"", STREAM_TAIL).await;
        assert!(t.overlong());
        assert_eq!(t.into_bytes(), b"the end\n");
    }
}

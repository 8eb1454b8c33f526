//! Text from elsewhere (a node or pod name, a run id, a mode, an error text: anything a
//! results file or a pod carries) as every writer of railbench echoes it: the one place that
//! says what such text may not do in markdown, in SVG (and the PNG drawn from it) and on a
//! terminal.
//!
//! Whatever the output, two rules come first ([`echo`]): a value is cut to
//! [`MAX_ECHO_CHARS`] (a node name of a megabyte is not a megabyte of report), and the
//! characters XML 1.0 has no place for are dropped (a C0 control other than tab, newline and
//! carriage return, U+FFFE, U+FFFF: an SVG holding one does not parse, and neither does the
//! PNG made from it; a markdown report ends up in HTML pages too). Each output then has its
//! own rule for the rest: [`markdown`], [`markdown_code`], [`svg`], [`log_line`].

/// The most characters of one value a report echoes; a longer one is cut, ending in `…`.
pub const MAX_ECHO_CHARS: usize = 256;

/// The most characters of one line railsweep logs with text from a pod in it.
pub const MAX_LOG_CHARS: usize = 2048;

/// Whether XML 1.0 forbids `c` anywhere in a document (its `Char` production).
pub fn forbidden_in_xml(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
}

/// The format characters that reorder text on screen (bidirectional overrides and isolates,
/// the marks): a log line holding one can show other words than it has.
fn reorders(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` cut to `max` characters (the last one `…` when cut), each kept character passed to
/// `put` with the output, those XML forbids first replaced by a space when `space`, else
/// dropped.
fn echo_with(text: &str, max: usize, mut put: impl FnMut(char, &mut String)) -> String {
    let mut out = String::with_capacity(text.len().min(max * 2));
    let cut = text.chars().nth(max).is_some();
    let keep = if cut { max.saturating_sub(1) } else { max };
    for c in text.chars().take(keep) {
        put(c, &mut out);
    }
    if cut {
        out.push('…');
    }
    out
}

/// The two rules of every output: `text` cut to [`MAX_ECHO_CHARS`], without the characters
/// XML forbids; control characters left as they are (each output says what they become).
pub fn echo(text: &str) -> String {
    echo_with(text, MAX_ECHO_CHARS, |c, out| {
        if !forbidden_in_xml(c) {
            out.push(c);
        }
    })
}

/// Text made safe anywhere in a markdown document (a table cell, a heading, a list item):
/// [`echo`]'s rules, then no pipes breaking columns, no newlines starting a block of their
/// own (every control character a space), no HTML (`<`, `>`, `&` as entities), no links or
/// images (`[`, `]`), no code spans (`` ` ``), and no backslash escaping any of these.
pub fn markdown(text: &str) -> String {
    echo_with(text, MAX_ECHO_CHARS, |c, out| match c {
        '\\' => out.push_str("\\\\"),
        '|' => out.push_str("\\|"),
        '[' => out.push_str("\\["),
        ']' => out.push_str("\\]"),
        '`' => out.push_str("\\`"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '&' => out.push_str("&amp;"),
        c if forbidden_in_xml(c) => {}
        c if c.is_control() => out.push(' '),
        c => out.push(c),
    })
}

/// Text inside a markdown code span: [`echo`]'s rules, backticks (which would end it) as
/// `'`, every control character a space. Nothing else is read as markup there.
pub fn markdown_code(text: &str) -> String {
    echo_with(text, MAX_ECHO_CHARS, |c, out| match c {
        '`' => out.push('\''),
        c if forbidden_in_xml(c) => {}
        c if c.is_control() => out.push(' '),
        c => out.push(c),
    })
}

/// Text as an SVG label (plotters' `Text`, which writes `<`, `>`, `&` and quotes as
/// entities itself): [`echo`]'s rules, every control character a space.
pub fn svg(text: &str) -> String {
    echo_with(text, MAX_ECHO_CHARS, |c, out| match c {
        c if forbidden_in_xml(c) => {}
        c if c.is_control() => out.push(' '),
        c => out.push(c),
    })
}

/// A log line holding text from a pod or a peer, for a terminal: one line whatever the text
/// holds, its control characters (newlines, carriage returns, escape sequences) and the
/// characters that reorder text written out as Rust escapes (`\n`, `\u{1b}`), so that no text
/// forges a line of its own, moves the cursor or recolours the terminal; cut to
/// [`MAX_LOG_CHARS`].
pub fn log_line(text: &str) -> String {
    echo_with(text, MAX_LOG_CHARS, |c, out| {
        if c.is_control() || reorders(c) || c == '\u{fffe}' || c == '\u{ffff}' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_output_drops_what_xml_forbids_and_cuts_long_values() {
        let hostile = "a\u{1b}[31m\u{fffe}\u{ffff}\u{0}b\nc";
        for (name, out) in [
            ("echo", echo(hostile)),
            ("markdown", markdown(hostile)),
            ("code", markdown_code(hostile)),
            ("svg", svg(hostile)),
        ] {
            assert!(!out.chars().any(forbidden_in_xml), "{name}: {out:?}");
        }
        assert_eq!(svg(hostile), "a[31mb c");
        assert_eq!(markdown("x<script>|y\n# h"), "x&lt;script&gt;\\|y # h");
        assert_eq!(markdown_code("a`b\nc"), "a'b c");
        let long = "é".repeat(10_000);
        for out in [
            echo(&long),
            markdown(&long),
            svg(&long),
            markdown_code(&long),
        ] {
            assert_eq!(out.chars().count(), MAX_ECHO_CHARS);
            assert!(out.ends_with('…'));
        }
        assert_eq!(svg(&"x".repeat(MAX_ECHO_CHARS)), "x".repeat(MAX_ECHO_CHARS));
    }

    #[test]
    fn a_log_line_stays_one_line_and_shows_its_escapes() {
        let forged = "down\nrailsweep: rail 1: 96.00 Gb/s ok\r\u{1b}[2K\u{202e}gnp.exe";
        let line = log_line(forged);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert_eq!(
            line,
            "down\\nrailsweep: rail 1: 96.00 Gb/s ok\\r\\u{1b}[2K\\u{202e}gnp.exe"
        );
        assert_eq!(
            log_line(&"y".repeat(100_000)).chars().count(),
            MAX_LOG_CHARS
        );
    }
}

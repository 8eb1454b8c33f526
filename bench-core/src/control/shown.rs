//! Text a peer sent, made fit for a log line: control characters escaped (so that it cannot
//! start a line of its own, or forge one) and its length capped (so that it cannot flood one).

/// How many characters of a peer's text (host name, release, device) a log line shows.
pub const PEER_TEXT_CHARS: usize = 64;

/// `text` as a log line may show it: at most `max_chars` characters (then `...`), each
/// control character (newline, carriage return, escape, C1 controls) written as its Rust
/// escape (`\n`, `\u{1b}`), and the Unicode direction overrides too.
pub fn for_log(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 2));
    let mut chars = text.chars();
    for c in chars.by_ref().take(max_chars) {
        if c.is_control()
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
        {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if chars.next().is_some() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newline_cannot_forge_a_line_and_a_long_name_is_cut() {
        let forged = "pod-a\nrdmabw server: [10.0.0.9:4000] done: mlx5_0 399.999 Gb/s";
        let shown = for_log(forged, PEER_TEXT_CHARS);
        assert!(!shown.contains('\n'), "{shown}");
        assert!(shown.starts_with("pod-a\\nrdmabw server"), "{shown}");
        assert_eq!(for_log("\r\u{1b}[2K\u{0}", 64), "\\r\\u{1b}[2K\\u{0}");
        let long = "x".repeat(1 << 20);
        let shown = for_log(&long, PEER_TEXT_CHARS);
        assert_eq!(shown.len(), PEER_TEXT_CHARS + 3);
        assert!(shown.ends_with("..."));
        assert_eq!(for_log("mlx5_3", PEER_TEXT_CHARS), "mlx5_3");
        assert_eq!(for_log("\u{202e}evil", 64), "\\u{202e}evil");
    }
}

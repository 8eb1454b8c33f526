//! Spellings whose meaning changed, refused for one release with the new spelling named, so
//! that no command line written for the old meaning is silently read in the new one
//! (docs/railsweep.md, "One meaning per spelling"). `-D` without `-f` is refused where the
//! timing is resolved (`SweepArgs::timing`), `-o FILE` by `-o`'s value parser.

/// A spelling refused in some commands: what it meant, and what to give now.
#[derive(Debug)]
pub struct Renamed {
    /// The spelling, as typed (`--margin`).
    pub spelling: &'static str,
    /// The commands that refuse it.
    pub commands: &'static [&'static str],
    /// Refused only when its next word is a value (not a flag): `--json FILE`.
    pub with_value: bool,
    /// Why, and the spelling to give now.
    pub words: &'static str,
    /// The spellings to give now, each named in `words`.
    pub now: &'static [&'static str],
}

/// Every refused spelling.
pub const RENAMED: &[Renamed] = &[
    Renamed {
        spelling: "--margin",
        commands: &["run", "compare", "fleet"],
        with_value: false,
        words: "railsweep's --margin was the seconds a rail may take beyond its test before \
                it is stopped; that is --deadline-slack now, and --margin is becoming what it \
                is in rdmabw and ib_write_bw (-f, the warm-up and cool-down inside -D). This \
                release refuses --margin so that neither is taken for the other: give \
                --deadline-slack SECONDS, or -f SECONDS",
        now: &["--deadline-slack", "-f"],
    },
    Renamed {
        spelling: "--json",
        commands: &["run", "fleet"],
        with_value: true,
        words: "--json FILE kept a JSON snapshot in FILE; --json is rdmabw's now, the rows as \
                JSON on stdout (-o json). Give --out_json_file FILE for the snapshot",
        now: &["--out_json_file"],
    },
    Renamed {
        spelling: "--format",
        commands: &["run", "compare", "report"],
        with_value: false,
        words: "the format is kubectl's -o/--output now: give -o FORMAT (and \
                --output-file FILE for a file)",
        now: &["-o", "--output-file"],
    },
    Renamed {
        spelling: "-f",
        commands: &["report"],
        with_value: false,
        words: "report's -f was its format; the format is kubectl's -o/--output now (give -o \
                FORMAT), and -f is ib_write_bw's margin in railsweep's test commands",
        now: &["-o"],
    },
];

/// The refusal for a command line (`railsweep CMD ARGS...`, as `std::env::args` gives it)
/// that uses a refused spelling, in words that name it and the fix.
pub fn refusal(args: impl IntoIterator<Item = String>) -> Option<String> {
    let args: Vec<String> = args.into_iter().collect();
    let command = args.get(1)?;
    let rest = args.get(2..).unwrap_or_default();
    for (i, a) in rest.iter().enumerate() {
        if a == "--" {
            break;
        }
        for r in RENAMED
            .iter()
            .filter(|r| r.commands.contains(&command.as_str()))
        {
            let (name, inline) = match a.split_once('=') {
                Some((n, _)) => (n, true),
                None => (a.as_str(), false),
            };
            if name != r.spelling {
                continue;
            }
            let valued = inline || rest.get(i + 1).is_some_and(|next| !next.starts_with('-'));
            if !r.with_value || valued {
                return Some(format!("{a}: {}", r.words));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_spellings_are_found_by_command_and_value() {
        let r = |a: &[&str]| {
            refusal(
                std::iter::once("railsweep")
                    .chain(a.iter().copied())
                    .map(String::from),
            )
        };
        assert!(r(&["run", "--margin", "3"]).is_some_and(|e| e.contains("--deadline-slack")));
        assert!(r(&["fleet", "--margin=3"]).is_some());
        // --json alone is rdmabw's (stdout); with a file it was the snapshot.
        assert!(r(&["run", "--json", "--quiet"]).is_none());
        assert!(r(&["run", "--json"]).is_none());
        assert!(r(&["run", "--json", "x.json"]).is_some_and(|e| e.contains("--out_json_file")));
        assert!(r(&["run", "--json=x.json"]).is_some());
        // report's -f, not run's (ib_write_bw's margin there); nothing after `--`.
        assert!(r(&["report", "-f", "csv", "a.csv"]).is_some());
        assert!(r(&["run", "-f", "1"]).is_none());
        assert!(r(&["report", "--", "-f"]).is_none());
        assert!(r(&["explain", "--margin"]).is_none());
    }
}

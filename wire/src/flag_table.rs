//! The table of `docs/railsweep.md` that lists every flag of rdmabw and railsweep side by side,
//! read back so that each binary's tests check it against that binary's clap definitions: a
//! flag added to either tool without a row, or a row naming a flag that is gone, fails them.
//!
//! The table is the first one under [`SECTION`]; its header names the columns `rdmabw` and
//! `railsweep`. The flags of a cell are its backticked words that start with `-` (`-n`,
//! `--iters`); a flag with a short and a long name has both in one cell of one row.

use std::collections::BTreeSet;

/// The heading of the section that holds the table.
pub const SECTION: &str = "## Every flag of both tools";

/// Whose column of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// The `rdmabw` column.
    Rdmabw,
    /// The `railsweep` column.
    Railsweep,
}

impl Tool {
    /// The column's header.
    pub fn column(self) -> &'static str {
        match self {
            Tool::Rdmabw => "rdmabw",
            Tool::Railsweep => "railsweep",
        }
    }
}

/// The cells of a table line, `\|` kept as part of a cell.
fn cells(line: &str) -> Vec<String> {
    let line = line.trim().trim_start_matches('|').trim_end_matches('|');
    let (mut out, mut cell) = (Vec::new(), String::new());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cell.push('|');
            }
            '|' => out.push(std::mem::take(&mut cell)),
            c => cell.push(c),
        }
    }
    out.push(cell);
    out.into_iter().map(|s| s.trim().to_string()).collect()
}

/// The flags a cell names: its backticked words that start with `-`, up to any `=`.
fn flags_of(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(str::split_whitespace)
        .filter(|w| w.starts_with('-') && w.len() > 1)
        .map(|w| w.split('=').next().unwrap_or(w).to_string())
        .collect()
}

/// The flags in `tool`'s column of the table under [`SECTION`] in `markdown`, one set per row.
pub fn rows(markdown: &str, tool: Tool) -> Result<Vec<BTreeSet<String>>, String> {
    let mut lines = markdown
        .lines()
        .skip_while(|l| l.trim() != SECTION)
        .skip(1)
        .skip_while(|l| !l.trim_start().starts_with('|'));
    let header = lines
        .next()
        .ok_or_else(|| format!("no table under `{SECTION}`"))?;
    let col = cells(header)
        .iter()
        .position(|c| c == tool.column())
        .ok_or_else(|| format!("the table's header has no `{}` column", tool.column()))?;
    Ok(lines
        .skip(1) // the `| --- |` line
        .take_while(|l| l.trim_start().starts_with('|'))
        .map(|l| cells(l).get(col).map(|c| flags_of(c)).unwrap_or_default())
        .collect())
}

/// One flag of a command, as the table must name it.
struct Flag {
    /// The command's path (`rdmabw client`).
    command: String,
    /// `-n`, if it has a short name.
    short: Option<String>,
    /// `--iters`, and its visible aliases.
    long: Vec<String>,
}

/// Every flag of `cmd` and its subcommands (not clap's own `--help` and `--version`), and
/// every name any of them answers to (hidden aliases included).
fn flags(cmd: &clap::Command, path: &str, out: &mut Vec<Flag>, names: &mut BTreeSet<String>) {
    for a in cmd.get_arguments() {
        if a.is_positional() || ["help", "version"].contains(&a.get_id().as_str()) {
            continue;
        }
        let long: Vec<String> = a
            .get_long()
            .into_iter()
            .chain(a.get_visible_aliases().into_iter().flatten())
            .map(|l| format!("--{l}"))
            .collect();
        let short = a.get_short().map(|c| format!("-{c}"));
        names.extend(long.iter().cloned());
        names.extend(short.iter().cloned());
        names.extend(
            a.get_all_aliases()
                .into_iter()
                .flatten()
                .map(|l| format!("--{l}")),
        );
        names.extend(
            a.get_all_short_aliases()
                .into_iter()
                .flatten()
                .map(|c| format!("-{c}")),
        );
        out.push(Flag {
            command: path.to_string(),
            short,
            long,
        });
    }
    for sub in cmd.get_subcommands() {
        if sub.get_name() != "help" {
            flags(sub, &format!("{path} {}", sub.get_name()), out, names);
        }
    }
}

/// Check `tool`'s column of the table in `markdown` against `cmd`, the tool's whole command
/// line: every flag of every subcommand has a row whose cell names its short and long names
/// together, and every flag the column names is one of the tool's. The error lists each
/// flag missing (with the command that takes it) and each name unknown.
pub fn check(cmd: &clap::Command, markdown: &str, tool: Tool) -> Result<(), String> {
    let rows = rows(markdown, tool)?;
    let (mut all, mut names) = (Vec::new(), BTreeSet::new());
    flags(cmd, cmd.get_name(), &mut all, &mut names);
    let mut problems = Vec::new();
    for f in &all {
        let wanted: Vec<&String> = f.short.iter().chain(&f.long).collect();
        if !rows.iter().any(|r| wanted.iter().all(|w| r.contains(*w))) {
            let said: Vec<&str> = wanted.iter().map(|w| w.as_str()).collect();
            problems.push(format!(
                "{}: {} has no row in the {} column",
                f.command,
                said.join(" "),
                tool.column()
            ));
        }
    }
    let mut unknown: BTreeSet<&String> = BTreeSet::new();
    for r in &rows {
        unknown.extend(r.iter().filter(|n| !names.contains(*n)));
    }
    for n in unknown {
        problems.push(format!(
            "{n}: the {} column names it, but {} has no such flag",
            tool.column(),
            cmd.get_name()
        ));
    }
    if rows.is_empty() {
        problems.push(format!("the table under `{SECTION}` has no rows"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// kubectl's short spellings as railsweep takes them, each with the long name it goes with
/// there: the one place a spelling of both tools may mean two things (docs/railsweep.md, "One
/// meaning per spelling").
pub const KUBECTL_SHORT: &[(&str, &str)] = &[
    ("-n", "--namespace"),
    ("-l", "--selector"),
    ("-A", "--all-namespaces"),
    ("-o", "--output"),
    ("-c", "--container"),
];

/// The rule of docs/railsweep.md, "One meaning per spelling", checked over the table of
/// `markdown` (whose columns [`check`] holds to each binary's flags): a spelling both columns
/// name is named in one row by both (one meaning), unless it is one of kubectl's short names
/// and railsweep's rows give it only with kubectl's long name; and railsweep never gives one of
/// kubectl's long names without kubectl's short one. The error names each spelling that breaks
/// it and the rows.
pub fn check_rule(markdown: &str) -> Result<(), String> {
    let rdmabw = rows(markdown, Tool::Rdmabw)?;
    let railsweep = rows(markdown, Tool::Railsweep)?;
    let mut problems = Vec::new();
    let show = |r: &BTreeSet<String>| r.iter().cloned().collect::<Vec<_>>().join(" ");
    for row in &railsweep {
        for (short, long) in KUBECTL_SHORT {
            if row.contains(*long) && !row.contains(*short) {
                problems.push(format!(
                    "{long}: kubectl's, but railsweep's row ({}) lacks kubectl's {short}",
                    show(row)
                ));
            }
        }
    }
    let both: BTreeSet<&String> = rdmabw
        .iter()
        .flatten()
        .filter(|n| railsweep.iter().any(|r| r.contains(*n)))
        .collect();
    for name in both {
        let same_row = rdmabw
            .iter()
            .zip(&railsweep)
            .any(|(a, b)| a.contains(name) && b.contains(name));
        if same_row {
            continue;
        }
        let kubectls = KUBECTL_SHORT.iter().find(|(short, _)| *short == name);
        let railsweep_rows: Vec<&BTreeSet<String>> =
            railsweep.iter().filter(|r| r.contains(name)).collect();
        if let Some((_, long)) = kubectls {
            if railsweep_rows.iter().all(|r| r.contains(*long)) {
                continue;
            }
        }
        let rdmabw_rows: Vec<String> = rdmabw
            .iter()
            .filter(|r| r.contains(name))
            .map(&show)
            .collect();
        problems.push(format!(
            "{name} means two things: rdmabw's row ({}), railsweep's ({})",
            rdmabw_rows.join("; "),
            railsweep_rows
                .iter()
                .map(|r| show(r))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const DOC: &str = "\
# x

## Every flag of both tools

text

| rdmabw | railsweep | meaning |
| --- | --- | --- |
| `-n`, `--iters` | | writes |
| | `-n`, `--namespace` | pods' namespace |
| `--poll spin\\|event` | `--dry-run=client` | |

after
";

    #[test]
    fn rows_are_the_backticked_flags_of_a_column() {
        let r = rows(DOC, Tool::Rdmabw).unwrap();
        assert_eq!(r.len(), 3);
        assert!(r[0].contains("-n") && r[0].contains("--iters"));
        assert!(r[1].is_empty());
        assert_eq!(r[2].iter().collect::<Vec<_>>(), ["--poll"]);
        let r = rows(DOC, Tool::Railsweep).unwrap();
        assert!(r[1].contains("--namespace"));
        assert_eq!(r[2].iter().collect::<Vec<_>>(), ["--dry-run"]);
    }

    #[test]
    fn a_spelling_of_both_tools_is_one_row_or_kubectls_short_name() {
        // -n: rdmabw's --iters, railsweep's kubectl --namespace: allowed.
        assert_eq!(check_rule(DOC), Ok(()));
        let two =
            "## Every flag of both tools\n\n| rdmabw | railsweep | m |\n| --- | --- | --- |\n\
                   | `-D`, `--duration` | | whole test |\n| | `-D`, `--duration` | window |\n";
        let e = check_rule(two).unwrap_err();
        assert!(
            e.contains("-D means two things") && e.contains("--duration means two things"),
            "{e}"
        );
        let loose =
            "## Every flag of both tools\n\n| rdmabw | railsweep | m |\n| --- | --- | --- |\n\
                     | `-o`, `--outs` | | a count |\n| | `-o`, `--out-file` | a file |\n\
                     | | `--namespace` | no -n |\n";
        let e = check_rule(loose).unwrap_err();
        assert!(e.contains("-o means two things"), "{e}");
        assert!(e.contains("--namespace: kubectl's"), "{e}");
    }

    #[test]
    fn a_flag_without_a_row_and_a_row_without_a_flag_fail() {
        let cmd = clap::Command::new("rdmabw")
            .arg(clap::Arg::new("iters").short('n').long("iters"))
            .subcommand(
                clap::Command::new("client").arg(clap::Arg::new("x").long("extra").num_args(0)),
            );
        let e = check(&cmd, DOC, Tool::Rdmabw).unwrap_err();
        assert!(e.contains("rdmabw client: --extra has no row"), "{e}");
        assert!(e.contains("--poll: the rdmabw column names it"), "{e}");
        assert!(!e.contains("--iters"), "{e}");
    }
}

//! railsweep: rail-by-rail RDMA sweeps between Kubernetes pods.
//!
//! Exit codes, for every subcommand ([`orchestrator::exit`]): 0 when all is well, 1 when the
//! command ran but found a problem in the results (a rail failed or fell below the threshold,
//! a mode or a pair was not measured), 2 for usage errors and unreadable input, 130 after
//! Ctrl-C; a closed stdout (broken pipe) is 0.
#![forbid(unsafe_code)]

mod report;
mod why;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use orchestrator::exit;

/// Sweep every RDMA rail between two pods and compare network modes.
#[derive(Debug, Parser)]
#[command(
    name = "railsweep",
    version = results::VERSION,
    about = "Measure every RDMA rail between Kubernetes pods with rdmabw: one pair rail by rail, \
             each way pods get their NICs side by side, or a whole fleet of nodes in rounds.",
    after_help = EXAMPLES,
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The first lines a newcomer needs; each command's `--help` has its own.
const EXAMPLES: &str = "\
Examples:
  # every rail between two existing pods, 5 s each, in the lossless traffic class
  railsweep run --server-pod rdma-a --client-pod rdma-b -n railbench --tclass 41
  # create the pods of each mode on two nodes, sweep, and compare the modes
  railsweep compare --modes hostnetwork,ipvlan --nodes node-a,node-b \\
      --networks 'ipvlan:rdma-ipvlan-{0..15}' --rdma-resource 'ipvlan:nvidia.com/hostdev=16'
  # every pair of the nodes labelled rail-test=true, and the suspects
  railsweep fleet --mode hostnetwork --nodes rail-test=true --window 5 --tclass 41
  # merge saved runs into a markdown table and a PNG chart
  railsweep report host.csv ipvlan.csv --output-file modes.png
  # why rail 5 of a saved run failed or is slow: its evidence, layer and fix
  railsweep explain railsweep-20261206T101500Z.csv --rail 5

Exit status: 0 ok, 1 a rail failed or fell below a threshold, 2 usage or set-up error,
130 interrupted. Docs: docs/railsweep.md, docs/fleet.md, docs/modes.md.";

/// The subcommands. Each returns the [`exit::Verdict`] of a run that completed; an `Err` becomes
/// exit code 2 (0 for a broken pipe).
#[derive(Debug, Subcommand)]
enum Command {
    /// Sweep the rails between two pods with rdmabw, one rail after another (or all at once).
    Run(Box<orchestrator::run::RunArgs>),
    /// Merge saved runs (CSV or JSON) and print or write the per-rail comparison.
    Report(report::ReportArgs),
    /// Create the pod pair of each network mode in turn, sweep it, and compare the modes.
    Compare(Box<orchestrator::compare::CompareArgs>),
    /// Every rail of every pair of a set of pods, in rounds of disjoint pairs, and the suspects.
    Fleet(Box<orchestrator::fleet::FleetArgs>),
    /// The whole chain of evidence behind saved rails' verdicts: where, what, the error, the
    /// counters and findings, the layer at fault and the fix.
    Explain(why::ExplainArgs),
}

fn main() -> ExitCode {
    use orchestrator::{block_on, Command as Cluster};
    if let Some(refusal) = orchestrator::config::renamed::refusal(std::env::args()) {
        eprintln!("railsweep: error: {refusal}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    exit::status(match cli.command {
        Command::Report(args) => report::run(&args),
        Command::Explain(args) => why::run(&args),
        Command::Run(args) => block_on(Cluster::Run(args)),
        Command::Compare(args) => block_on(Cluster::Compare(args)),
        Command::Fleet(args) => block_on(Cluster::Fleet(args)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every flag of every railsweep command has its row in the side-by-side table of
    /// docs/railsweep.md, and that table names no railsweep flag that is gone.
    #[test]
    fn every_flag_is_in_the_table_of_both_tools() {
        use results::rdmabw::flag_table::{check, Tool};
        let doc = include_str!("../../docs/railsweep.md");
        if let Err(e) = check(&Cli::command(), doc, Tool::Railsweep) {
            panic!("docs/railsweep.md, the flag table:\n{e}");
        }
    }

    /// The flag walk's rule over the table both binaries' tests hold to their flags: a
    /// spelling of both tools means one thing, or is kubectl's short name in railsweep.
    #[test]
    fn every_spelling_of_both_tools_has_one_meaning() {
        let doc = include_str!("../../docs/railsweep.md");
        if let Err(e) = results::rdmabw::flag_table::check_rule(doc) {
            panic!("docs/railsweep.md, the flag table breaks the rule:\n{e}");
        }
    }

    /// The flags (`--mode`, `-c`) a help text lists: the words of the options' own lines, not
    /// of their descriptions.
    fn flags_listed(help: &str) -> Vec<String> {
        help.lines()
            .filter(|l| (2..=6).contains(&(l.len() - l.trim_start().len())))
            .filter(|l| l.trim_start().starts_with('-'))
            .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == ','))
            .filter(|w| w.starts_with('-'))
            .map(|w| w.split(['=', '[', '<']).next().unwrap_or(w).to_string())
            .collect()
    }

    fn help_of(name: &str, long: bool) -> String {
        let mut cli = Cli::command();
        let sub = cli
            .find_subcommand_mut(name)
            .unwrap_or_else(|| panic!("no subcommand {name}"));
        let help = if long {
            sub.render_long_help()
        } else {
            sub.render_help()
        };
        help.to_string()
    }

    /// `compare --help` lists only what compare takes: the options of `railsweep run` that it
    /// refuses are hidden (and still refused by name when given).
    #[test]
    fn compare_help_lists_none_of_the_flags_compare_refuses() {
        for long in [false, true] {
            let help = help_of("compare", long);
            let listed = flags_listed(&help);
            for refused in [
                "--server-pod",
                "--client-pod",
                "-c",
                "--container",
                "--mode",
                "--runner",
                "--resume",
                "--out_json_file",
            ] {
                assert!(
                    !listed.iter().any(|f| f == refused),
                    "compare --help lists {refused}:\n{help}"
                );
            }
            for taken in [
                "--modes",
                "--nodes",
                "--tclass",
                "-n",
                "-o",
                "--output-file",
            ] {
                assert!(
                    listed.iter().any(|f| f == taken),
                    "compare --help lacks {taken}:\n{help}"
                );
            }
        }
    }

    /// Every command's help groups its options and ends with examples.
    #[test]
    fn each_command_groups_its_options_and_ends_with_examples() {
        use orchestrator::config::heading;
        for (name, headings) in [
            (
                "run",
                &[
                    heading::MEASURE,
                    heading::PODS,
                    heading::KUBERNETES,
                    heading::OUTPUT,
                    heading::CREATED,
                ][..],
            ),
            (
                "compare",
                &[
                    heading::MEASURE,
                    heading::PODS,
                    heading::KUBERNETES,
                    heading::OUTPUT,
                    heading::CREATED,
                ],
            ),
            (
                "fleet",
                &[
                    heading::MEASURE,
                    heading::PODS,
                    heading::PAIRS,
                    heading::VERDICTS,
                    heading::KUBERNETES,
                    heading::OUTPUT,
                    heading::CREATED,
                ],
            ),
            ("report", &[heading::OUTPUT, heading::VERDICTS]),
        ] {
            let help = help_of(name, false);
            for h in headings {
                assert!(
                    help.contains(&format!("\n{h}:\n")),
                    "{name}: no {h}:\n{help}"
                );
            }
            // No option is left outside a group (clap's -h/--help is).
            let ungrouped = help
                .split("\nOptions:\n")
                .nth(1)
                .and_then(|s| s.split("\n\n").next())
                .unwrap_or_default();
            let ungrouped: Vec<String> = flags_listed(ungrouped)
                .into_iter()
                .filter(|f| !["-h", "--help"].contains(&f.as_str()))
                .collect();
            assert!(
                ungrouped.is_empty(),
                "{name}: ungrouped {ungrouped:?}:\n{help}"
            );
            let examples = help
                .rfind("\nExamples:\n")
                .unwrap_or_else(|| panic!("{name}:\n{help}"));
            let tail = &help[examples..];
            assert!(
                tail.lines().skip(2).all(|l| l.starts_with("  ")),
                "{name}: the help does not end with its examples:\n{tail}"
            );
            assert!(
                tail.contains(&format!("railsweep {name} ")),
                "{name}:\n{tail}"
            );
        }
    }
}

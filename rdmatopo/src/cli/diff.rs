use super::args::Format;
use super::output::{Output, json};
use crate::checks::diff::{Diff, diff};
use crate::checks::doctor::Outcome;
use clap::Args;
use std::fmt::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The first view: a root directory or a snapshot (typically the host).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The second view (typically a pod on that host).
    #[arg(value_name = "B")]
    pub b: PathBuf,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Every fact in the table, the same ones too (the default shows what changed).
    #[arg(long)]
    pub all: bool,
}

/// Exit 0 when nothing differs, 1 when something does (like diff(1)); 3: could not run.
pub fn run(args: &DiffArgs) -> Result<Output, String> {
    let a = crate::discover(Some(&args.a)).map_err(|e| e.to_string())?;
    let b = crate::discover(Some(&args.b)).map_err(|e| e.to_string())?;
    let d = diff(&a, &b);
    let text = match args.format {
        Format::Json => json(&d),
        Format::Table => table(&d, args.all),
    };
    Ok(Output::with_code(text, i32::from(d.differs())))
}

fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "ok",
        Outcome::NotApplicable => "n/a",
        Outcome::Skipped => "skipped",
        Outcome::Info => "info",
        Outcome::Warning => "warning",
        Outcome::Error => "error",
    }
}

/// Widest A column before a longer value puts B on a line of its own.
const A_WIDTH: usize = 48;

/// The facts that changed (every fact with `all`), values whole: one longer than the A
/// column puts B on the next line, under the B column.
fn table(d: &Diff, all: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "A: {} ({})", d.a.root, d.a.context.describe());
    let _ = writeln!(s, "B: {} ({})", d.b.root, d.b.context.describe());
    let shown: Vec<_> = d.facts.iter().filter(|f| all || f.changed).collect();
    let changed = d.facts.iter().filter(|f| f.changed).count();
    if shown.is_empty() {
        let _ = writeln!(s, "\nno fact differs ({} compared)", d.facts.len());
    } else {
        let tw = shown
            .iter()
            .map(|f| f.topic.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let aw = shown
            .iter()
            .map(|f| f.a.chars().count())
            .filter(|&n| n <= A_WIDTH)
            .max()
            .unwrap_or(1)
            .max(1);
        let _ = writeln!(s, "\n  {:<tw$}  {:<aw$}  B", "what", "A");
        for f in shown {
            let mark = if f.changed { "*" } else { " " };
            let b = if f.changed { f.b.as_str() } else { "(same)" };
            if f.a.chars().count() > aw {
                let _ = writeln!(s, "{mark} {:<tw$}  {}", f.topic, f.a);
                let _ = writeln!(s, "  {:<tw$}  {:<aw$}  {b}", "", "");
            } else {
                let _ = writeln!(s, "{mark} {:<tw$}  {:<aw$}  {b}", f.topic, f.a);
            }
        }
    }
    if d.checks.is_empty() {
        s.push_str("\nChecks: every check ends the same on both sides\n");
    } else {
        s.push_str("\nChecks that differ (A -> B):\n");
        for c in &d.checks {
            let _ = writeln!(s, "  {:<17} {} -> {}", c.check, outcome(c.a), outcome(c.b));
            for f in &c.only_in_b {
                let _ = writeln!(s, "      + {f}");
            }
            for f in &c.only_in_a {
                let _ = writeln!(s, "      - {f}");
            }
        }
    }
    let _ = writeln!(
        s,
        "\n{changed} of {} fact(s) and {} check(s) differ{}",
        d.facts.len(),
        d.checks.len(),
        if all {
            " (* marks a changed fact)"
        } else {
            "; `--all` shows every fact"
        }
    );
    s
}

use super::args::Format;
use super::output::{Output, json};
use clap::Args;
use rdmatopo::checks::diff::{Diff, diff};
use rdmatopo::checks::doctor::Outcome;
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
}

/// Exit 0 when nothing differs, 1 when something does (like diff(1)); 3: could not run.
pub fn run(args: &DiffArgs) -> Result<Output, String> {
    let a = rdmatopo::discover(Some(&args.a)).map_err(|e| e.to_string())?;
    let b = rdmatopo::discover(Some(&args.b)).map_err(|e| e.to_string())?;
    let d = diff(&a, &b);
    let text = match args.format {
        Format::Json => json(&d),
        Format::Table => table(&d),
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

/// At most `max` characters (the JSON has the whole value).
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut t: String = text.chars().take(max - 1).collect();
    t.push('…');
    t
}

fn table(d: &Diff) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "A: {} ({})", d.a.root, d.a.context.describe());
    let _ = writeln!(s, "B: {} ({})", d.b.root, d.b.context.describe());
    let tw = d
        .facts
        .iter()
        .map(|f| f.topic.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let aw = d
        .facts
        .iter()
        .map(|f| f.a.chars().count())
        .max()
        .unwrap_or(1)
        .clamp(1, 48);
    let _ = writeln!(s, "\n  {:<tw$}  {:<aw$}  B", "what", "A");
    for f in &d.facts {
        let _ = writeln!(
            s,
            "{} {:<tw$}  {:<aw$}  {}",
            if f.changed { "*" } else { " " },
            f.topic,
            cut(&f.a, 48),
            if f.changed {
                cut(&f.b, 60)
            } else {
                "(same)".to_string()
            }
        );
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
    let changed = d.facts.iter().filter(|f| f.changed).count();
    let _ = writeln!(
        s,
        "\n{changed} fact(s) and {} check(s) differ (* marks a changed fact)",
        d.checks.len()
    );
    s
}

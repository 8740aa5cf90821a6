use super::args::{Format, RootArgs};
use super::output::{Output, json};
use clap::Args;
use rdmatopo::checks::doctor::{self, Finding, Outcome, Report};
use rdmatopo::model::Severity;
use std::fmt::Write;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub root: RootArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Read every visible device in full, even inside a container (the default there
    /// reads only the devices it owns, when that is certain; the answers are the same).
    #[arg(long)]
    pub all: bool,
}

/// Exit 0 clean, 1 warnings, 2 errors (3: could not run).
pub fn run(args: &DoctorArgs) -> Result<Output, String> {
    let topo = args.root.discover_owned(rdmatopo::Needs::ALL, args.all)?;
    let report = doctor::run(&topo);
    let text = match args.format {
        Format::Json => json(&report),
        Format::Table => table(&report),
    };
    let code = report.exit_code();
    super::output::keep_until_exit((topo, report));
    Ok(Output::with_code(text, code))
}

const WIDTH: usize = 100;

/// Write `first` then `text`, wrapped at word boundaries to `WIDTH`, continuation
/// lines indented by `indent`.
fn wrap(out: &mut String, first: &str, indent: usize, text: &str) {
    let pad = " ".repeat(indent);
    let mut line = first.to_string();
    // The line's width in characters, kept as it grows rather than counted per word.
    let mut width = line.chars().count();
    let mut fresh = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let sep = usize::from(!(line.is_empty() || line.ends_with(' ')));
        let word_width = word.chars().count();
        if !fresh && width + sep + word_width > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line.clone_from(&pad);
            width = indent;
        } else if sep == 1 {
            line.push(' ');
            width += 1;
        }
        line.push_str(word);
        width += word_width;
        fresh = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

fn severity_word(f: &Finding) -> &'static str {
    match (f.skipped, f.severity) {
        (true, _) => "SKIPPED",
        (_, Severity::Error) => "ERROR",
        (_, Severity::Warning) => "WARNING",
        (_, Severity::Info) => "INFO",
    }
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "ok",
        Outcome::NotApplicable => "n/a",
        Outcome::Skipped => "skipped",
        Outcome::Info => "info",
        Outcome::Warning => "WARNING",
        Outcome::Error => "ERROR",
    }
}

fn table(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "rdmatopo doctor: {} view; judging {} GPU(s){} and {} RDMA device(s){}",
        r.context.describe(),
        r.judged.gpus.len(),
        bracket(
            &r.judged
                .gpus
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
        ),
        r.judged.rdma_devices.len(),
        bracket(&r.judged.rdma_devices)
    );
    for f in &r.findings {
        s.push('\n');
        wrap(
            &mut s,
            &format!("{:<8} {}:", severity_word(f), f.check),
            9,
            &f.summary,
        );
        for e in &f.evidence {
            wrap(
                &mut s,
                "         evidence:",
                19,
                &format!("{} = {}", e.path, e.value),
            );
        }
        if !f.why.is_empty() {
            wrap(&mut s, "         why:", 14, &f.why);
        }
        if !f.fix.is_empty() {
            wrap(&mut s, "         fix:", 14, &f.fix);
        }
    }
    s.push_str("\nChecks:\n");
    let width = r.checks.iter().map(|c| c.check.len()).max().unwrap_or(0);
    for c in &r.checks {
        let head = format!("  {:<8} {:<width$}  ", outcome_word(c.outcome), c.check);
        let indent = head.len();
        wrap(&mut s, &head, indent, &c.note);
    }
    let (e, w) = (r.count(Severity::Error), r.count(Severity::Warning));
    let _ = writeln!(
        s,
        "\n{} error(s), {} warning(s), {} note(s), {} check(s) skipped: exit {}",
        e,
        w,
        r.count(Severity::Info),
        r.checks
            .iter()
            .filter(|c| c.outcome == Outcome::Skipped)
            .count(),
        r.exit_code()
    );
    s
}

/// ` (a, b, c)`, shortened past six names; empty for none.
fn bracket(names: &[String]) -> String {
    match names.len() {
        0 => String::new(),
        n if n <= 6 => format!(" ({})", names.join(", ")),
        n => format!(" ({}, … {} in all)", names[..4].join(", "), n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines break at `WIDTH` characters, not bytes, and continue under the indent.
    #[test]
    fn wrap_breaks_at_the_width_in_characters() {
        let word = "µ".repeat(30);
        let mut out = String::new();
        wrap(&mut out, "  why:", 8, &[word.as_str(); 4].join(" "));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert_eq!(lines[0].chars().count(), 99, "{out}");
        assert_eq!(lines[1], format!("{}{word}", " ".repeat(8)));
    }
}

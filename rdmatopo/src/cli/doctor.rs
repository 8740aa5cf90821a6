use super::args::{Format, RootArgs};
use super::output::{Output, json};
use crate::checks::doctor::{self, Finding, Outcome, Report};
use crate::model::Severity;
use anstyle::{AnsiColor, Style};
use clap::{Args, ValueEnum};
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
    /// Show only findings (and checks) of this severity or worse; the exit code still
    /// counts every finding.
    #[arg(long, value_enum, value_name = "LEVEL", default_value = "info")]
    pub min_severity: Level,
    /// Print nothing: the exit code alone says clean (0), warnings (1) or errors (2).
    #[arg(short, long, conflicts_with_all = ["format", "min_severity"])]
    pub quiet: bool,
}

/// The least severity `--min-severity` shows.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Everything: notes, skipped checks, checks that passed.
    Info,
    Warning,
    Error,
}

impl Level {
    fn shows(self, f: &Finding) -> bool {
        match self {
            Level::Info => true,
            Level::Warning => !f.skipped && f.severity >= Severity::Warning,
            Level::Error => !f.skipped && f.severity == Severity::Error,
        }
    }

    fn shows_check(self, o: Outcome) -> bool {
        match self {
            Level::Info => true,
            Level::Warning => matches!(o, Outcome::Warning | Outcome::Error),
            Level::Error => o == Outcome::Error,
        }
    }
}

/// Exit 0 clean, 1 warnings, 2 errors (3: could not run).
pub fn run(args: &DoctorArgs) -> Result<Output, String> {
    let topo = args.root.discover_owned(crate::Needs::ALL, args.all)?;
    let mut report = doctor::run(&topo);
    let code = report.exit_code();
    let text = if args.quiet {
        String::new()
    } else {
        let counts = Counts::of(&report);
        report.findings.retain(|f| args.min_severity.shows(f));
        match args.format {
            Format::Json => json(&report),
            Format::Table => {
                // Colour only where it will be seen: a terminal, unless NO_COLOR (or
                // CLICOLOR=0); CLICOLOR_FORCE asks for it anywhere.
                let colour = matches!(
                    anstream::AutoStream::choice(&std::io::stdout()),
                    anstream::ColorChoice::Always | anstream::ColorChoice::AlwaysAnsi
                );
                table(&report, &counts, args.min_severity, colour)
            }
        }
    };
    // A captured tree is judged with the environment captured in it (its NCCL_*
    // variables), never this shell's: said where a reader would assume otherwise.
    let notes = match &args.root.root {
        Some(r)
            if !args.quiet
                && args.format == Format::Table
                && r.as_path() != std::path::Path::new("/") =>
        {
            format!(
                "note: the NCCL and launcher variables judged are those captured under {} (its proc/self/environ), not this shell's\n",
                r.display()
            )
        }
        _ => String::new(),
    };
    Ok(Output::with_code(text, code).with_notes(notes))
}

/// The verdict's numbers, taken before `--min-severity` leaves findings out.
struct Counts {
    errors: usize,
    warnings: usize,
    notes: usize,
    skipped: usize,
    exit: i32,
}

impl Counts {
    fn of(r: &Report) -> Self {
        Self {
            errors: r.count(Severity::Error),
            warnings: r.count(Severity::Warning),
            notes: r.count(Severity::Info),
            skipped: r
                .checks
                .iter()
                .filter(|c| c.outcome == Outcome::Skipped)
                .count(),
            exit: r.exit_code(),
        }
    }
}

/// Errors first, then warnings, then notes, then what could not be checked; a check's
/// findings keep their order within each.
fn rank(f: &Finding) -> u8 {
    match (f.skipped, f.severity) {
        (false, Severity::Error) => 0,
        (false, Severity::Warning) => 1,
        (false, Severity::Info) => 2,
        (true, _) => 3,
    }
}

fn style_of(word: &str) -> Style {
    match word {
        "ERROR" | "ERRORS" => AnsiColor::Red.on_default().bold(),
        "WARNING" | "WARNINGS" => AnsiColor::Yellow.on_default().bold(),
        "OK" | "ok" => AnsiColor::Green.on_default(),
        "SKIPPED" | "skipped" | "n/a" => Style::new().dimmed(),
        _ => Style::new(),
    }
}

/// `word` in its colour when `colour`, followed by what was padded after it.
fn paint(line: &str, word: &str, colour: bool) -> String {
    match line.strip_prefix(word) {
        Some(rest) if colour => {
            let style = style_of(word);
            format!("{style}{word}{style:#}{rest}")
        }
        _ => line.to_string(),
    }
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

fn table(r: &Report, n: &Counts, level: Level, colour: bool) -> String {
    let mut s = String::new();
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    // The verdict first: what a reader (or a log line) needs before any detail.
    let verdict = match n.exit {
        0 => "OK",
        1 => "WARNINGS",
        _ => "ERRORS",
    };
    let line = format!(
        "{verdict}: {}, {}, {}, {} skipped (exit {})",
        plural(n.errors, "error"),
        plural(n.warnings, "warning"),
        plural(n.notes, "note"),
        plural(n.skipped, "check"),
        n.exit
    );
    let _ = writeln!(s, "{}", paint(&line, verdict, colour));
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
    let mut findings: Vec<&Finding> = r.findings.iter().collect();
    findings.sort_by_key(|f| rank(f));
    for f in findings {
        s.push('\n');
        let word = severity_word(f);
        let mut block = String::new();
        wrap(
            &mut block,
            &format!("{word:<8} {}:", f.check),
            9,
            &f.summary,
        );
        s.push_str(&paint(&block, word, colour));
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
    let checks: Vec<_> = r
        .checks
        .iter()
        .filter(|c| level.shows_check(c.outcome))
        .collect();
    if !checks.is_empty() {
        s.push_str("\nChecks:\n");
    }
    let width = checks.iter().map(|c| c.check.len()).max().unwrap_or(0);
    for c in checks {
        let word = outcome_word(c.outcome);
        let head = format!("  {word:<8} {:<width$}  ", c.check);
        let indent = head.len();
        let mut block = String::new();
        wrap(&mut block, &head, indent, &c.note);
        s.push_str("  ");
        s.push_str(&paint(&block[2..], word, colour));
    }
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

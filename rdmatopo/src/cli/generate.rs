//! `rdmatopo completions` and `rdmatopo man`: shell completion scripts and man pages,
//! generated from the same clap definitions that parse the command line, so they can
//! never describe options the binary does not have.

use super::output::Output;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

/// The date on every page: that of this version's entry in CHANGELOG.md (a test keeps
/// them equal). Fixed, so the pages of one version are the same wherever they are built.
const RELEASE_DATE: &str = "2026-12-06";

/// The shells whose completion scripts are generated (and tested).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellArg {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: ShellArg,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write one page per command (rdmatopo.1, rdmatopo-topo.1, rdmatopo-k8s-nfd.1 and
    /// so on) into DIR instead of printing rdmatopo.1.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// The completion script of `cli` (the whole command line, handed in by the dispatch
/// that knows it).
pub fn completions(args: &CompletionsArgs, mut cli: clap::Command) -> Result<Output, String> {
    let shell = match args.shell {
        ShellArg::Bash => clap_complete::Shell::Bash,
        ShellArg::Zsh => clap_complete::Shell::Zsh,
        ShellArg::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "rdmatopo", &mut script);
    String::from_utf8(script)
        .map(Output::ok)
        .map_err(|e| format!("completion script is not UTF-8: {e}"))
}

/// The man pages of `cli` (the whole command line, handed in by the dispatch that knows
/// it).
pub fn man(args: &ManArgs, cli: clap::Command) -> Result<Output, String> {
    // `help` is no command of its own to document.
    let mut root = cli.disable_help_subcommand(true);
    root.build();
    match &args.dir {
        None => render(&root).map(Output::ok),
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let mut written = String::new();
            write_pages(&root, dir, &mut written)?;
            Ok(Output::ok(written))
        }
    }
}

/// One page for `cmd` and each of its visible subcommands, depth first; the path of
/// every page written is appended to `written`, one a line.
fn write_pages(cmd: &clap::Command, dir: &Path, written: &mut String) -> Result<(), String> {
    let page = render(cmd)?;
    let path = dir.join(format!("{}.1", page_name(cmd)));
    std::fs::write(&path, page).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    written.push_str(&format!("{}\n", path.display()));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

/// `rdmatopo-k8s-nfd` for `rdmatopo k8s nfd` (a built command's display name).
fn page_name(cmd: &clap::Command) -> &str {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name())
}

fn render(cmd: &clap::Command) -> Result<String, String> {
    // Subcommands carry no version of their own; every page names the release.
    let man = clap_mangen::Man::new(cmd.clone())
        .title(page_name(cmd).to_uppercase())
        .date(RELEASE_DATE)
        .source(format!("rdmatopo {}", env!("CARGO_PKG_VERSION")))
        .manual("rdmatopo manual");
    let mut page = Vec::new();
    man.render(&mut page)
        .map_err(|e| format!("cannot render the man page of {}: {e}", page_name(cmd)))?;
    String::from_utf8(page).map_err(|e| format!("man page is not UTF-8: {e}"))
}

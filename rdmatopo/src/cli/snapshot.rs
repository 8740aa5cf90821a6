use super::args::RootArgs;
use super::output::Output;
use crate::snapshot::{Capture, Options, write_file};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub root: RootArgs,
    /// The archive to write (`.tar.gz` or `.tgz`); untarred, its top directory is a root.
    #[arg(short, long, value_name = "FILE.tar.gz")]
    pub output: PathBuf,
    /// Replace GUIDs, MACs, UUIDs, IP addresses and the host name, consistently.
    #[arg(long)]
    pub scrub: bool,
}

/// The archive's top directory: the file name without `.tar.gz` / `.tgz`.
fn top_dir(output: &std::path::Path) -> Result<String, String> {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    let stem = if lower.ends_with(".tar.gz") {
        &name[..name.len() - 7]
    } else if lower.ends_with(".tgz") {
        &name[..name.len() - 4]
    } else {
        return Err(format!(
            "{}: name the snapshot FILE.tar.gz or FILE.tgz",
            output.display()
        ));
    };
    Ok(if stem.is_empty() {
        "rdmatopo-snapshot"
    } else {
        stem
    }
    .to_string())
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 10 << 20 => format!("{} MiB", b >> 20),
        b if b >= 10 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

pub fn run(args: &SnapshotArgs) -> Result<Output, String> {
    let top = top_dir(&args.output)?;
    let fs = args.root.open()?.recording();
    let topo = crate::discover_fs(&fs).map_err(|e| e.to_string())?;
    let mut capture = Capture::from_journal(&fs, &topo);
    if args.scrub {
        capture.scrub();
    }
    let bytes = capture
        .to_tar_gz(&Options {
            top_dir: top.clone(),
        })
        .map_err(|e| e.to_string())?;
    write_file(&args.output, &bytes).map_err(|e| e.to_string())?;
    let s = capture.stats();
    let out = args.output.display();
    Ok(Output::ok(format!(
        "wrote {out}{}: {} files, {} symlinks, {} directories ({} of file content, {} compressed)\n\
         discovery read {} files ({} paths looked at); storing them read {} files again \
         and {} PCI id files beside their uevent\n\
         use it as it is (`rdmatopo doctor --root {out}`) or untarred (`tar xzf {out}` then `--root {top}`)\n",
        if args.scrub { " (scrubbed)" } else { "" },
        s.files,
        s.symlinks,
        s.dirs,
        size(s.bytes),
        size(bytes.len() as u64),
        s.discovery_reads,
        s.journal_paths,
        s.capture_reads,
        s.identity_reads,
    )))
}

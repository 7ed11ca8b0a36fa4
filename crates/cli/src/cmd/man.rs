//! `volhealth man DIR`: man pages generated from the clap definitions, one per subcommand.

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Flags of `volhealth man`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to write `volhealth.1` and `volhealth-SUBCOMMAND.1` into (created if missing),
    /// e.g. `volhealth man ~/.local/share/man/man1`.
    pub dir: PathBuf,
}

/// Writes the page of a built `command` as `<dir>/<display name>.1` (`volhealth-monitor.1`),
/// then those of its subcommands.
fn write_pages(command: &clap::Command, dir: &Path) -> anyhow::Result<usize> {
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name());
    let path = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut page)
        .with_context(|| format!("rendering the man page of {name}"))?;
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    let mut written = 1;
    // clap's generated `help` subcommands only repeat the pages written here.
    for sub in command
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        written += write_pages(sub, dir)?;
    }
    Ok(written)
}

/// Writes every page into `args.dir` and says how many.
pub fn run(args: Args, command: clap::Command) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let mut command = command;
    // Building gives each subcommand its display name, `volhealth-<subcommand>`.
    command.build();
    let written = write_pages(&command, &args.dir)?;
    println!("wrote {written} man pages to {}", args.dir.display());
    Ok(ExitCode::SUCCESS)
}

//! `volhealth kubectl-plugin DIR`: installs this binary as `DIR/kubectl-volhealth`, so that
//! `kubectl volhealth` runs `volhealth status`, wherever cargo put the binary.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

/// The file name kubectl looks for on PATH to run `kubectl volhealth`.
const PLUGIN_NAME: &str = "kubectl-volhealth";

/// Flags of `volhealth kubectl-plugin`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A directory on your PATH (created if missing), e.g. ~/.local/bin.
    pub dir: PathBuf,
}

/// Creates (or replaces) the symlink `DIR/kubectl-volhealth` to this very binary.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let me = std::env::current_exe().context("finding the path of this binary")?;
    let me = me.canonicalize().unwrap_or(me);
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    // The plugin, and its completion as kubectl (1.26 and later) looks for it.
    for name in [PLUGIN_NAME, crate::cmd::status::complete::COMPLETION_NAME] {
        let link = args.dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::remove_file(&link)
                .with_context(|| format!("replacing the old {}", link.display()))?,
            Ok(_) => anyhow::bail!(
                "{} exists and is not a symlink; remove it first",
                link.display()
            ),
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&me, &link)
            .with_context(|| format!("linking {} to {}", link.display(), me.display()))?;
        println!("{} -> {}", link.display(), me.display());
    }
    println!(
        "with {} on PATH, run: kubectl volhealth -A (Tab completes it in kubectl's shell completion)",
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

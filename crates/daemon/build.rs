//! Puts the git revision of the build into `VOLHEALTH_GIT_REVISION`, for `--version` and
//! `volhealth_build_info`: the variable itself when the build sets it (an image built from a
//! context without `.git` passes it as a build argument), else `git rev-parse`, else `unknown`.

use std::path::PathBuf;
use std::process::Command;

/// `git ARGS` in this crate's directory, trimmed, when git answers.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo::rerun-if-env-changed=VOLHEALTH_GIT_REVISION");
    let revision = match std::env::var("VOLHEALTH_GIT_REVISION") {
        Ok(r) if !r.trim().is_empty() => r.trim().to_string(),
        _ => {
            // Rebuilt when HEAD moves: a commit changes the ref HEAD names (or packed-refs).
            if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
                let git_dir = PathBuf::from(git_dir);
                println!("cargo::rerun-if-changed={}", git_dir.join("HEAD").display());
                if let (Some(common), Some(head_ref)) = (
                    git(&["rev-parse", "--git-common-dir"]),
                    git(&["symbolic-ref", "-q", "HEAD"]),
                ) {
                    let common = PathBuf::from(common);
                    println!(
                        "cargo::rerun-if-changed={}",
                        common.join(head_ref).display()
                    );
                    println!(
                        "cargo::rerun-if-changed={}",
                        common.join("packed-refs").display()
                    );
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    println!("cargo::rustc-env=VOLHEALTH_GIT_REVISION={revision}");
}

//! Shell completion of `kubectl volhealth`, as kubectl (1.26 and later) asks a plugin for it: it
//! runs `kubectl_complete-volhealth ARGS…` (the words after `kubectl volhealth`, the last one
//! being completed) and reads one candidate per line, then `:DIRECTIVE` (Cobra's shell-completion
//! directive; 4 = do not fall back to file names).

use clap::CommandFactory as _;

/// The file name kubectl runs to complete `kubectl volhealth`.
pub const COMPLETION_NAME: &str = "kubectl_complete-volhealth";

/// Cobra's `ShellCompDirectiveNoFileComp`.
const NO_FILE_COMPLETION: u8 = 4;

/// Whether the program was started as [`COMPLETION_NAME`].
pub fn called_for_completion(argv0: &std::ffi::OsStr) -> bool {
    std::path::Path::new(argv0)
        .file_name()
        .is_some_and(|n| n == COMPLETION_NAME)
}

/// The candidates for the last word of `args` (the words after `kubectl volhealth`), in
/// kubectl's plugin-completion format.
pub fn complete(args: &[String]) -> String {
    let command = super::PluginCli::command();
    let word = args.last().map(String::as_str).unwrap_or("");
    let before = args.len().checked_sub(2).and_then(|i| args.get(i));
    let mut out: Vec<String> = Vec::new();
    // The value of the flag just before, when its values are known.
    let value_of = before.and_then(|prev| {
        command.get_arguments().find(|a| {
            a.get_long().is_some_and(|l| *prev == format!("--{l}"))
                || a.get_short().is_some_and(|s| *prev == format!("-{s}"))
        })
    });
    match value_of.filter(|a| a.get_action().takes_values()) {
        Some(arg) => {
            out.extend(
                arg.get_possible_values()
                    .iter()
                    .filter(|v| !v.is_hide_set())
                    .map(|v| v.get_name().to_string()),
            );
        }
        None if word.starts_with('-') => {
            for arg in command.get_arguments().filter(|a| !a.is_hide_set()) {
                out.extend(arg.get_long().map(|l| format!("--{l}")));
                out.extend(arg.get_short().map(|s| format!("-{s}")));
            }
        }
        // `kubectl volhealth status …` is accepted too.
        None if args.len() <= 1 => out.push("status".into()),
        None => {}
    }
    out.retain(|c| c.starts_with(word));
    out.sort();
    out.dedup();
    let mut text: String = out.into_iter().map(|c| c + "\n").collect();
    text.push_str(&format!(":{NO_FILE_COMPLETION}\n"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_values_and_the_status_word() {
        let got = complete(&words(&["--all"]));
        assert_eq!(got, "--all-namespaces\n:4\n");
        let got = complete(&words(&["-A", "-o", ""]));
        assert_eq!(got, "json\ntable\nwide\nyaml\n:4\n");
        let got = complete(&words(&["-o", "j"]));
        assert_eq!(got, "json\n:4\n");
        assert_eq!(complete(&words(&["st"])), "status\n:4\n");
        assert_eq!(complete(&words(&["-A", "x"])), ":4\n");
        let all = complete(&words(&["--"]));
        for flag in [
            "--selector",
            "--watch",
            "--wait-for",
            "--kubeconfig",
            "--as",
        ] {
            assert!(all.lines().any(|l| l == flag), "{flag} in {all}");
        }
        assert!(
            !all.contains("--logtostderr"),
            "hidden flags are not offered"
        );
    }
}

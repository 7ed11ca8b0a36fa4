//! Flags as Go's `flag` package parses them, for the components that replace Kubernetes
//! sidecars: charts pass `-v=5`, `-csi-address=/csi/csi.sock`, `--leader-election=true`, and
//! a drop-in replacement must take them as the Go binary did.
//!
//! - One dash or two: `-flag` is `--flag`. Before clap sees the arguments, [`normalize`] turns a
//!   single-dash word into its two-dash form (up to a `--` that ends the flags).
//! - Booleans: `--flag` alone is true; `--flag=VALUE` takes what Go's `strconv.ParseBool` takes
//!   ([`parse_bool`]); a following word is never the flag's value. Give a bool field
//!   `#[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
//!   action = clap::ArgAction::Set, value_parser = go_flags::parse_bool)]`.

use std::ffi::OsString;

/// `args` with every single-dash flag word from index `from` on given its second dash, up to a
/// `--` that ends the flags. A lone `-` (stdin, by convention) and negative numbers are left as
/// they are.
pub fn normalize(args: impl IntoIterator<Item = OsString>, from: usize) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut flags_ended = false;
    for (i, arg) in args.into_iter().enumerate() {
        if i < from || flags_ended {
            out.push(arg);
            continue;
        }
        let text = arg.to_string_lossy();
        if text == "--" {
            flags_ended = true;
            out.push(arg);
            continue;
        }
        let single_dash_flag = text.starts_with('-')
            && !text.starts_with("--")
            && text[1..].starts_with(|c: char| c.is_ascii_alphabetic());
        if single_dash_flag {
            let mut long = OsString::from("-");
            long.push(&arg);
            out.push(long);
        } else {
            out.push(arg);
        }
    }
    out
}

/// A flag value [`parse_bool`] does not read as a boolean.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a boolean (use true or false, as in --flag=false)")]
pub struct NotABool(pub String);

/// A boolean as Go's `strconv.ParseBool` reads it: 1, t, T, TRUE, true, True, 0, f, F, FALSE,
/// false, False.
pub fn parse_bool(s: &str) -> Result<bool, NotABool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(NotABool(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn single_dash_flags_get_their_second_dash() {
        assert_eq!(
            normalize(
                words(&[
                    "volhealth-monitor",
                    "-v=5",
                    "-csi-address=/csi/csi.sock",
                    "--leader-election=true",
                    "-timeout",
                    "15s",
                ]),
                1
            ),
            words(&[
                "volhealth-monitor",
                "--v=5",
                "--csi-address=/csi/csi.sock",
                "--leader-election=true",
                "--timeout",
                "15s",
            ])
        );
    }

    #[test]
    fn values_the_program_name_and_what_follows_a_double_dash_are_left_alone() {
        assert_eq!(
            normalize(
                words(&["-prog", "monitor", "--kube-api-qps", "-1", "-", "--", "-x"]),
                2
            ),
            words(&["-prog", "monitor", "--kube-api-qps", "-1", "-", "--", "-x"])
        );
    }

    #[test]
    fn booleans_as_go_reads_them() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(t), Ok(true), "{t}");
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(f), Ok(false), "{f}");
        }
        assert!(parse_bool("yes").is_err());
    }
}

//! `--secrets-file`: the secrets sent wherever CSI carries them.

use std::collections::HashMap;
use std::path::Path;

/// Why a secrets file could not be read. Never contains a secret value.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// The file could not be read.
    #[error("reading secrets file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not `KEY=VALUE`.
    #[error("secrets file {path}, line {line}: expected KEY=VALUE")]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
    },
}

/// Reads `KEY=VALUE` lines; blank lines and lines starting with `#` are ignored.
pub fn load(path: &Path) -> Result<HashMap<String, String>, SecretsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SecretsError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text).map_err(|line| SecretsError::Syntax {
        path: path.display().to_string(),
        line,
    })
}

/// Parses the file's text; the error is the first bad line's number.
pub fn parse(text: &str) -> Result<HashMap<String, String>, usize> {
    let mut out = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.insert(k.trim().to_string(), v.to_string());
            }
            _ => return Err(i + 1),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs_and_names_the_bad_line_without_its_content() {
        let got = parse("# comment\n\nuser=admin\ntoken=a=b\n").expect("parse");
        assert_eq!(got.get("user").map(String::as_str), Some("admin"));
        assert_eq!(got.get("token").map(String::as_str), Some("a=b"));
        assert_eq!(parse("ok=1\nhunter2\n"), Err(2));
    }
}

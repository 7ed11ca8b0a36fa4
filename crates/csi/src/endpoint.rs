//! Parsing of CSI endpoint strings (`--csi-address` style) into socket paths.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Turns `unix:///abs/path`, `unix:/abs/path`, `/abs/path` or `relative/path`
/// into a socket path. Other schemes (tcp, http) are rejected.
pub fn parse(s: &str) -> Result<PathBuf> {
    let invalid = |reason: &str| Error::InvalidEndpoint {
        endpoint: s.to_string(),
        reason: reason.to_string(),
    };
    let path = if let Some(rest) = s.strip_prefix("unix://") {
        if !rest.starts_with('/') {
            return Err(invalid(
                "unix:// must be followed by an absolute path (unix:///path)",
            ));
        }
        rest
    } else if let Some(rest) = s.strip_prefix("unix:") {
        if !rest.starts_with('/') {
            return Err(invalid("unix: must be followed by an absolute path"));
        }
        rest
    } else {
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(invalid(&format!(
                "scheme {scheme:?} is not supported; only unix sockets are"
            )));
        }
        s
    };
    if path.is_empty() {
        return Err(invalid("the path is empty"));
    }
    if path.contains('\0') {
        return Err(invalid("the path contains a NUL byte"));
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_forms() {
        for (input, want) in [
            ("unix:///run/csi/csi.sock", "/run/csi/csi.sock"),
            ("unix:/run/csi/csi.sock", "/run/csi/csi.sock"),
            ("/run/csi/csi.sock", "/run/csi/csi.sock"),
            ("csi/csi.sock", "csi/csi.sock"),
            ("csi.sock", "csi.sock"),
        ] {
            assert_eq!(parse(input).expect(input), PathBuf::from(want), "{input}");
        }
    }

    #[test]
    fn rejects_other_forms_with_the_endpoint_named() {
        for input in [
            "",
            "unix://",
            "unix://relative",
            "unix:relative",
            "tcp://127.0.0.1:9000",
            "a\0b",
        ] {
            let err = parse(input).expect_err(input).to_string();
            assert!(err.contains(&format!("{input:?}")), "{err}");
        }
    }
}

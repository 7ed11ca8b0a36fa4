//! Writing a kubeconfig that points at this server.

use crate::errors::{Error, Result};
use std::path::Path;

/// The kubeconfig text for `server_url`, with `token` as the user's bearer token when given.
pub fn render(server_url: &str, token: Option<&str>) -> String {
    let user = match token {
        Some(t) => format!(
            "    token: \"{}\"\n",
            t.replace('\\', "\\\\").replace('"', "\\\"")
        ),
        None => "    {}\n".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: volhealth\n  cluster:\n    server: {server_url}\ncontexts:\n- name: volhealth\n  context:\n    cluster: volhealth\n    namespace: default\n    user: volhealth\ncurrent-context: volhealth\npreferences: {{}}\nusers:\n- name: volhealth\n  user:\n{user}"
    )
}

/// Writes the kubeconfig atomically (temporary file in the same directory, then rename), so a
/// reader never sees a partial file.
pub fn write(path: &Path, server_url: &str, token: Option<&str>) -> Result<()> {
    let io = |what: String| move |source| Error::Io { what, source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "kubeconfig".into());
    let tmp = path.with_file_name(format!(".{file_name}.tmp.{}", std::process::id()));
    std::fs::write(&tmp, render(server_url, token))
        .map_err(io(format!("writing {}", tmp.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .map_err(io(format!("setting permissions of {}", tmp.display())))?;
    }
    std::fs::rename(&tmp, path).map_err(io(format!(
        "renaming {} to {}",
        tmp.display(),
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_server_and_token() {
        let t = super::render("http://127.0.0.1:1234", Some("abc"));
        assert!(t.contains("    server: http://127.0.0.1:1234\n"));
        assert!(t.contains("token: \"abc\""));
        let parsed: serde_yaml::Value = serde_yaml::from_str(&t).unwrap();
        assert_eq!(parsed["users"][0]["user"]["token"], "abc");
        let anon: serde_yaml::Value =
            serde_yaml::from_str(&super::render("http://x", None)).unwrap();
        assert!(anon["users"][0]["user"].is_mapping());
    }
}

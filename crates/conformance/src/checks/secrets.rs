//! Secrets: accepted where CSI carries them, never echoed back.

use std::collections::HashMap;

use tonic::Status;

use super::controller::shared_volume;
use super::{Runner, describe, plain, unknown_volume_id};
use crate::report::{Case, Outcome};
use crate::session::Session;

const ACCEPTED: Case = Case {
    name: "secrets.accepted",
    spec: "CSI v1.13.0 ControllerGetVolumeHealth, ControllerListVolumeHealth, NodeGetStorageHealth carry secrets (csi_secret)",
    description: "The health RPCs that carry secrets succeed with the secrets from --secrets-file.",
};
const NOT_ECHOED: Case = Case {
    name: "secrets.not_echoed",
    spec: "CSI v1.13.0 csi_secret: secret values MUST NOT be logged or returned",
    description: "No error message, error metadata or health message returned for a request with secrets contains a secret value.",
};

/// The cases of this module.
pub const CASES: &[Case] = &[ACCEPTED, NOT_ECHOED];

/// Key of the made-up secret added to every request of `secrets.not_echoed`.
const CANARY_KEY: &str = "volhealth-conformance-canary";

/// Runs this module's cases.
pub async fn run(r: &mut Runner<'_>) {
    let s = r.s;
    r.case(ACCEPTED, accepted(s)).await;
    r.case(NOT_ECHOED, not_echoed(s)).await;
}

async fn accepted(s: &Session) -> (Outcome, Vec<String>) {
    if s.secrets.is_empty() {
        return plain(Outcome::Skip("no --secrets-file given".into()));
    }
    if !(s.caps.get || s.caps.list || s.caps.node_storage) {
        return plain(Outcome::Skip(
            "no health RPC that carries secrets is advertised".into(),
        ));
    }
    let mut problems = Vec::new();
    if s.caps.get
        && let Ok(id) = shared_volume(s, 0).await
        && let Err(e) = s.get(&id).await
    {
        problems.push(format!("ControllerGetVolumeHealth: {}", describe(s, &e)));
    }
    if s.caps.list
        && let Err(e) = s.list_page(0, "").await
    {
        problems.push(format!("ControllerListVolumeHealth: {}", describe(s, &e)));
    }
    if s.caps.node_storage
        && let Err(e) = s.storage().await
    {
        problems.push(format!("NodeGetStorageHealth: {}", describe(s, &e)));
    }
    plain(super::from_problems(
        "requests with secrets must be served",
        problems,
    ))
}

async fn not_echoed(s: &Session) -> (Outcome, Vec<String>) {
    if !(s.caps.get || s.caps.list || s.caps.node_storage) {
        return plain(Outcome::Skip(
            "no health RPC that carries secrets is advertised".into(),
        ));
    }
    let canary: String = format!(
        "canary-{}-{:016x}",
        s.fixture.run_id(),
        rand::random::<u64>()
    );
    let mut secrets = s.secrets.clone();
    secrets.insert(CANARY_KEY.to_string(), canary);
    let mut texts: Vec<(&str, String)> = Vec::new();
    if s.caps.get {
        for id in [unknown_volume_id(s), String::new()] {
            match s.get_with(&id, secrets.clone()).await {
                Err(e) => texts.push(("ControllerGetVolumeHealth", status_text(&e))),
                Ok(vh) => texts.extend(
                    vh.health_statuses
                        .into_iter()
                        .map(|h| ("ControllerGetVolumeHealth", h.message)),
                ),
            }
        }
    }
    if s.caps.list {
        for token in [String::new(), "!not a token!".to_string()] {
            match s.list_page_with(0, &token, secrets.clone()).await {
                Err(e) => texts.push(("ControllerListVolumeHealth", status_text(&e))),
                Ok(p) => texts.extend(p.entries.into_iter().flat_map(|v| {
                    v.health_statuses
                        .into_iter()
                        .map(|h| ("ControllerListVolumeHealth", h.message))
                })),
            }
        }
    }
    if s.caps.node_storage {
        match s.storage_with(secrets.clone()).await {
            Err(e) => texts.push(("NodeGetStorageHealth", status_text(&e))),
            Ok(b) => texts.extend(b.into_iter().map(|h| ("NodeGetStorageHealth", h.message))),
        }
    }
    plain(super::from_problems(
        "secret values must never be echoed",
        echoes(&secrets, &texts),
    ))
}

/// Everything of an error a client can see: code, message, metadata and details.
fn status_text(e: &Status) -> String {
    let mut t = format!("{} ", e.message());
    for kv in e.metadata().iter() {
        if let tonic::metadata::KeyAndValueRef::Ascii(k, v) = kv {
            t.push_str(&format!("{}={} ", k, v.to_str().unwrap_or("")));
        }
    }
    t.push_str(&String::from_utf8_lossy(e.details()));
    t
}

/// Which secret (by key, never by value) shows up in which RPC's answer.
fn echoes(secrets: &HashMap<String, String>, texts: &[(&str, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (rpc, text) in texts {
        for (key, value) in secrets {
            if value.len() >= 4 && text.contains(value.as_str()) {
                found.push(format!("{rpc} returned the value of secret {key:?}"));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_name_the_key_not_the_value() {
        let secrets = HashMap::from([("token".to_string(), "hunter22".to_string())]);
        let found = echoes(&secrets, &[("Rpc", "bad request: token=hunter22".into())]);
        assert_eq!(
            found,
            vec!["Rpc returned the value of secret \"token\"".to_string()]
        );
        assert!(echoes(&secrets, &[("Rpc", "nothing here".into())]).is_empty());
    }
}

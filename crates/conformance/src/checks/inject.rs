//! With `--inject-cmd`: each condition surfaces on the right RPC and clears after recovery
//! (KEP-1432's e2e plan, at the CSI level).

use std::time::Duration;

use super::controller::shared_volume;
use super::{Runner, plain};
use crate::inject::Injector;
use crate::report::{Case, Outcome};
use crate::rules::status_number;
use crate::session::Session;

/// (case, scope, status) of every injection case.
const INJECTIONS: &[(Case, &str, &str)] = &[
    (
        case("inject.controller.inaccessible"),
        "controller",
        "Inaccessible",
    ),
    (
        case("inject.controller.data_loss"),
        "controller",
        "DataLoss",
    ),
    (case("inject.controller.degraded"), "controller", "Degraded"),
    (case("inject.node.inaccessible"), "node", "Inaccessible"),
    (case("inject.node.data_loss"), "node", "DataLoss"),
    (case("inject.node.degraded"), "node", "Degraded"),
    (
        case("inject.storage.storage_unreachable"),
        "storage",
        "StorageUnreachable",
    ),
    (
        case("inject.storage.storage_degraded"),
        "storage",
        "StorageDegraded",
    ),
];

const fn case(name: &'static str) -> Case {
    Case {
        name,
        spec: "KEP-1432 test plan: an abnormal volume or backend condition is reported by the driver and clears after recovery",
        description: "A condition set with --inject-cmd appears on the RPCs of its scope (controller: Get and List; node: NodeGetVolumeHealth; storage: NodeGetStorageHealth) and disappears after clear.",
    }
}

/// The cases of this module.
pub const CASES: &[Case] = &[
    INJECTIONS[0].0,
    INJECTIONS[1].0,
    INJECTIONS[2].0,
    INJECTIONS[3].0,
    INJECTIONS[4].0,
    INJECTIONS[5].0,
    INJECTIONS[6].0,
    INJECTIONS[7].0,
];

/// Runs this module's cases.
pub async fn run(r: &mut Runner<'_>) {
    let (s, injector) = (r.s, r.injector);
    for &(case, scope, status) in INJECTIONS {
        r.case(case, async {
            let Some(inj) = injector else {
                return plain(Outcome::Skip("no --inject-cmd given".into()));
            };
            plain(one(s, inj, scope, status).await)
        })
        .await;
    }
}

async fn one(s: &Session, inj: &Injector, scope: &str, status: &str) -> Outcome {
    let advertised = match scope {
        "controller" => s.caps.get || s.caps.list,
        "node" => s.caps.node_volume,
        _ => s.caps.node_storage,
    };
    if !advertised {
        return Outcome::Skip(format!("no {scope} health RPC is advertised"));
    }
    let target = if scope == "storage" {
        match &s.node_id {
            Some(n) => n.clone(),
            None => return Outcome::Skip("NodeGetInfo gave no node id".into()),
        }
    } else {
        match shared_volume(s, 0).await {
            Ok(id) => id,
            Err(why) => return Outcome::Skip(why.to_string()),
        }
    };
    let reason = format!("Conformance{status}");
    let Some(number) = status_number(status) else {
        return Outcome::Fail(format!("unknown status {status}"));
    };
    s.fixture.injected(scope, &target);
    if let Err(e) = inj.set(scope, &target, status, &reason).await {
        return Outcome::Fail(format!("the inject command failed: {e}"));
    }
    let shown = wait(s, s.inject_timeout, || {
        seen(s, scope, &target, number, &reason, true)
    })
    .await;
    let clear = inj.clear(scope, &target).await;
    if clear.is_ok() {
        s.fixture.cleared(scope, &target);
    }
    if let Err(missing) = shown {
        return Outcome::Fail(format!(
            "injected {scope} {status}/{reason} on {target} must surface within {} s, but {missing}",
            s.inject_timeout.as_secs()
        ));
    }
    if let Err(e) = clear {
        return Outcome::Fail(format!("the inject command failed to clear: {e}"));
    }
    match wait(s, s.inject_timeout, || {
        seen(s, scope, &target, number, &reason, false)
    })
    .await
    {
        Ok(()) => Outcome::Pass,
        Err(still) => Outcome::Fail(format!(
            "a cleared {scope} {status}/{reason} on {target} must disappear within {} s, but {still}",
            s.inject_timeout.as_secs()
        )),
    }
}

/// Polls `check` until it is `Ok` or the time is up; the error is the last check's.
async fn wait<F, Fut, E>(s: &Session, timeout: Duration, mut check: F) -> Result<(), E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
{
    let _ = s;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = check().await;
        if last.is_ok() || tokio::time::Instant::now() >= deadline {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Why an injected condition is not (or still) where it should be; the text ends a finding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Unseen {
    /// The RPC does not report the injected condition.
    #[error("{0} does not report it")]
    Missing(&'static str),
    /// The RPC still reports the cleared condition.
    #[error("{0} still reports it")]
    Still(&'static str),
    /// An RPC failed; its status, described and redacted.
    #[error("{0}")]
    Rpc(String),
}

/// Whether the condition is visible (`want`) or gone (`!want`) on every RPC of the scope.
async fn seen(
    s: &Session,
    scope: &str,
    target: &str,
    number: i32,
    reason: &str,
    want: bool,
) -> Result<(), Unseen> {
    let verdict = |rpc: &'static str, has: bool| -> Result<(), Unseen> {
        match (has, want) {
            (true, true) | (false, false) => Ok(()),
            (false, true) => Err(Unseen::Missing(rpc)),
            (true, false) => Err(Unseen::Still(rpc)),
        }
    };
    let failed = |e: &tonic::Status| Unseen::Rpc(super::describe(s, e));
    let matches = |vh: &volhealth_csi::v1::VolumeHealth| {
        vh.volume_id == target
            && vh
                .health_statuses
                .iter()
                .any(|e| e.status == number && e.reason == reason)
    };
    match scope {
        "controller" => {
            if s.caps.get {
                let vh = s.get(target).await.map_err(|e| failed(&e))?;
                verdict("ControllerGetVolumeHealth", matches(&vh))?;
            }
            if s.caps.list {
                let mut token = String::new();
                let mut has = false;
                for _ in 0..super::MAX_PAGES {
                    let page = s.list_page(0, &token).await.map_err(|e| failed(&e))?;
                    has |= page.entries.iter().any(matches);
                    if page.next_token.is_empty() || page.next_token == token {
                        break;
                    }
                    token = page.next_token;
                }
                verdict("ControllerListVolumeHealth", has)?;
            }
            Ok(())
        }
        "node" => {
            let vh = s.node_get(target, "", "").await.map_err(|e| failed(&e))?;
            verdict("NodeGetVolumeHealth", matches(&vh))
        }
        _ => {
            let b = s.storage().await.map_err(|e| failed(&e))?;
            verdict(
                "NodeGetStorageHealth",
                b.iter().any(|e| e.status == number && e.reason == reason),
            )
        }
    }
}

//! NodeGetVolumeHealth and NodeGetStorageHealth.

use tonic::Code;

use super::{Runner, describe, expect_code, plain, unknown_volume_id};
use crate::report::{Case, Outcome};
use crate::session::Session;
use crate::volumes;

const UNKNOWN: Case = Case {
    name: "node.get.unknown_volume_not_found",
    spec: "CSI v1.13.0 NodeGetVolumeHealth errors: volume does not exist -> NOT_FOUND",
    description: "NodeGetVolumeHealth for a volume id the driver never issued fails with NOT_FOUND.",
};
const EMPTY: Case = Case {
    name: "node.get.empty_volume_id_invalid_argument",
    spec: "CSI v1.13.0 NodeGetVolumeHealthRequest.volume_id: required; missing -> INVALID_ARGUMENT",
    description: "NodeGetVolumeHealth with an empty volume id fails with INVALID_ARGUMENT.",
};
const ATTEMPTED: Case = Case {
    name: "node.get.stage_attempted",
    spec: "KEP-1432 NodeGetVolumeHealth: the kubelet asks about a volume whose NodeStageVolume was attempted, even if it failed; the plugin MUST answer",
    description: "After a NodeStageVolume (or NodePublishVolume) that could not succeed, NodeGetVolumeHealth answers for the volume.",
};
const PUBLISHED: Case = Case {
    name: "node.get.published",
    spec: "CSI v1.13.0 NodeGetVolumeHealthRequest: volume_publish_path and staging_target_path are optional",
    description: "For a staged and published volume, NodeGetVolumeHealth answers with and without the optional paths, for that volume, healthy.",
};
const STORAGE: Case = Case {
    name: "node.storage.answers",
    spec: "CSI v1.13.0 NodeGetStorageHealth: an empty backend_health list means the backend is healthy",
    description: "NodeGetStorageHealth answers (its entries are checked by storage.entries_valid).",
};

/// The cases of this module.
pub const CASES: &[Case] = &[UNKNOWN, EMPTY, ATTEMPTED, PUBLISHED, STORAGE];

const NO_NODE_VOLUME: &str = "node GET_VOLUME_HEALTH is not advertised";

/// Runs this module's cases.
pub async fn run(r: &mut Runner<'_>) {
    let s = r.s;
    r.case(UNKNOWN, async {
        if !s.caps.node_volume {
            return plain(Outcome::Skip(NO_NODE_VOLUME.into()));
        }
        plain(expect_code(
            s,
            s.node_get(&unknown_volume_id(s), "", "").await,
            Code::NotFound,
            "unknown volume id must be NOT_FOUND",
        ))
    })
    .await;
    r.case(EMPTY, async {
        if !s.caps.node_volume {
            return plain(Outcome::Skip(NO_NODE_VOLUME.into()));
        }
        plain(expect_code(
            s,
            s.node_get("", "", "").await,
            Code::InvalidArgument,
            "empty volume id must be INVALID_ARGUMENT",
        ))
    })
    .await;
    r.case(ATTEMPTED, attempted(s)).await;
    r.case(PUBLISHED, published(s)).await;
    r.case(STORAGE, async {
        if !s.caps.node_storage {
            return plain(Outcome::Skip(
                "node GET_STORAGE_HEALTH is not advertised".into(),
            ));
        }
        plain(match s.storage().await {
            Ok(_) => Outcome::Pass,
            Err(e) => Outcome::Fail(format!("NodeGetStorageHealth failed: {}", describe(s, &e))),
        })
    })
    .await;
}

/// A volume for a node case, or the skip reason.
async fn volume(s: &Session, label: &str) -> Result<String, Outcome> {
    if !s.caps.node_volume {
        return Err(Outcome::Skip(NO_NODE_VOLUME.into()));
    }
    if !s.caps.create_delete {
        return Err(Outcome::Skip(
            "the controller does not advertise CREATE_DELETE_VOLUME, so the suite cannot create test volumes".into(),
        ));
    }
    volumes::create_volume(s, label)
        .await
        .map_err(|e| Outcome::Skip(format!("CreateVolume failed: {}", describe(s, &e))))
}

async fn attempted(s: &Session) -> (Outcome, Vec<String>) {
    let id = match volume(s, "attempted").await {
        Ok(id) => id,
        Err(o) => return plain(o),
    };
    // The path's parent is a regular file, so no plugin can stage or publish there.
    let blocker = s.fixture.path("not-a-directory");
    if let Err(e) = std::fs::write(&blocker, b"") {
        return plain(Outcome::Skip(format!(
            "creating {}: {e}",
            blocker.display()
        )));
    }
    let path = blocker.join("staging");
    let (publish_path, staging_path) = if s.caps.stage_unstage {
        let _ = volumes::stage(s, &id, &path).await;
        (String::new(), path.display().to_string())
    } else {
        let _ = volumes::publish(s, &id, None, &path).await;
        (path.display().to_string(), String::new())
    };
    plain(match s.node_get(&id, &publish_path, &staging_path).await {
        Ok(vh) if vh.volume_id == id => Outcome::Pass,
        Ok(vh) => Outcome::Fail(format!(
            "NodeGetVolumeHealth must answer for the volume asked about: asked for {id:?}, got {:?}",
            vh.volume_id
        )),
        Err(e) => Outcome::Fail(format!(
            "NodeGetVolumeHealth must answer for a volume whose stage was attempted: got {}",
            describe(s, &e)
        )),
    })
}

async fn published(s: &Session) -> (Outcome, Vec<String>) {
    let id = match volume(s, "published").await {
        Ok(id) => id,
        Err(o) => return plain(o),
    };
    let staging = s.fixture.path("published-staging");
    let target = s.fixture.path("published").join("target");
    if let Err(e) = std::fs::create_dir_all(&staging) {
        return plain(Outcome::Skip(format!(
            "creating {}: {e}",
            staging.display()
        )));
    }
    if let Err(e) = volumes::stage(s, &id, &staging).await {
        return plain(Outcome::Skip(format!(
            "NodeStageVolume failed: {}",
            describe(s, &e)
        )));
    }
    let staged = s.caps.stage_unstage.then_some(staging.as_path());
    if let Err(e) = volumes::publish(s, &id, staged, &target).await {
        return plain(Outcome::Skip(format!(
            "NodePublishVolume failed: {}",
            describe(s, &e)
        )));
    }
    let staging_s = staged.map(|p| p.display().to_string()).unwrap_or_default();
    let mut problems = Vec::new();
    for (what, publish_path, staging_path) in [
        ("with both paths", target.display().to_string(), staging_s),
        ("with the volume id only", String::new(), String::new()),
    ] {
        match s.node_get(&id, &publish_path, &staging_path).await {
            Ok(vh) if vh.volume_id != id => problems.push(format!(
                "{what}: answered for {:?} instead of {id:?}",
                vh.volume_id
            )),
            Ok(vh) if !vh.health_statuses.is_empty() => problems.push(format!(
                "{what}: a freshly published volume reported {} condition(s); empty means healthy",
                vh.health_statuses.len()
            )),
            Ok(_) => {}
            Err(e) => problems.push(format!("{what}: {}", describe(s, &e))),
        }
    }
    plain(super::from_problems(
        "NodeGetVolumeHealth must answer for a published volume, the paths being optional",
        problems,
    ))
}

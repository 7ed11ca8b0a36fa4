//! Identity, capabilities, and ControllerGetVolumeHealth.

use tonic::Code;

use super::{Runner, describe, expect_code, plain, unknown_volume_id};
use crate::report::{Case, Outcome};
use crate::session::Session;
use crate::volumes;

const PLUGIN_INFO: Case = Case {
    name: "identity.plugin_info",
    spec: "CSI v1.13.0 GetPluginInfo: name MUST be provided",
    description: "GetPluginInfo answers with a non-empty driver name.",
};
const LIST_IMPLIES_GET: Case = Case {
    name: "capabilities.list_implies_get",
    spec: "CSI v1.13.0 ControllerServiceCapability.RPC LIST_VOLUME_HEALTH: a plugin that supports it MUST also support GET_VOLUME_HEALTH",
    description: "A controller advertising LIST_VOLUME_HEALTH also advertises GET_VOLUME_HEALTH.",
};
const ADVERTISED: Case = Case {
    name: "capabilities.advertised_rpcs_answer",
    spec: "CSI v1.13.0 capabilities: an advertised RPC MUST be implemented",
    description: "No advertised health RPC answers UNIMPLEMENTED.",
};
const GET_UNKNOWN: Case = Case {
    name: "controller.get.unknown_volume_not_found",
    spec: "CSI v1.13.0 ControllerGetVolumeHealth errors: volume does not exist -> NOT_FOUND",
    description: "ControllerGetVolumeHealth for a volume id the driver never issued fails with NOT_FOUND.",
};
const GET_EMPTY: Case = Case {
    name: "controller.get.empty_volume_id_invalid_argument",
    spec: "CSI v1.13.0 ControllerGetVolumeHealthRequest.volume_id: required; missing -> INVALID_ARGUMENT",
    description: "ControllerGetVolumeHealth with an empty volume id fails with INVALID_ARGUMENT.",
};
const GET_HEALTHY: Case = Case {
    name: "controller.get.healthy_volume_empty",
    spec: "CSI v1.13.0 VolumeHealth.health_statuses: empty means healthy",
    description: "A freshly created volume is reported for its own id with no health entries.",
};

/// The cases of this module.
pub const CASES: &[Case] = &[
    PLUGIN_INFO,
    LIST_IMPLIES_GET,
    ADVERTISED,
    GET_UNKNOWN,
    GET_EMPTY,
    GET_HEALTHY,
];

/// Runs this module's cases; creates the run's shared volumes on the way.
pub async fn run(r: &mut Runner<'_>) {
    let s = r.s;
    r.case(PLUGIN_INFO, async {
        plain(match s.plugin_info().await {
            Ok(i) if i.name.is_empty() => {
                Outcome::Fail("GetPluginInfo returned an empty name".into())
            }
            Ok(_) => Outcome::Pass,
            Err(e) => Outcome::Fail(format!("GetPluginInfo failed: {}", describe(s, &e))),
        })
    })
    .await;
    r.case(LIST_IMPLIES_GET, async {
        plain(match (s.caps.list, s.caps.get) {
            (false, _) => Outcome::Skip("LIST_VOLUME_HEALTH is not advertised".into()),
            (true, true) => Outcome::Pass,
            (true, false) => Outcome::Fail(
                "LIST_VOLUME_HEALTH without GET_VOLUME_HEALTH: a plugin that supports LIST_VOLUME_HEALTH MUST also support GET_VOLUME_HEALTH".into(),
            ),
        })
    })
    .await;
    r.case(ADVERTISED, advertised(s)).await;
    r.case(GET_UNKNOWN, async {
        if !s.caps.get {
            return plain(Outcome::Skip(
                "controller GET_VOLUME_HEALTH is not advertised".into(),
            ));
        }
        plain(expect_code(
            s,
            s.get(&unknown_volume_id(s)).await,
            Code::NotFound,
            "unknown volume id must be NOT_FOUND",
        ))
    })
    .await;
    r.case(GET_EMPTY, async {
        if !s.caps.get {
            return plain(Outcome::Skip(
                "controller GET_VOLUME_HEALTH is not advertised".into(),
            ));
        }
        plain(expect_code(
            s,
            s.get("").await,
            Code::InvalidArgument,
            "empty volume id must be INVALID_ARGUMENT",
        ))
    })
    .await;
    r.case(GET_HEALTHY, healthy(s)).await;
}

async fn advertised(s: &Session) -> (Outcome, Vec<String>) {
    let mut problems = Vec::new();
    let id = unknown_volume_id(s);
    let unimplemented = |name: &str, r: Result<(), tonic::Status>| match r {
        Err(e) if e.code() == Code::Unimplemented => {
            Some(format!("{name} is advertised but answers UNIMPLEMENTED"))
        }
        _ => None,
    };
    if s.caps.get {
        problems.extend(unimplemented(
            "ControllerGetVolumeHealth",
            s.get(&id).await.map(drop),
        ));
    }
    if s.caps.list {
        problems.extend(unimplemented(
            "ControllerListVolumeHealth",
            s.list_page(0, "").await.map(drop),
        ));
    }
    if s.caps.node_volume {
        problems.extend(unimplemented(
            "NodeGetVolumeHealth",
            s.node_get(&id, "", "").await.map(drop),
        ));
    }
    if s.caps.node_storage {
        problems.extend(unimplemented(
            "NodeGetStorageHealth",
            s.storage().await.map(drop),
        ));
    }
    if !(s.caps.get || s.caps.list || s.caps.node_volume || s.caps.node_storage) {
        return plain(Outcome::Skip("no health capability is advertised".into()));
    }
    plain(super::from_problems(
        "advertised RPC not implemented",
        problems,
    ))
}

async fn healthy(s: &Session) -> (Outcome, Vec<String>) {
    if !s.caps.get {
        return plain(Outcome::Skip(
            "controller GET_VOLUME_HEALTH is not advertised".into(),
        ));
    }
    let id = match shared_volume(s, 0).await {
        Ok(id) => id,
        Err(why) if s.caps.create_delete => return plain(Outcome::Fail(why.to_string())),
        Err(why) => return plain(Outcome::Skip(why.to_string())),
    };
    plain(match s.get(&id).await {
        Ok(vh) if vh.volume_id != id => Outcome::Fail(format!(
            "ControllerGetVolumeHealth must answer for the volume asked about: asked for {id:?}, got {:?}",
            vh.volume_id
        )),
        Ok(vh) if !vh.health_statuses.is_empty() => Outcome::Fail(format!(
            "a healthy volume must have an empty health_statuses list, got {} entr(ies) for a freshly created volume",
            vh.health_statuses.len()
        )),
        Ok(_) => Outcome::Pass,
        Err(e) => Outcome::Fail(format!(
            "ControllerGetVolumeHealth of a volume this run created failed: {}",
            describe(s, &e)
        )),
    })
}

/// Why the run has no shared volume to test with; the text is the finding's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoVolume {
    /// The controller cannot create volumes.
    #[error(
        "the controller does not advertise CREATE_DELETE_VOLUME, so the suite cannot create test volumes"
    )]
    CannotCreate,
    /// CreateVolume failed; the driver's status, described and redacted.
    #[error("CreateVolume of a test volume failed: {0}")]
    CreateFailed(String),
    /// The fixture lost it.
    #[error("the test volume disappeared from the fixture")]
    Disappeared,
}

/// The n-th of the run's shared volumes (created on first use). The error says why there is
/// none: no CREATE_DELETE_VOLUME, or CreateVolume failed.
pub async fn shared_volume(s: &Session, n: usize) -> Result<String, NoVolume> {
    if !s.caps.create_delete {
        return Err(NoVolume::CannotCreate);
    }
    while s.fixture.volume_ids().len() <= n {
        let label = format!("shared{}", s.fixture.volume_ids().len());
        if let Err(e) = volumes::create_volume(s, &label).await {
            return Err(NoVolume::CreateFailed(describe(s, &e)));
        }
    }
    s.fixture
        .volume_ids()
        .get(n)
        .cloned()
        .ok_or(NoVolume::Disappeared)
}

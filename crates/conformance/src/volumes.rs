//! The suite's own volumes, through the driver: create, stage, publish into the fixture's
//! temporary paths, and clean up exactly what the fixture recorded.

use std::collections::HashMap;
use std::path::Path;

use tonic::Status;
use volhealth_csi::v1;

use volhealth_csi::node_requests::{self, mount_capability};

use crate::fixture::Created;
use crate::inject::Injector;
use crate::session::Session;

/// Creates a volume named `conformance-<run>-<label>`; returns its id.
pub async fn create_volume(s: &Session, label: &str) -> Result<String, Status> {
    let name = format!("volhealth-conformance-{}-{label}", s.fixture.run_id());
    s.fixture.with(|v| {
        v.push(Created {
            name: name.clone(),
            ..Created::default()
        })
    });
    let volume = create_call(s, &name).await?;
    let id = volume.volume_id.clone();
    if id.is_empty() {
        return Err(Status::internal("CreateVolume returned an empty volume_id"));
    }
    s.fixture.update(&name, |c| {
        c.volume_id = Some(id.clone());
        c.context = volume.volume_context.clone();
    });
    Ok(id)
}

async fn create_call(s: &Session, name: &str) -> Result<v1::Volume, Status> {
    let mut c = s.controller_client();
    let req = v1::CreateVolumeRequest {
        name: name.to_string(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: 16 << 20,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_capability()],
        secrets: s.secrets.clone(),
        ..Default::default()
    };
    let resp = s.call("CreateVolume", c.create_volume(req)).await?;
    resp.volume
        .ok_or_else(|| Status::internal("CreateVolume returned no volume"))
}

/// ControllerPublishVolume when the driver needs it, then NodeStageVolume into `staging`
/// (when the node stages). The attempt is recorded first, so a failed stage is undone too.
pub async fn stage(s: &Session, volume_id: &str, staging: &Path) -> Result<(), Status> {
    let name = name_of(s, volume_id);
    let publish_context = controller_publish(s, volume_id, &name).await?;
    if !s.caps.stage_unstage {
        return Ok(());
    }
    s.fixture
        .update(&name, |c| c.staged = Some(staging.to_path_buf()));
    let context = s.fixture.with(|v| {
        v.iter()
            .find(|c| c.name == name)
            .map(|c| c.context.clone())
            .unwrap_or_default()
    });
    let mut n = s.node_client();
    let req = v1::NodeStageVolumeRequest {
        publish_context,
        secrets: s.secrets.clone(),
        volume_context: context,
        ..node_requests::stage(volume_id, staging)
    };
    s.call("NodeStageVolume", n.node_stage_volume(req)).await?;
    Ok(())
}

/// NodePublishVolume into `target` (its parent is created; the plugin creates `target`).
pub async fn publish(
    s: &Session,
    volume_id: &str,
    staging: Option<&Path>,
    target: &Path,
) -> Result<(), Status> {
    let name = name_of(s, volume_id);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Status::internal(format!("creating {}: {e}", parent.display())))?;
    }
    s.fixture
        .update(&name, |c| c.published = Some(target.to_path_buf()));
    let (context, publish_context) = s.fixture.with(|v| {
        v.iter()
            .find(|c| c.name == name)
            .map(|c| {
                (
                    c.context.clone(),
                    c.publish_context.clone().unwrap_or_default(),
                )
            })
            .unwrap_or_default()
    });
    let mut n = s.node_client();
    let req = v1::NodePublishVolumeRequest {
        publish_context,
        secrets: s.secrets.clone(),
        volume_context: context,
        ..node_requests::publish(volume_id, staging.unwrap_or(Path::new("")), target)
    };
    s.call("NodePublishVolume", n.node_publish_volume(req))
        .await?;
    Ok(())
}

fn name_of(s: &Session, volume_id: &str) -> String {
    s.fixture.with(|v| {
        v.iter()
            .find(|c| c.volume_id.as_deref() == Some(volume_id))
            .map(|c| c.name.clone())
            .unwrap_or_default()
    })
}

async fn controller_publish(
    s: &Session,
    volume_id: &str,
    name: &str,
) -> Result<HashMap<String, String>, Status> {
    let (Some(node_id), true) = (s.node_id.clone(), s.caps.controller_publish) else {
        return Ok(HashMap::new());
    };
    s.fixture
        .update(name, |c| c.publish_context = Some(HashMap::new()));
    let mut c = s.controller_client();
    let req = v1::ControllerPublishVolumeRequest {
        volume_id: volume_id.to_string(),
        node_id,
        volume_capability: Some(mount_capability()),
        readonly: false,
        secrets: s.secrets.clone(),
        ..Default::default()
    };
    let resp = s
        .call("ControllerPublishVolume", c.controller_publish_volume(req))
        .await?;
    s.fixture.update(name, |c| {
        c.publish_context = Some(resp.publish_context.clone())
    });
    Ok(resp.publish_context)
}

/// Undoes everything the run created, newest first: injections, publishes, stages, controller
/// publishes, volumes. Returns what could not be undone.
pub async fn cleanup(s: &Session, injector: Option<&Injector>) -> Vec<String> {
    let mut problems = Vec::new();
    let injections = s.fixture.injections();
    if let Some(inj) = injector {
        for (scope, target) in injections {
            if let Err(e) = inj.clear(&scope, &target).await {
                problems.push(format!("clearing the {scope} injection on {target}: {e}"));
            }
        }
    }
    let volumes = s.fixture.with(std::mem::take);
    for c in volumes.into_iter().rev() {
        let id = match &c.volume_id {
            Some(id) => id.clone(),
            // Interrupted inside CreateVolume: ask again by name (idempotent) to learn the id.
            None => match create_call(s, &c.name).await {
                Ok(v) => v.volume_id,
                Err(e) => {
                    problems.push(format!(
                        "finding volume {:?} to delete it: {}",
                        c.name,
                        e.message()
                    ));
                    continue;
                }
            },
        };
        let mut n = s.node_client();
        if let Some(target) = &c.published {
            let req = node_requests::unpublish(&id, target);
            if let Err(e) = s
                .call("NodeUnpublishVolume", n.node_unpublish_volume(req))
                .await
            {
                problems.push(format!("NodeUnpublishVolume {id}: {}", e.message()));
            }
        }
        if let Some(staging) = &c.staged {
            let req = node_requests::unstage(&id, staging);
            if let Err(e) = s
                .call("NodeUnstageVolume", n.node_unstage_volume(req))
                .await
            {
                problems.push(format!("NodeUnstageVolume {id}: {}", e.message()));
            }
        }
        let mut ctl = s.controller_client();
        if c.publish_context.is_some() {
            let req = v1::ControllerUnpublishVolumeRequest {
                volume_id: id.clone(),
                node_id: s.node_id.clone().unwrap_or_default(),
                secrets: s.secrets.clone(),
            };
            if let Err(e) = s
                .call(
                    "ControllerUnpublishVolume",
                    ctl.controller_unpublish_volume(req),
                )
                .await
            {
                problems.push(format!("ControllerUnpublishVolume {id}: {}", e.message()));
            }
        }
        let req = v1::DeleteVolumeRequest {
            volume_id: id.clone(),
            secrets: s.secrets.clone(),
        };
        if let Err(e) = s.call("DeleteVolume", ctl.delete_volume(req)).await {
            problems.push(format!("DeleteVolume {id}: {}", e.message()));
        }
    }
    problems
}

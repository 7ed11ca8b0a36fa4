//! The reference driver as `up` runs it: its controller plugin and one node plugin per node.

use super::UpConfig;
use super::layout::Layout;
use super::{Progress, Running, node_faults, until_ready};
use crate::failure::Result;
use std::time::Duration;

/// Starts the reference driver's controller plugin and one node plugin per node; returns the
/// controller's endpoint.
pub(super) async fn start_reference_driver(
    layout: &Layout,
    nodes: &[String],
    cfg: &UpConfig,
    running: &mut Running,
) -> Result<String> {
    let health_api: &[&str] = if cfg.legacy_driver {
        &["--health-api", "legacy"]
    } else {
        &[]
    };
    let (controller_extra, node_extra, mounts): (&[&str], &[&str], _) = if cfg.node_faults {
        (node_faults::CONTROLLER_ARGS, node_faults::NODE_ARGS, true)
    } else {
        (&[], &[], false)
    };
    let low_space = cfg.low_space_fraction.map(|f| f.to_string());
    let low_space: Vec<&str> = match &low_space {
        Some(f) => vec!["--low-space-fraction", f],
        None => Vec::new(),
    };
    let controller_extra = [controller_extra, &low_space].concat();
    let node_extra = [node_extra, &low_space].concat();
    let p = Progress;
    p.step("starting the driver's controller plugin");
    let controller = layout.controller_endpoint();
    running.start(
        "driver-controller",
        layout,
        layout.controller_plugin_args(&[health_api, &controller_extra].concat()),
    )?;
    until_ready(running, "the controller plugin", async || {
        volhealth_csi::client::connect(&controller, Duration::from_millis(200))
            .await
            .ok()
    })
    .await?;
    p.done("ok");

    p.step(&format!("starting {} node plugin(s)", nodes.len()));
    for node in nodes {
        let endpoint = layout.node_endpoint(node);
        // Every component shares this one machine: only call I/O slow past 2 s, so a busy
        // laptop does not show SlowIo on every volume.
        let mut plugin = layout.node_plugin_args(
            node,
            &[&["--io-probe-slow-ms", "2000"], health_api, &node_extra].concat(),
        );
        if mounts {
            plugin.retain(|a| a != "--no-mounts");
            running.unmount_under = node_faults::kubelet_roots(layout, nodes);
        }
        running.start(&format!("driver-{node}"), layout, plugin)?;
        until_ready(running, &format!("the node plugin of {node}"), async || {
            volhealth_csi::client::connect(&endpoint, Duration::from_millis(200))
                .await
                .ok()
        })
        .await?;
    }
    p.done("ok");
    Ok(controller)
}

//! The agent with node fault detection, against the embedded API server and the reference
//! driver, over ext4 on a real loop device (root): a publish path that is unmounted under a
//! running pod reaches the pod's status as Inaccessible/NotMounted beside whatever the driver
//! says, a filesystem remounted read-only as Inaccessible/FilesystemReadOnly, an ext4 error the
//! kernel logs for the volume's device as Degraded/IoErrors, and each clears when its evidence
//! is gone. For a driver that reports no health at all, the detector alone answers: a FUSE
//! mount that stops answering reaches the pod as Inaccessible/MountUnresponsive, and an NFS
//! server the kernel logs as not responding reaches the node's CSINode as
//! StorageUnreachable/NfsServerNotResponding; both clear. Without root or the tools the tests
//! print why they skip, unless `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::Api;
use std::path::{Path, PathBuf};
use std::time::Duration;
use volhealth_agent::{KubeletRoot, NodeFaultMode};
use volhealth_driver::HealthCapabilities;
use volhealth_testkit::kernel_faults::fault_fs::{Mode, Mounted};
use volhealth_testkit::kernel_faults::{
    attach_and_mount, bind, can_run, inject_kmsg, is_mounted, make_ext4_image, run,
};
use volhealth_testkit::{NodeWorld, Service, run_agent, storage_conditions, wait_for};

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
    nodetok,system:node:node-a,2,\"system:nodes\"\n";
const WAIT: Duration = Duration::from_secs(40);

async fn reasons(pods: &Api<Pod>, pod: &str) -> Vec<(String, String)> {
    let p = pods.get(pod).await.expect("get the pod");
    p.status
        .and_then(|s| s.volume_health)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|e| e.health_conditions.unwrap_or_default())
        .map(|c| (c.status, c.reason))
        .collect()
}

/// Waits until pod `web`'s status holds the condition (`status`, `reason`).
async fn wait_shown(pods: &Api<Pod>, status: &str, reason: &str) {
    let condition = (status.to_string(), reason.to_string());
    wait_for(WAIT, &format!("{reason} on the pod's status"), || async {
        reasons(pods, "web")
            .await
            .contains(&condition)
            .then_some(())
    })
    .await;
}

/// Waits until pod `web`'s status no longer holds the condition (`status`, `reason`).
async fn wait_cleared(pods: &Api<Pod>, status: &str, reason: &str) {
    let condition = (status.to_string(), reason.to_string());
    wait_for(WAIT, &format!("{reason} to clear"), || async {
        (!reasons(pods, "web").await.contains(&condition)).then_some(())
    })
    .await;
}

/// Waits until the node's CSINode lists the driver.
async fn wait_driver_on_csinode(w: &NodeWorld) {
    wait_for(WAIT, "the driver on the CSINode", || async {
        let csinode = Api::<CSINode>::all(w.admin.clone()).get(NODE).await.ok()?;
        csinode
            .spec
            .drivers
            .iter()
            .any(|d| d.name == DRIVER)
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_faults_and_kernel_io_errors_reach_the_pod_and_clear() {
    if !can_run(
        "node fault detection in the agent",
        &["mkfs.ext4", "losetup"],
        &["/dev/kmsg"],
    ) {
        return;
    }
    let w = NodeWorld::start(DRIVER, NODE, TOKENS, None, KubeletRoot::volume_dirs).await;
    let pods: Api<Pod> = Api::namespaced(w.admin.clone(), "default");
    let pod = pods.get("web").await.unwrap();
    let uid = pod.metadata.uid.unwrap();
    let (stage, publish) = KubeletRoot::volume_dirs(&w.root, DRIVER, &w.volume, &uid, "pv-web");
    let (staging, target) = (stage.join("globalmount"), publish.join("mount"));
    // The test world's driver links its paths; mount them as a real block driver would: ext4
    // on a loop device at the staging path, bound to the publish path.
    let image = w.dir.path().join("volume.img");
    make_ext4_image(&image);
    let (device, staging, target) = attach_and_mount(&image, staging, target);
    assert!(is_mounted(&target));

    // The reference driver has node health of its own: `always` adds the detector beside it.
    let agent = start_agent(&w, NodeFaultMode::Always, None);

    nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH).unwrap();
    wait_shown(&pods, "Inaccessible", "NotMounted").await;

    bind(&staging, &target);
    wait_cleared(&pods, "Inaccessible", "NotMounted").await;

    // The filesystem goes read-only under the read-write publish mount.
    run("mount", &["-o", "remount,ro", staging.to_str().unwrap()]);
    wait_shown(&pods, "Inaccessible", "FilesystemReadOnly").await;
    run("mount", &["-o", "remount,rw", staging.to_str().unwrap()]);
    wait_cleared(&pods, "Inaccessible", "FilesystemReadOnly").await;

    // The kernel logs an ext4 error for the volume's device (written to /dev/kmsg in the
    // kernel's own format): IoErrors quoting the line, until the window passes without another.
    let name = Path::new(&device)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    inject_kmsg(&format!(
        "EXT4-fs error (device {name}): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0"
    ));
    wait_shown(&pods, "Degraded", "IoErrors").await;
    wait_cleared(&pods, "Degraded", "IoErrors").await;

    agent.stop().expect("the agent stops cleanly");
    let _ = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH);
    let _ = nix::mount::umount2(&staging, nix::mount::MntFlags::MNT_DETACH);
    let _ = std::process::Command::new("losetup")
        .args(["-d", &device])
        .output();
    w.stop([]);
}

/// The agent for the world's driver with node fault detection in `mode`, cycling every second,
/// reading `mountinfo` when given (else the host's).
fn start_agent(w: &NodeWorld, mode: NodeFaultMode, mountinfo: Option<PathBuf>) -> Service {
    let mut config = w.agent_config("nodetok", None);
    config.node_faults = mode;
    config.probe_timeout = Duration::from_secs(2);
    config.io_error_window = Duration::from_secs(3);
    if let Some(table) = mountinfo {
        config.mountinfo = vec![table];
    }
    run_agent("agent", config)
}

/// A world whose driver advertises no health capability at all, as most drivers today: only
/// the node fault detector can say anything about its volumes.
async fn silent_driver_world() -> NodeWorld {
    NodeWorld::start_configured(DRIVER, NODE, TOKENS, None, KubeletRoot::volume_dirs, |c| {
        c.health = HealthCapabilities::NONE;
    })
    .await
}

/// The world's pod's publish path (`…/volumes/kubernetes.io~csi/pv-web/mount`), emptied of the
/// link the test driver made there, as a directory.
async fn publish_path(w: &NodeWorld) -> PathBuf {
    let pods: Api<Pod> = Api::namespaced(w.admin.clone(), "default");
    let uid = pods.get("web").await.unwrap().metadata.uid.unwrap();
    let (_, publish) = KubeletRoot::volume_dirs(&w.root, DRIVER, &w.volume, &uid, "pv-web");
    let target = publish.join("mount");
    let _ = std::fs::remove_file(&target);
    std::fs::create_dir_all(&target).unwrap();
    target
}

/// (status, reason) of the storage conditions the node's CSINode holds for the driver.
async fn storage_reasons(w: &NodeWorld) -> Vec<(String, String)> {
    storage_conditions(&w.admin, NODE, DRIVER).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_mount_of_a_silent_driver_reaches_the_pod_and_clears() {
    if !can_run("a hung mount in the agent", &[], &["/dev/fuse"]) {
        return;
    }
    let w = silent_driver_world().await;
    let pods: Api<Pod> = Api::namespaced(w.admin.clone(), "default");
    let target = publish_path(&w).await;
    // A FUSE filesystem at the publish path, answering for now.
    let fuse = Mounted::mount(&target, vec![0; 4096]);
    let agent = start_agent(&w, NodeFaultMode::Auto, None);
    // The detector looked and found nothing: no condition, and the CSINode lists the driver.
    wait_driver_on_csinode(&w).await;
    assert!(reasons(&pods, "web").await.is_empty());

    // Every call into the mount now blocks: the probe times out, the cycle goes on.
    fuse.switch.set(Mode::Hang);
    wait_shown(&pods, "Inaccessible", "MountUnresponsive").await;
    fuse.switch.set(Mode::Healthy);
    wait_for(WAIT, "MountUnresponsive to clear", || async {
        reasons(&pods, "web").await.is_empty().then_some(())
    })
    .await;

    agent.stop().expect("the agent stops cleanly");
    drop(fuse);
    w.stop([]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nfs_server_the_kernel_gives_up_on_reaches_the_csinode_and_clears() {
    if !can_run("an NFS outage in the agent", &[], &["/dev/kmsg"]) {
        return;
    }
    let w = silent_driver_world().await;
    let target = publish_path(&w).await;
    // An NFS mount cannot be made here: the agent reads a mount table that lists the pod's
    // publish path (a real directory, so its probes answer) as an NFS 4.1 export.
    let server = "10.251.44.9";
    let table = w.dir.path().join("mountinfo");
    std::fs::write(
        &table,
        format!(
            "41 1 0:78 / {} rw,relatime shared:9 - nfs4 {server}:/exports/web rw,vers=4.1,addr={server}\n",
            target.display()
        ),
    )
    .unwrap();
    let agent = start_agent(&w, NodeFaultMode::Auto, Some(table));
    // The pod's volume is looked at first (no finding), so the storage answer is a real one.
    wait_driver_on_csinode(&w).await;

    inject_kmsg(&format!(
        "nfs: server {server} not responding, still trying"
    ));
    let unreachable = (
        "StorageUnreachable".to_string(),
        "NfsServerNotResponding".to_string(),
    );
    wait_for(WAIT, "NfsServerNotResponding on the CSINode", || async {
        storage_reasons(&w)
            .await
            .contains(&unreachable)
            .then_some(())
    })
    .await;
    inject_kmsg(&format!("nfs: server {server} OK"));
    wait_for(WAIT, "NfsServerNotResponding to clear", || async {
        storage_reasons(&w).await.is_empty().then_some(())
    })
    .await;

    w.stop([agent]);
}

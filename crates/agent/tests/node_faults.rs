//! The agent with node fault detection, against the embedded API server and the reference
//! driver, over ext4 on a real loop device (root): a publish path that is unmounted under a
//! running pod reaches the pod's status as Inaccessible/NotMounted beside whatever the driver
//! says, a filesystem remounted read-only as Inaccessible/FilesystemReadOnly, an ext4 error the
//! kernel logs for the volume's device as Degraded/IoErrors, and each clears when its evidence
//! is gone. Without root or the tools the test prints why it skips, unless
//! `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use std::path::Path;
use std::time::Duration;
use volhealth_agent::{AgentConfig, KubeletRoot, NodeFaultMode, StaticDriver};
use volhealth_testkit::{NodeWorld, Service, wait_for};

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
    nodetok,system:node:node-a,2,\"system:nodes\"\n";
const WAIT: Duration = Duration::from_secs(40);

/// Root and the tools to make an ext4 volume on a loop device; else prints why the test skips
/// (or fails under `VOLHEALTH_REQUIRE_TOOLS=1`).
fn can_run() -> bool {
    let mut missing: Vec<&str> = ["mkfs.ext4", "losetup"]
        .into_iter()
        .filter(|tool| {
            std::process::Command::new(tool)
                .arg("--version")
                .output()
                .is_err()
        })
        .collect();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root");
    }
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "the node fault test needs {missing:?} (VOLHEALTH_REQUIRE_TOOLS=1)"
    );
    println!("SKIPPED node fault detection in the agent: needs {missing:?}");
    false
}

/// Runs a command; panics with its error output when it fails.
fn run(cmd: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

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

fn is_mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = path.to_str().unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(want))
}

fn bind(from: &Path, to: &Path) {
    nix::mount::mount(
        Some(from),
        to,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_faults_and_kernel_io_errors_reach_the_pod_and_clear() {
    if !can_run() {
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
    std::fs::File::create(&image)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    run("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()]);
    let device = run("losetup", &["-f", "--show", image.to_str().unwrap()]);
    for to in [&staging, &target] {
        let _ = std::fs::remove_file(to);
        std::fs::create_dir_all(to).unwrap();
    }
    run("mount", &["-t", "ext4", &device, staging.to_str().unwrap()]);
    bind(&staging, &target);
    assert!(is_mounted(&target));

    let mut config = AgentConfig::new(NODE);
    config.kubeconfig = Some(w.api.token_kubeconfig(w.dir.path(), "node", "nodetok"));
    config.kubelet_root_dir = w.root.clone();
    config.drivers = vec![StaticDriver {
        name: DRIVER.to_string(),
        endpoint: w.driver.endpoint.clone(),
    }];
    config.interval = Duration::from_secs(1);
    config.timeout = Duration::from_secs(5);
    config.http_endpoint = None;
    // The reference driver has node health of its own: `always` adds the detector beside it.
    config.node_faults = NodeFaultMode::Always;
    config.probe_timeout = Duration::from_secs(2);
    config.io_error_window = Duration::from_secs(3);
    let agent = Service::start("agent", move |shutdown| async move {
        volhealth_agent::run(config, shutdown)
            .await
            .map_err(|e| e.to_string())
    });

    nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH).unwrap();
    let not_mounted = ("Inaccessible".to_string(), "NotMounted".to_string());
    wait_for(WAIT, "NotMounted on the pod's status", || async {
        reasons(&pods, "web")
            .await
            .contains(&not_mounted)
            .then_some(())
    })
    .await;

    bind(&staging, &target);
    wait_for(WAIT, "NotMounted to clear", || async {
        (!reasons(&pods, "web").await.contains(&not_mounted)).then_some(())
    })
    .await;

    // The filesystem goes read-only under the read-write publish mount.
    let read_only = ("Inaccessible".to_string(), "FilesystemReadOnly".to_string());
    run("mount", &["-o", "remount,ro", staging.to_str().unwrap()]);
    wait_for(WAIT, "FilesystemReadOnly on the pod's status", || async {
        reasons(&pods, "web")
            .await
            .contains(&read_only)
            .then_some(())
    })
    .await;
    run("mount", &["-o", "remount,rw", staging.to_str().unwrap()]);
    wait_for(WAIT, "FilesystemReadOnly to clear", || async {
        (!reasons(&pods, "web").await.contains(&read_only)).then_some(())
    })
    .await;

    // The kernel logs an ext4 error for the volume's device (written to /dev/kmsg in the
    // kernel's own format): IoErrors quoting the line, until the window passes without another.
    let name = Path::new(&device)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let line = format!(
        "<3>EXT4-fs error (device {name}): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0\n"
    );
    std::fs::write("/dev/kmsg", line).unwrap();
    let io_errors = ("Degraded".to_string(), "IoErrors".to_string());
    wait_for(WAIT, "IoErrors on the pod's status", || async {
        reasons(&pods, "web")
            .await
            .contains(&io_errors)
            .then_some(())
    })
    .await;
    wait_for(WAIT, "IoErrors to clear once the window passed", || async {
        (!reasons(&pods, "web").await.contains(&io_errors)).then_some(())
    })
    .await;

    agent.stop().expect("the agent stops cleanly");
    let _ = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH);
    let _ = nix::mount::umount2(&staging, nix::mount::MntFlags::MNT_DETACH);
    let _ = std::process::Command::new("losetup")
        .args(["-d", &device])
        .output();
    w.driver.stop().expect("the driver stops cleanly");
    w.api.stop().expect("the API server stops cleanly");
}

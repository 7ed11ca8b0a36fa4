//! The agent with node fault detection, against the embedded API server and the reference
//! driver, over real bind mounts (root): a publish path that is unmounted under a running pod reaches
//! the pod's status as Inaccessible/NotMounted beside whatever the driver says, and clears when
//! the path is mounted again. Without root the test prints why it skips, unless
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

fn is_root() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "the node fault test needs root (VOLHEALTH_REQUIRE_TOOLS=1)"
    );
    println!("SKIPPED node fault detection in the agent: needs root to mount");
    false
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
async fn an_unmounted_publish_path_reaches_the_pod_and_clears() {
    if !is_root() {
        return;
    }
    let w = NodeWorld::start(DRIVER, NODE, TOKENS, None, KubeletRoot::volume_dirs).await;
    let pods: Api<Pod> = Api::namespaced(w.admin.clone(), "default");
    let pod = pods.get("web").await.unwrap();
    let uid = pod.metadata.uid.unwrap();
    let (stage, publish) = KubeletRoot::volume_dirs(&w.root, DRIVER, &w.volume, &uid, "pv-web");
    let (staging, target) = (stage.join("globalmount"), publish.join("mount"));
    // The test world's driver links its paths; mount them as a real driver would.
    let data = w.dir.path().join("volume-data");
    std::fs::create_dir_all(&data).unwrap();
    for (from, to) in [(&data, &staging), (&staging, &target)] {
        let _ = std::fs::remove_file(to);
        std::fs::create_dir_all(to).unwrap();
        bind(from, to);
    }
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

    agent.stop().expect("the agent stops cleanly");
    let _ = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH);
    let _ = nix::mount::umount2(&staging, nix::mount::MntFlags::MNT_DETACH);
    w.driver.stop().expect("the driver stops cleanly");
    w.api.stop().expect("the API server stops cleanly");
}

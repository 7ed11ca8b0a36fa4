//! Both writers in one process while the API server goes away and comes back on the same
//! address over the same data: while it is gone, each writer's `/readyz` says so and nothing it
//! wanted to write is lost; once it is back, both resume on their own (no restart of theirs)
//! and the recoveries that happened during the outage reach the claim's and the pod's status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;
use volhealth_testkit::{NodeWorld, client_for, run_agent, run_monitor, wait_for};

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(40);

mod support;

use support::free_addr;

async fn ready(addr: SocketAddr) -> bool {
    reqwest::get(format!("http://{addr}/readyz"))
        .await
        .is_ok_and(|r| r.status().is_success())
}

async fn claim_conditions(admin: &kube::Client) -> Option<Vec<String>> {
    let (seen, _) = support::claim(admin).await?;
    Some(seen.into_iter().map(|(_, reason, _)| reason).collect())
}

async fn pod_conditions(admin: &kube::Client) -> Option<Vec<String>> {
    let seen = support::pod(admin).await?;
    Some(seen.into_iter().map(|(_, reason, _)| reason).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_writers_resume_after_an_api_server_restart_and_lose_nothing() {
    let w = NodeWorld::with_driver(DRIVER, NODE, |_| {}).await;
    let (monitor_http, agent_http) = (free_addr(), free_addr());
    let monitor = run_monitor("monitor", w.monitor_config(Some(monitor_http)));
    let agent = run_agent("agent", w.agent_config("nodetok", Some(agent_http)));
    let NodeWorld {
        api,
        admin,
        driver,
        volume,
        ..
    } = w;

    driver.inject_both_sides(&volume);
    wait_for(
        WAIT,
        "both faults on status, both writers ready",
        || async {
            (claim_conditions(&admin).await? == ["SlowDisk"]
                && pod_conditions(&admin).await? == ["PathGone"]
                && ready(monitor_http).await
                && ready(agent_http).await)
                .then_some(())
        },
    )
    .await;

    // The API server goes away; the volume recovers meanwhile, so both writers have something
    // to write and find the server unreachable.
    let outage = api.stop_for_outage();
    driver.clear_volume(&volume);
    wait_for(WAIT, "both writers to report not ready", || async {
        (!ready(monitor_http).await && !ready(agent_http).await).then_some(())
    })
    .await;
    assert!(
        !monitor.ended() && !agent.ended(),
        "an outage stops no writer"
    );

    let api = outage.start_again().await;
    let admin = client_for(&api.kubeconfig).await;
    wait_for(
        WAIT,
        "the recoveries to reach status after the outage",
        || async {
            (claim_conditions(&admin).await?.is_empty() && pod_conditions(&admin).await?.is_empty())
                .then_some(())
        },
    )
    .await;
    wait_for(WAIT, "both writers to be ready again", || async {
        (ready(monitor_http).await && ready(agent_http).await).then_some(())
    })
    .await;

    monitor.stop().expect("the monitor stops cleanly");
    agent.stop().expect("the agent stops cleanly");
    driver.stop().expect("the driver stops cleanly");
    api.stop().expect("the API server stops cleanly");
}

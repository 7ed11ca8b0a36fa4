//! `status` run in-process against the embedded API server: the options as the command line
//! builds them, the output written into a buffer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;
use volhealth_status::{Error, Expectation, Format, StatusOptions};
use volhealth_testkit::{ApiServer, TOKENS, bind_claim, client_for};

const DRIVER: &str = "status.test.csi";

/// The server with one bound claim, `default/claim-a`, and the options that point at it.
async fn cluster(dir: &std::path::Path) -> (ApiServer, StatusOptions) {
    std::fs::create_dir_all(dir.join("api")).unwrap();
    let api = ApiServer::start(&dir.join("api"), Some(TOKENS)).await;
    let admin = client_for(&api.kubeconfig).await;
    bind_claim(&admin, DRIVER, "claim-a", "pv-a", "vol-a").await;
    let opts = StatusOptions {
        kubeconfig: Some(api.kubeconfig.clone()),
        namespace: Some("default".into()),
        ..StatusOptions::default()
    };
    (api, opts)
}

#[tokio::test]
async fn a_healthy_claim_is_a_report_with_no_items_and_its_volume() {
    let dir = tempfile::tempdir().unwrap();
    let (api, opts) = cluster(dir.path()).await;
    let opts = StatusOptions {
        format: Format::Json,
        ..opts
    };
    let mut out = Vec::new();
    volhealth_status::run(&opts, &mut out).await.unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(report["kind"], "HealthReport", "{report}");
    assert_eq!(report["namespace"], "default", "{report}");
    assert_eq!(report["items"], serde_json::json!([]), "{report}");
    let volumes = report["volumes"].as_array().unwrap();
    assert_eq!(volumes.len(), 1, "{report}");
    assert!(
        report["volumes"].to_string().contains("claim-a"),
        "{report}"
    );
    api.stop().unwrap();
}

#[tokio::test]
async fn wait_for_what_never_comes_ends_in_its_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let (api, opts) = cluster(dir.path()).await;
    let opts = StatusOptions {
        wait_for: vec![Expectation::parse("pvc/claim-a=VolumeNotFound").unwrap()],
        timeout: Duration::ZERO,
        ..opts
    };
    let mut out = Vec::new();
    let err = volhealth_status::run(&opts, &mut out).await.unwrap_err();
    match &err {
        Error::WaitTimedOut { expected, .. } => {
            assert_eq!(expected, "pvc/claim-a=VolumeNotFound");
        }
        other => panic!("{other}"),
    }
    assert!(out.is_empty(), "nothing is printed when the wait fails");
    assert!(
        Expectation::parse("pvc/claim-a=healthy").unwrap().met(&[]),
        "a claim with no condition is healthy"
    );
    api.stop().unwrap();
}

//! Storage-side detection over a real socket: a missing or read-only state dir is
//! StorageUnreachable, low free space is StorageDegraded.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod fixture;

use fixture::*;
use volhealth_csi::v1;

async fn storage(d: &TestDriver) -> Vec<(i32, String, String)> {
    let mut node = d.node().await;
    let r = node
        .node_get_storage_health(v1::NodeGetStorageHealthRequest::default())
        .await
        .expect("NodeGetStorageHealth")
        .into_inner();
    r.backend_health
        .into_iter()
        .map(|b| (b.status, b.reason, b.message))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_state_dir_is_unreachable_until_it_returns() {
    let d = TestDriver::start(|c| c.low_space_fraction = 0.0).await;
    assert!(storage(&d).await.is_empty());
    let moved = d.dir.path().join("moved-away");
    std::fs::rename(&d.state, &moved).unwrap();
    let got = storage(&d).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].0, got[0].1.as_str()), (2, "StateDirMissing"));
    assert!(got[0].2.contains(&d.state.display().to_string()));
    std::fs::rename(&moved, &d.state).unwrap();
    assert!(storage(&d).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_space_below_the_threshold_is_degraded() {
    // Any filesystem has less than 100.5% free: the check reads real numbers.
    let d = TestDriver::start(|c| c.low_space_fraction = 1.005).await;
    let got = storage(&d).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].0, got[0].1.as_str()), (1, "LowFreeSpace"));
    let message = &got[0].2;
    assert!(
        message.contains(" free of ") && message.contains("iB") && message.contains('%'),
        "sizes and the share free: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_state_dir_is_unreachable() {
    let outer = tempfile::tempdir().unwrap();
    let pool = outer.path().join("pool");
    let Some(_tmpfs) = mount_tmpfs(&pool, 8 << 20) else {
        return;
    };
    let d = TestDriver::start_with(tempfile::tempdir().unwrap(), pool.clone(), |c| {
        c.low_space_fraction = 0.0
    })
    .await;
    assert!(storage(&d).await.is_empty());
    let ok = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&pool)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!(
            "SKIPPED: remounting the tmpfs read-only was refused (permission, not a missing tool)"
        );
        return;
    }
    let got = storage(&d).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].0, got[0].1.as_str()), (2, "StateDirReadOnly"));
    let _ = std::process::Command::new("mount")
        .args(["-o", "remount,rw"])
        .arg(&pool)
        .status();
    d.stop().await;
}

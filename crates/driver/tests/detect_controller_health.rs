//! Controller-side detection over a real socket: data deleted out of band, a corrupted image,
//! a full backing filesystem.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod fixture;

use fixture::*;

const INACCESSIBLE: i32 = 2;
const DATA_LOSS: i32 = 3;
const DEGRADED: i32 = 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_deleted_out_of_band_is_inaccessible_in_get_and_list() {
    let d = TestDriver::start(|_| {}).await;
    let mut ctrl = d.controller().await;
    let id = create(&mut ctrl, "pvc-gone", 1 << 20, None).await;
    let keep = create(&mut ctrl, "pvc-kept", 1 << 20, None).await;
    assert!(controller_get(&mut ctrl, &id).await.is_empty());
    std::fs::remove_dir_all(d.state.join("volumes").join(&id)).unwrap();
    let got = controller_get_until(&ctrl, &id, "VolumeNotFound from Get", |p| !p.is_empty()).await;
    assert_eq!(got, vec![(INACCESSIBLE, "VolumeNotFound".to_string())]);
    let listed = list_all(&mut ctrl, 1).await;
    let gone = listed
        .iter()
        .find(|v| v.volume_id == id)
        .expect("deleted volume still listed");
    assert_eq!(
        health_pairs(&gone.health_statuses),
        vec![(INACCESSIBLE, "VolumeNotFound".to_string())]
    );
    assert!(
        gone.health_statuses[0].message.contains(&id),
        "message names the path: {}",
        gone.health_statuses[0].message
    );
    let kept = listed
        .iter()
        .find(|v| v.volume_id == keep)
        .expect("healthy volume listed");
    assert!(kept.health_statuses.is_empty());
}

/// Zeroes the primary superblock of the ext4 image at `image`.
fn zero_primary_superblock(image: &std::path::Path) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(image).unwrap();
    f.seek(SeekFrom::Start(1024)).unwrap();
    f.write_all(&[0u8; 1024]).unwrap();
    f.sync_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_image_is_data_loss() {
    if !have_tool("mkfs.ext4", &["-V"]) || !have_tool("e2fsck", &["-V"]) {
        return;
    }
    let d = TestDriver::start(|c| c.backend = volhealth_driver::BackendKind::Image).await;
    let mut ctrl = d.controller().await;
    let id = create(&mut ctrl, "pvc-img", 32 << 20, None).await;
    let image = d.state.join("volumes").join(format!("{id}.img"));
    assert!(image.is_file(), "image at volumes/<id>.img");
    let meta = std::fs::metadata(&image).unwrap();
    assert_eq!(meta.len(), 32 << 20);
    assert!(
        std::os::unix::fs::MetadataExt::blocks(&meta) * 512 < 32 << 20,
        "image is sparse"
    );
    assert!(controller_get(&mut ctrl, &id).await.is_empty());
    zero_primary_superblock(&image);
    let got = controller_get_until(&ctrl, &id, "FilesystemCorrupt", |p| {
        p.iter().any(|(_, r)| r == "FilesystemCorrupt")
    })
    .await;
    assert!(
        got.contains(&(DATA_LOSS, "FilesystemCorrupt".to_string())),
        "{got:?}"
    );
    // Deleting the image out of band is VolumeNotFound, as for directories.
    std::fs::remove_file(&image).unwrap();
    controller_get_until(&ctrl, &id, "VolumeNotFound for the image", |p| {
        p == [(INACCESSIBLE, "VolumeNotFound".to_string())]
    })
    .await;
}

fn fill(path: &std::path::Path, bytes: u64) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let chunk = vec![0xabu8; 64 * 1024];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if f.write_all(&chunk[..n]).is_err() {
            break; // ENOSPC: full is what we want.
        }
        left -= n as u64;
    }
    let _ = f.sync_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_backing_filesystem_is_degraded_then_inaccessible() {
    let outer = tempfile::tempdir().unwrap();
    let pool = outer.path().join("pool");
    let size: u64 = 8 << 20;
    let Some(_tmpfs) = mount_tmpfs(&pool, size) else {
        return;
    };
    let sock_dir = tempfile::tempdir().unwrap();
    let d = TestDriver::start_with(sock_dir, pool.clone(), |c| {
        c.mode = volhealth_driver::Mode::All
    })
    .await;
    let mut ctrl = d.controller().await;
    // 1 GiB promised on an 8 MiB filesystem: over-committed.
    let id = create(&mut ctrl, "pvc-thin", 1 << 30, None).await;
    assert!(
        controller_get(&mut ctrl, &id).await.is_empty(),
        "plenty of free space at first"
    );
    let filler = pool.join("filler");
    fill(&filler, size * 93 / 100);
    let got = controller_get_until(&ctrl, &id, "ThinPoolLowSpace", |p| !p.is_empty()).await;
    assert_eq!(got, vec![(DEGRADED, "ThinPoolLowSpace".to_string())]);
    let mut node = d.node().await;
    let storage = storage_get(&mut node).await;
    assert!(
        storage
            .iter()
            .any(|s| s.status == 1 && s.reason == "LowFreeSpace"),
        "{storage:?}"
    );
    fill(&filler, size);
    let got = controller_get_until(&ctrl, &id, "ThinPoolOutOfDataSpace", |p| {
        p.iter().any(|(s, _)| *s == INACCESSIBLE)
    })
    .await;
    assert_eq!(
        got,
        vec![(INACCESSIBLE, "ThinPoolOutOfDataSpace".to_string())]
    );
    let msg = ctrl
        .controller_get_volume_health(volhealth_csi::v1::ControllerGetVolumeHealthRequest {
            volume_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .volume_health
        .unwrap()
        .health_statuses[0]
        .message
        .clone();
    assert!(
        msg.contains(" free of ") && msg.contains("iB") && msg.contains("promised"),
        "message has sizes: {msg}"
    );
    std::fs::remove_file(&filler).unwrap();
    controller_get_until(&ctrl, &id, "recovery after space is freed", |p| {
        p.is_empty()
    })
    .await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_image_checks_clean_and_zeroed_superblock_does_not() {
    if !have_tool("mkfs.ext4", &["-V"]) || !have_tool("e2fsck", &["-V"]) {
        return;
    }
    use volhealth_driver::backend_image::{FsckOutcome, create, fsck};
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("v.img");
    create(&image, 16 << 20).await.unwrap();
    assert_eq!(
        fsck(&image, std::time::Duration::from_secs(60)).await,
        FsckOutcome::Clean
    );
    zero_primary_superblock(&image);
    assert!(matches!(
        fsck(&image, std::time::Duration::from_secs(60)).await,
        FsckOutcome::Corrupt { .. }
    ));
}

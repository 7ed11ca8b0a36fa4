//! `client::connect`, `server::serve_unix` and `server::spawn_unix` over real unix sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod test_plugin;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::Duration;

use test_plugin::Config;
use volhealth_csi::Error;
use volhealth_csi::server::{SocketOptions, spawn_unix};
use volhealth_csi::v1::identity_client::IdentityClient;

fn config() -> Config {
    Config {
        name: "socket.test".into(),
        controller: None,
        node: None,
    }
}

async fn plugin_name(channel: tonic::transport::Channel) -> String {
    IdentityClient::new(channel)
        .get_plugin_info(volhealth_csi::v1::GetPluginInfoRequest {})
        .await
        .expect("GetPluginInfo")
        .into_inner()
        .name
}

/// A fresh temporary directory and `name` in it.
fn temp_path(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    (dir, path)
}

/// Connects to `endpoint` (which must answer: `what`) and checks the plugin's name.
async fn assert_answers(endpoint: &str, what: &str) {
    let channel = volhealth_csi::client::connect(endpoint, Duration::from_secs(10))
        .await
        .expect(what);
    assert_eq!(plugin_name(channel).await, "socket.test", "{what}");
}

#[tokio::test]
async fn serves_with_0660_in_created_dirs_and_removes_socket_on_shutdown() {
    let (_dir, socket) = temp_path("plugins/test/csi.sock");
    let plugin = test_plugin::start(&socket, &config());
    assert_answers(&plugin.endpoint, "connect").await;
    let meta = std::fs::symlink_metadata(&socket).expect("socket exists");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    plugin.stop().await.expect("clean shutdown");
    assert!(!socket.exists(), "socket left behind after shutdown");
}

#[tokio::test]
async fn replaces_a_stale_socket() {
    let (_dir, socket) = temp_path("csi.sock");
    // A socket file nobody listens on, as a crashed driver leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind stale"));
    assert!(socket.exists());
    let plugin = test_plugin::start(&socket, &config());
    assert_answers(&plugin.endpoint, "connect").await;
    plugin.stop().await.expect("clean shutdown");
}

#[tokio::test]
async fn refuses_to_delete_a_regular_file() {
    let (_dir, path) = temp_path("csi.sock");
    std::fs::write(&path, b"not a socket").expect("write file");
    let plugin = test_plugin::start(&path, &config());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !plugin.is_finished() {
        assert!(tokio::time::Instant::now() < deadline, "still serving");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let err = plugin.stop().await.expect_err("must refuse");
    assert!(matches!(err, Error::NotASocket { .. }), "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).expect("file kept"), b"not a socket");
}

#[tokio::test]
async fn refuses_to_replace_a_socket_in_use() {
    let (_dir, socket) = temp_path("csi.sock");
    let first = test_plugin::start(&socket, &config());
    volhealth_csi::client::connect(&first.endpoint, Duration::from_secs(10))
        .await
        .expect("first is up");
    let second = test_plugin::start(&socket, &config());
    let err = second.stop().await.expect_err("second must refuse");
    assert!(matches!(err, Error::SocketInUse { .. }), "{err}");
    assert_answers(&first.endpoint, "first still serving").await;
    first.stop().await.expect("clean shutdown");
}

#[tokio::test]
async fn a_dropped_plugin_accepts_no_more_connections() {
    let (_dir, socket) = temp_path("csi.sock");
    let plugin = test_plugin::start(&socket, &config());
    let endpoint = plugin.endpoint.clone();
    assert_answers(&endpoint, "connect").await;
    assert!(!plugin.is_finished());
    drop(plugin);
    let err = volhealth_csi::client::connect(&endpoint, Duration::from_millis(500))
        .await
        .expect_err("nobody accepts");
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
}

#[tokio::test]
async fn connect_waits_for_a_driver_that_starts_later() {
    let (_dir, socket) = temp_path("late/csi.sock");
    let endpoint = format!("unix://{}", socket.display());
    let connecting = tokio::spawn({
        let endpoint = endpoint.clone();
        async move { volhealth_csi::client::connect(&endpoint, Duration::from_secs(20)).await }
    });
    // Let connect find no socket at least once before the driver starts.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        !connecting.is_finished(),
        "connect returned before any socket existed"
    );
    let plugin = test_plugin::start(&socket, &config());
    let channel = connecting
        .await
        .expect("connect task")
        .expect("connect once the driver is up");
    assert_eq!(plugin_name(channel).await, "socket.test");
    plugin.stop().await.expect("clean shutdown");
}

#[tokio::test]
async fn connect_to_a_missing_socket_times_out_naming_the_path() {
    let (_dir, socket) = temp_path("nothing-here.sock");
    let endpoint = format!("unix://{}", socket.display());
    let err = volhealth_csi::client::connect(&endpoint, Duration::from_millis(300))
        .await
        .expect_err("no driver");
    assert!(matches!(err, Error::SocketMissing { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&socket.display().to_string()), "{text}");
    assert!(text.contains("does not exist"), "{text}");
}

#[tokio::test]
async fn connect_to_a_dead_socket_times_out_naming_the_path() {
    let (_dir, socket) = temp_path("dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind"));
    let endpoint = format!("unix:{}", socket.display());
    let err = volhealth_csi::client::connect(&endpoint, Duration::from_millis(300))
        .await
        .expect_err("nobody listens");
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&socket.display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn serve_unix_with_applies_the_given_permissions() {
    let (_dir, socket) = temp_path("reg/plugin-reg.sock");
    let endpoint = format!("unix://{}", socket.display());
    let options = SocketOptions {
        mode: 0o600,
        service: "plugin registration",
    };
    let server = spawn_unix(&endpoint, test_plugin::router(&config()), options);
    assert_answers(&endpoint, "connect").await;
    let meta = std::fs::symlink_metadata(&socket).expect("socket exists");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    server.stop().await.expect("clean shutdown");
    assert!(!socket.exists(), "socket left behind after shutdown");
}

#[test]
fn default_socket_options_are_those_of_serve_unix() {
    let options = SocketOptions::default();
    assert_eq!(options.mode, 0o660);
    assert_eq!(options.service, "CSI");
}

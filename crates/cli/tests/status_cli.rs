//! `volhealth status` as a process against the real embedded API server, for what only the
//! binary shows: the `kubectl volhealth` plugin through the real kubectl, and `--watch` telling
//! on its standard error of an outage and of its end: an API server killed and started again,
//! and a cut in the network to one that keeps running. (What `status`
//! reports, its formats, failures, `--watch` and paging are tested in-process in
//! `volhealth-status`.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;
use support::{bin, have_tool, start_apiserver};
use volhealth_testkit::{make_all_three_unhealthy, seed_claim_pod_and_csinode};

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_volhealth_runs_status() {
    if !have_tool("kubectl", &["version", "--client"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed_claim_pod_and_csinode(&api.kubeconfig).await;
    make_all_three_unhealthy(&api.kubeconfig).await;
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::os::unix::fs::symlink(bin(), plugins.join("kubectl-volhealth")).unwrap();
    std::os::unix::fs::symlink(bin(), plugins.join("kubectl_complete-volhealth")).unwrap();
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // `kubectl ARGS` with the plugin on PATH, which must succeed: its stdout.
    let kubectl = |args: &[&str]| {
        let out = support::output_ok(
            Command::new("kubectl")
                .args(args)
                .env("PATH", &path)
                .env("KUBECONFIG", &api.kubeconfig),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let doc = json_of(&kubectl(&["volhealth", "-A", "-o", "json"]));
    assert_eq!(doc["items"].as_array().unwrap().len(), 3);
    let listed = Command::new("kubectl")
        .args(["plugin", "list"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("kubectl-volhealth"));

    // kubectl's own completion asks the plugin's completer (kubectl 1.26 and later).
    let completed = Command::new("kubectl")
        .args(["__complete", "volhealth", "-A", "--out"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&completed.stdout);
    assert_eq!(
        text.lines().take(2).collect::<Vec<_>>(),
        ["--output", ":4"],
        "{text}{}",
        String::from_utf8_lossy(&completed.stderr)
    );

    // The help shows the form kubectl users type, and the form it used to show works too.
    let help = kubectl(&["volhealth", "--help"]);
    assert!(
        help.contains("Usage: kubectl volhealth [OPTIONS]"),
        "{help}"
    );
    let doc = json_of(&kubectl(&["volhealth", "status", "-A", "-o", "json"]));
    assert_eq!(doc["items"].as_array().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_tells_of_an_outage_once_and_of_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let mut api = start_apiserver(tmp.path(), &[]);
    seed_claim_pod_and_csinode(&api.kubeconfig).await;
    let (_child, told) = watch_telling(&api.kubeconfig);

    // The API server goes away: four watches fail on every retry, the user is told once.
    let port = api.url.rsplit(':').next().unwrap().to_string();
    api.proc.kill();
    told.outage_once();

    // Back on the same port with the same data: said once more, then nothing.
    let data = tmp.path().join("data").to_string_lossy().to_string();
    let listen = format!("127.0.0.1:{port}");
    let _again = support::volhealth(
        "apiserver-again",
        tmp.path(),
        &[
            "apiserver",
            "--insecure-http",
            "--listen",
            &listen,
            "--data-dir",
            &data,
            // As start_apiserver runs it: the test's client has no roles.
            "--authorization-mode",
            "Node,AlwaysAllow",
        ],
    );
    told.its_end_once();
}

/// The network to a running API server is cut and restored: the watches come back where they
/// left off and, as nothing changed meanwhile, bring no event. The end of the outage is told all
/// the same (before, it went untold until something changed).
#[tokio::test(flavor = "multi_thread")]
async fn watch_tells_of_the_end_of_a_network_cut_that_changed_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed_claim_pod_and_csinode(&api.kubeconfig).await;
    let upstream = api.url.trim_start_matches("http://").parse().unwrap();
    let relay = volhealth_testkit::Relay::start(upstream).await;
    let text = std::fs::read_to_string(&api.kubeconfig).unwrap();
    let kubeconfig = tmp.path().join("kubeconfig-via-relay");
    std::fs::write(
        &kubeconfig,
        text.replace(&api.url, &format!("http://{}", relay.addr)),
    )
    .unwrap();
    let (_child, told) = watch_telling(&kubeconfig);

    relay.cut();
    told.outage_once();
    relay.restore();
    told.its_end_once();
}

/// What `status --watch` has written to its standard error, line by line.
struct Told(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Told {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// An outage has begun: it is told in one line, which is not repeated.
    fn outage_once(&self) {
        support::wait_for(Duration::from_secs(30), "the outage warning", || {
            (!self.lines().is_empty()).then_some(())
        });
        let window = std::time::Instant::now() + Duration::from_secs(4);
        while std::time::Instant::now() < window {
            assert_eq!(
                self.lines().len(),
                1,
                "one line per outage: {:#?}",
                self.lines()
            );
            std::thread::park_timeout(Duration::from_millis(100));
        }
        let first = self.lines()[0].clone();
        assert!(
            first.contains("retrying") && !first.contains("ServiceError"),
            "{first}"
        );
    }

    /// The outage has ended: that is told in one more line.
    fn its_end_once(&self) {
        support::wait_for(Duration::from_secs(60), "the end of the outage", || {
            self.lines()
                .iter()
                .any(|l| l.contains("answers again"))
                .then_some(())
        });
        assert_eq!(self.lines().len(), 2, "{:#?}", self.lines());
    }
}

/// Starts `status --watch` with `kubeconfig` and waits for its first document: the child, and
/// what it tells on its standard error.
fn watch_telling(kubeconfig: &std::path::Path) -> (Reaped, Told) {
    let (mut child, rx) = watch(kubeconfig, Stdio::piped());
    let stderr = child.0.stderr.take().unwrap();
    let told = Told(std::sync::Arc::default());
    let seen = told.0.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            seen.lock().unwrap().push(line);
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("first document");
    (child, told)
}

/// A child killed and reaped when the test ends, also when it fails.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `volhealth status --watch -A -o json` with `kubeconfig`, its standard error going to
/// `stderr`: the child, and the lines of its standard output as they come.
fn watch(kubeconfig: &std::path::Path, stderr: Stdio) -> (Reaped, Receiver<String>) {
    let mut child = Command::new(bin())
        .args(["status", "--watch", "-A", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (Reaped(child), rx)
}

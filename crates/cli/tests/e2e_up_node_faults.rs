//! `volhealth up --node-faults` end to end: the sample volumes are real ext4 mounts, the node
//! plugins report no node health, and faults made by hand on the mounts show on the pods through
//! the agents' node fault detector, then clear when undone; stopping `up` leaves no mount and no
//! loop device behind. Needs root and loop devices: skipped with the reason otherwise, failed
//! under VOLHEALTH_REQUIRE_TOOLS=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this machine lets `up --node-faults` mount; prints why not (or fails, when required).
fn can_mount() -> bool {
    let why = if !nix::unistd::geteuid().is_root() {
        "not running as root"
    } else if !Path::new("/dev/loop-control").exists() {
        "no loop devices (/dev/loop-control is missing)"
    } else if !support::have_tool("mkfs.ext4", &["-V"]) {
        "mkfs.ext4 is not available"
    } else {
        return true;
    };
    assert!(
        std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "up --node-faults needs root and loop devices (VOLHEALTH_REQUIRE_TOOLS=1): {why}"
    );
    eprintln!("SKIPPED: up --node-faults needs root and loop devices: {why}");
    false
}

/// The directories directly inside `dir`.
fn children(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Where the kubelet role published `pv` for its pod on `node`.
fn publish_path(c: &Cluster, node: &str, pv: &str) -> PathBuf {
    let pods = c.dir.join("nodes").join(node).join("kubelet/pods");
    let found: Vec<PathBuf> = children(&pods)
        .into_iter()
        .map(|pod| pod.join("volumes/kubernetes.io~csi").join(pv).join("mount"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(found.len(), 1, "{pv} published under {}", pods.display());
    found.into_iter().next().unwrap()
}

/// Where `pv` is staged on `node`: the globalmount beside the vol_data.json that names it.
fn staging_path(c: &Cluster, node: &str, pv: &str) -> PathBuf {
    let csi = c
        .dir
        .join("nodes")
        .join(node)
        .join("kubelet/plugins/kubernetes.io/csi");
    let needle = format!("\"specVolID\":\"{pv}\"");
    let found: Vec<PathBuf> = children(&csi)
        .iter()
        .flat_map(|driver| children(driver))
        .filter(|d| {
            std::fs::read_to_string(d.join("vol_data.json")).is_ok_and(|t| t.contains(&needle))
        })
        .map(|d| d.join("globalmount"))
        .collect();
    assert_eq!(found.len(), 1, "{pv} staged under {}", csi.display());
    found.into_iter().next().unwrap()
}

/// `(mount point, filesystem type)` of every mount in this process's table at or under `dir`.
fn mounts_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            let point = PathBuf::from(fields.get(4)?.replace("\\040", " "));
            Some((point, fields.get(dash + 1)?.to_string()))
        })
        .filter(|(p, _)| p.starts_with(&dir))
        .collect()
}

/// Loop devices whose backing file is under `dir`.
fn loops_under(dir: &Path) -> Vec<String> {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    children(Path::new("/sys/block"))
        .into_iter()
        .filter_map(|b| {
            let file = std::fs::read_to_string(b.join("loop/backing_file")).ok()?;
            Path::new(file.trim())
                .starts_with(&dir)
                .then(|| b.display().to_string())
        })
        .collect()
}

fn run(program: &str, args: &[&Path], flags: &[&str]) {
    support::output_ok(Command::new(program).args(flags).args(args));
}

/// The reasons `volhealth status` shows for pod `name` from the node side.
fn pod_reasons(c: &Cluster, name: &str) -> Vec<String> {
    let doc = c.status_json();
    let mut found: Vec<String> = doc["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["kind"] == "Pod" && i["name"] == name && i["source"] == "node")
        .filter_map(|i| i["reason"].as_str().map(str::to_string))
        .collect();
    found.sort();
    found
}

#[test]
fn a_read_only_filesystem_and_an_unmounted_volume_show_on_their_pods_and_clear() {
    if !can_mount() {
        return;
    }
    let mut c = Cluster::start_with(1, &["--node-faults", "--pvcs-per-node", "2"]);
    let node = "node-1";
    let (web1, web2) = (
        publish_path(&c, node, "pv-data-1"),
        publish_path(&c, node, "pv-data-2"),
    );
    let (stage1, stage2) = (
        staging_path(&c, node, "pv-data-1"),
        staging_path(&c, node, "pv-data-2"),
    );
    // Real mounts: each volume's ext4 at its staging path and bind-mounted at its publish path.
    let mounted = mounts_under(&c.dir);
    for path in [&web1, &web2, &stage1, &stage2] {
        let path = std::fs::canonicalize(path).unwrap();
        assert!(
            mounted.iter().any(|(p, t)| *p == path && t == "ext4"),
            "{} is not an ext4 mount: {mounted:?}",
            path.display()
        );
    }
    assert_eq!(loops_under(&c.dir).len(), 2, "one loop device per volume");
    assert!(pod_reasons(&c, "web-1").is_empty() && pod_reasons(&c, "web-2").is_empty());

    // web-1's filesystem goes read-only under its rw publish mount, as ext4 does after an
    // error; web-2's volume is unmounted from under its pod.
    run("mount", &[&stage1], &["-o", "remount,ro"]);
    run("umount", &[&web2], &[]);
    c.eventually(
        "FilesystemReadOnly on web-1 and NotMounted on web-2",
        || {
            pod_reasons(&c, "web-1") == ["FilesystemReadOnly"]
                && pod_reasons(&c, "web-2") == ["NotMounted"]
        },
    );
    assert_eq!(c.status_of("Pod", "web-1", "node"), ["Inaccessible"]);

    // Undone: both clear.
    run("mount", &[&stage1], &["-o", "remount,rw"]);
    run("mount", &[&stage2, &web2], &["--bind"]);
    c.eventually("both conditions cleared", || {
        pod_reasons(&c, "web-1").is_empty() && pod_reasons(&c, "web-2").is_empty()
    });

    // Stopped: no mount and no loop device of this run is left.
    assert_eq!(c.interrupt(), Some(0));
    assert_eq!(mounts_under(&c.dir), Vec::new());
    assert_eq!(loops_under(&c.dir), Vec::<String>::new());
}

#[test]
fn without_root_node_faults_is_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let mut cmd = Command::new(support::bin());
    cmd.args(["up", "--listen", "127.0.0.1:0", "--node-faults", "--dir"])
        .arg(&dir);
    if nix::unistd::geteuid().is_root() {
        // As root, the refusal is seen as an ordinary user: nobody, in a dir it may write.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--node-faults needs root"), "{stderr}");
    // Nothing was started: no API server, no driver.
    assert!(!dir.join("kubeconfig").exists());
}

#[test]
fn node_faults_cannot_be_combined_with_an_outside_or_legacy_driver() {
    for extra in [
        &["--legacy-driver"][..],
        &["--driver-endpoint", "unix:///nowhere.sock"],
    ] {
        let out = Command::new(support::bin())
            .args(["up", "--node-faults"])
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains("cannot be used with"), "{stderr}");
    }
}

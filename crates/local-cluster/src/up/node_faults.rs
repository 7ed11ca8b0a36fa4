//! `up --node-faults`: the node plugins really mount their volumes (ext4 images, loop-mounted at
//! stage and bind-mounted at publish) and advertise no node health of their own, so what the pods
//! show comes from the agents' node fault detector alone, as for most drivers in use today. A
//! volume's filesystem remounted read-only or a publish path unmounted by hand then shows on its
//! pod. The mounts are `up`'s to undo: they are unmounted when it stops.

use crate::failure::Context as _;
use crate::failure::{Result, ensure, invalid};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `--volume-backend` of the controller plugin: every new volume is an ext4 image.
pub const CONTROLLER_ARGS: &[&str] = &["--volume-backend", "image"];

/// `--health-capabilities` of the node plugins: the controller's health only, none of the node's,
/// so the agents' detector answers NodeGetVolumeHealth and NodeGetStorageHealth (`auto`).
pub const NODE_ARGS: &[&str] = &["--health-capabilities", "list,get"];

/// Refuses, with what is missing, a machine where the node plugins cannot mount: not root, no
/// mkfs.ext4, or no loop device to be had. `scratch` holds a small file for the loop check.
pub fn check_machine(scratch: &Path) -> Result<()> {
    ensure!(
        nix::unistd::geteuid().is_root(),
        "--node-faults needs root: the node plugins loop-mount an ext4 image per volume and \
         bind-mount it into the pod's directory, as a real driver does (run `up` as root, or \
         leave --node-faults out)"
    );
    for (tool, probe) in [("mkfs.ext4", "-V"), ("losetup", "--version")] {
        let ok = Command::new(tool)
            .arg(probe)
            .output()
            .is_ok_and(|o| o.status.success());
        ensure!(
            ok,
            "--node-faults needs {tool} (e2fsprogs and util-linux), which is not available here"
        );
    }
    // A loop device really attached and released: the loop driver is there and this machine
    // (or container) may use it.
    std::fs::create_dir_all(scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let image = scratch.join("loop-check.img");
    let file =
        std::fs::File::create(&image).with_context(|| format!("creating {}", image.display()))?;
    file.set_len(1 << 20)
        .with_context(|| format!("sizing {}", image.display()))?;
    drop(file);
    let attached = Command::new("losetup")
        .args(["--find", "--show"])
        .arg(&image)
        .output();
    let result = match attached {
        Ok(out) if out.status.success() => {
            let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let _ = Command::new("losetup").args(["-d", &device]).status();
            Ok(())
        }
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(e) => Err(e.to_string()),
    };
    let _ = std::fs::remove_file(&image);
    result.map_err(|why| {
        invalid!(
            "--node-faults needs loop devices, and none could be attached here ({why}); \
             load the loop module (modprobe loop) or, in a container, give it /dev/loop*"
        )
    })
}

/// Every mount point at or under one of `roots`, from this process's mount table.
fn mounts_under(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = volhealth_driver::mounts::mount_points()
        .into_iter()
        .filter(|m| roots.iter().any(|r| m.starts_with(r)))
        .collect();
    // The deepest first, so that nothing is unmounted from under a mount inside it.
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found
}

/// The node kubelet roots of `nodes` as the mount table names them (symlinks resolved).
pub fn kubelet_roots(layout: &super::layout::Layout, nodes: &[String]) -> Vec<PathBuf> {
    nodes
        .iter()
        .map(|n| {
            let root = layout.kubelet_root(n);
            std::fs::canonicalize(&root).unwrap_or(root)
        })
        .collect()
}

/// Unmounts everything mounted under `roots` (the node plugins' stage and publish mounts; a
/// loop device goes with its last mount). Returns what could not be unmounted, described.
pub fn unmount_all(roots: &[PathBuf]) -> Vec<String> {
    // A few rounds: mounts may be stacked on one path.
    for _ in 0..8 {
        let left = mounts_under(roots);
        if left.is_empty() {
            return Vec::new();
        }
        for path in &left {
            if let Err(e) = volhealth_driver::mounts::unmount(path) {
                tracing::debug!("unmounting {}: {e}", path.display());
            }
        }
    }
    mounts_under(roots)
        .iter()
        .map(|p| p.display().to_string())
        .collect()
}

/// The lines of up's summary that show how to make the two faults by hand and undo them.
pub fn print_try(layout: &super::layout::Layout, nodes: &[String]) {
    let Some(node) = nodes.first() else {
        return;
    };
    let kubelet = layout.kubelet_root(node);
    let k = kubelet.display();
    println!("  # node faults ({node}): web-N's volume pv-data-N is mounted at");
    println!("  #   {k}/pods/<web-N's uid>/volumes/kubernetes.io~csi/pv-data-N/mount");
    println!("  # and staged (the ext4 filesystem itself, loop-mounted) at the globalmount of");
    println!("  #   {k}/plugins/kubernetes.io/csi/*/*/vol_data.json naming pv-data-N;");
    println!("  # `mount -o remount,ro` of the globalmount shows FilesystemReadOnly on web-N,");
    println!(
        "  # `umount` of the mount shows NotMounted; README.md, \"Optional: node faults on real mounts\", has the commands."
    );
}

//! `volhealth bench` at a tiny size: a test of the command (every figure is in the JSON, every
//! injected condition was seen and cleared, the SVG is well-formed), not of the numbers.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::process::Command;

/// A minimal well-formedness check: every tag closes in order, attribute quotes balance.
fn well_formed(xml: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let end = after
            .find('>')
            .ok_or_else(|| format!("unclosed tag near {:?}", &after[..after.len().min(40)]))?;
        let tag = &after[..end];
        if !tag.matches('"').count().is_multiple_of(2) {
            return Err(format!("unbalanced quotes in <{tag}>"));
        }
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .ok_or_else(|| format!("</{name}> closes nothing"))?;
            if open != name.trim() {
                return Err(format!("<{open}> closed by </{name}>"));
            }
        } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
            let name = tag.split_whitespace().next().unwrap_or("").to_string();
            stack.push(name);
        }
        rest = &after[end + 1..];
    }
    match stack.is_empty() {
        true => Ok(()),
        false => Err(format!("never closed: {stack:?}")),
    }
}

fn field<'a>(v: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    let got = path.split('.').try_fold(v, |v, k| v.get(k));
    got.unwrap_or_else(|| panic!("the JSON has no {path}:\n{v:#}"))
}

#[test]
fn a_small_bench_reports_every_figure_and_draws_the_picture() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("bench.json");
    let svg = tmp.path().join("bench.svg");
    let out = Command::new(support::bin())
        .args([
            "bench",
            "--pvcs",
            "40",
            "--nodes",
            "2",
            "--interval",
            "500ms",
            "--agent-interval",
            "500ms",
            "--duration",
            "3s",
            "--unhealthy",
            "10%",
            "--wait",
            "40s",
        ])
        .arg("--dir")
        .arg(support::deep_dir(tmp.path()).join("cluster"))
        .arg("--json")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("lag controller p50 / p99"), "{stdout}");
    assert!(
        !stdout.contains("per 1,000") && !stdout.contains('\r'),
        "no per-1,000 figures at 40 PVCs, no carriage returns into a pipe:\n{stdout}"
    );
    assert!(
        !support::deep_dir(tmp.path()).join("cluster").exists(),
        "--dir is removed without --keep"
    );

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for path in [
        "setup.pvcs",
        "setup.nodes",
        "setup.interval_s",
        "setup.agent_interval_s",
        "setup.mode",
        "setup.release_build",
        "setup_s",
        "healthy.writes_per_min",
        "healthy.status_patches_per_min",
        "healthy.status_patches_per_min_by_resource",
        "healthy.list_rpcs_per_cycle",
        "healthy.get_rpcs_per_cycle",
        "healthy.monitor_cpu_ms_per_cycle_per_1000",
        "healthy.cycles_ended",
        "healthy.cycle_overruns",
        "healthy.cycle_mean_s",
        "healthy.cycle_aligned",
        "unhealthy.writes_per_min",
        "lag.controller.p50_s",
        "lag.controller.p99_s",
        "lag.node_volume.p50_s",
        "lag.node_storage.p99_s",
        "failure.first_500_s",
        "failure.all_s",
        "failure.events",
        "failure.curve_s",
        "restart.pvc_status_patches",
        "recovery.all_s",
        "recovery.get_rpcs",
        "resources.apiserver.mean_rss_mib",
        "resources.driver_controller.cpu_s",
        "resources.node_plugins.max_rss_mib",
        "resources.monitor.max_rss_mib",
        "resources.monitor_rss_mib_per_1000_pvcs",
        "resources.agents.max_rss_mib",
    ] {
        field(&v, path);
    }
    assert_eq!(field(&v, "setup.pvcs"), 40);
    assert_eq!(field(&v, "setup.mode"), "list");
    let busy = field(&v, "healthy.machine_busy_pct").as_f64().unwrap();
    let steal = field(&v, "healthy.machine_steal_pct").as_f64().unwrap();
    assert!(
        busy > 0.0 && (0.0..=100.0).contains(&(busy + steal)),
        "the machine ran the bench: busy {busy}%, stolen {steal}%"
    );
    // The windows run from one cycle's end to another's, so they hold whole cycles: 40 healthy
    // volumes on one page are one List call per cycle, and no Get.
    assert_eq!(field(&v, "healthy.cycle_aligned"), true, "{stdout}");
    assert!(field(&v, "healthy.cycles_ended").as_f64().unwrap() >= 1.0);
    assert_eq!(field(&v, "healthy.list_rpcs_per_cycle"), 1.0, "{stdout}");
    assert_eq!(field(&v, "healthy.get_rpcs_per_cycle"), 0.0, "{stdout}");
    for kind in ["controller", "node_volume", "node_storage"] {
        let samples = field(&v, &format!("lag.{kind}.samples")).as_u64().unwrap();
        assert!(
            samples >= 20,
            "{kind}: only {samples} lag samples:\n{stdout}"
        );
    }
    // 10% of 40: all four reached status, and all four cleared.
    assert_eq!(field(&v, "failure.volumes"), 4);
    assert_eq!(field(&v, "failure.on_status"), 4, "{stdout}");
    assert!(field(&v, "failure.all_s").is_number(), "{stdout}");
    assert_eq!(field(&v, "recovery.on_status"), 4, "{stdout}");
    assert!(field(&v, "recovery.all_s").is_number(), "{stdout}");
    assert_eq!(field(&v, "resources.agents.count"), 2);
    assert!(field(&v, "resources.monitor.max_rss_mib").as_f64().unwrap() > 0.0);

    let picture = std::fs::read_to_string(&svg).unwrap();
    well_formed(&picture).unwrap_or_else(|e| panic!("the SVG is not well-formed: {e}\n{picture}"));
    assert!(picture.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(
        picture.matches("<polyline").count(),
        5,
        "three lag curves, two burst curves"
    );
}

#[test]
fn the_checker_rejects_broken_xml() {
    assert!(well_formed("<svg><g></g></svg>").is_ok());
    assert!(well_formed("<svg><g></svg>").is_err());
    assert!(well_formed("<svg><rect a=\"1/></svg>").is_err());
    assert!(well_formed("<svg>").is_err());
}

#[test]
fn a_dir_that_is_not_empty_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("x"), "keep me").unwrap();
    let out = Command::new(support::bin())
        .args(["bench", "--pvcs", "2", "--nodes", "1", "--dir"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("x")).unwrap(),
        "keep me"
    );
}

//! `volhealth up --with-remediation` end to end, with the controller as its own service account:
//! a held StorageUnreachable taints exactly its node and recovery untaints it; a held
//! Inaccessible DiskFailure on a claim evicts its pod once no PodDisruptionBudget blocks it, and a
//! second one in the same namespace waits for the eviction budget; in dry-run nothing changes but
//! Events say what would be done.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const POLICY: &str = "\
evictionBudget: {maxPercent: 20, window: 1h}
rules:
- name: unreachable
  match: {object: CSINode, status: StorageUnreachable}
  for: 2s
  actions: [{taint: {key: volhealth.io/storage-unreachable, effect: NoSchedule}}]
- name: disk-failed
  match: {object: PersistentVolumeClaim, status: Inaccessible, reason: DiskFailure}
  for: 2s
  actions: [evict, {annotate: {key: volhealth.io/replace-volume, value: \"true\"}}]
";

/// Runs `f` on the PodDisruptionBudgets of `default`, as the admin.
fn pdbs<F: Future<Output = ()>>(c: &Cluster, f: impl FnOnce(Api<PodDisruptionBudget>) -> F) {
    support::block_on(async {
        let kc = kube::config::Kubeconfig::read_from(&c.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        f(Api::namespaced(client, "default")).await
    })
}

fn tainted(c: &Cluster) -> Vec<String> {
    let nodes = c.get_json("/api/v1/nodes").unwrap();
    let mut out: Vec<String> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["spec"]["taints"].as_array().is_some_and(|ts| {
                ts.iter()
                    .any(|t| t["key"] == "volhealth.io/storage-unreachable")
            })
        })
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

fn pod_exists(c: &Cluster, name: &str) -> bool {
    c.get_json(&format!("/api/v1/namespaces/default/pods/{name}"))
        .is_some()
}

/// The controller's `volhealth_remediation_actions_total{action,result}`.
fn actions(c: &Cluster, action: &str, result: &str) -> u64 {
    let endpoints: Value =
        serde_json::from_str(&std::fs::read_to_string(c.dir.join("endpoints.json")).unwrap())
            .unwrap();
    let url = endpoints["remediate"]
        .as_str()
        .expect("remediate in endpoints.json");
    let Some((_, _, page)) = support::http_get(url, None) else {
        return 0;
    };
    let want =
        format!("volhealth_remediation_actions_total{{action=\"{action}\",result=\"{result}\"}} ");
    page.lines()
        .find_map(|l| l.strip_prefix(&want))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn policy_file(dir: &std::path::Path) -> String {
    let path = dir.join("policy.yaml");
    std::fs::write(&path, POLICY).unwrap();
    path.to_string_lossy().to_string()
}

fn inaccessible(c: &Cluster, claim: &str) {
    let claim = format!("default/{claim}");
    c.inject_pvc(&claim, "controller", "Inaccessible", "DiskFailure", &[]);
}

#[test]
fn remediate_taints_untaints_and_evicts_within_budget_and_pdbs() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = policy_file(tmp.path());
    let c = Cluster::start_with(
        3,
        &[
            "--with-remediation",
            "--remediation-policy",
            &policy,
            "--remediation-dry-run=false",
        ],
    );
    let up = std::fs::read_to_string(c.up_log()).unwrap();
    assert!(up.contains("remediate"), "{up}");

    // A held StorageUnreachable on node-2 taints node-2 alone; recovery untaints it.
    c.inject_storage("node-2", "StorageUnreachable", "NetworkPartition", &[]);
    c.eventually("node-2 tainted", || tainted(&c) == ["node-2"]);
    c.inject(&["clear", "storage", "--node", "node-2"]);
    c.eventually("node-2 untainted", || tainted(&c).is_empty());

    // A budget that allows no web pod to be disrupted: the eviction of web-1 is refused and retried.
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}});
    pdbs(&c, |api| async move {
        let pdb: PodDisruptionBudget = serde_json::from_value(pdb).unwrap();
        api.create(&PostParams::default(), &pdb).await.unwrap();
    });
    inaccessible(&c, "data-1");
    c.eventually("the eviction of web-1 blocked by the PDB", || {
        actions(&c, "evict", "blocked") > 0
    });
    assert!(pod_exists(&c, "web-1"), "a PDB refused the eviction");
    // Without the budget the retry evicts web-1, and the claim is annotated.
    pdbs(&c, |api| async move {
        api.delete("web", &DeleteParams::default()).await.unwrap();
    });
    c.eventually("web-1 evicted", || !pod_exists(&c, "web-1"));
    c.eventually("data-1 annotated", || {
        c.get_json("/api/v1/namespaces/default/persistentvolumeclaims/data-1")
            .is_some_and(|p| p["metadata"]["annotations"]["volhealth.io/replace-volume"] == "true")
    });
    // The annotation may predate the eviction (it is not blocked by the budget), and the pod is
    // gone from the API server a moment before the controller has the answer: wait for the count.
    c.eventually("the eviction counted", || {
        actions(&c, "evict", "success") > 0
    });
    assert_eq!(actions(&c, "evict", "success"), 1);

    // 20% of the six pods per hour is spent: web-2 stays.
    inaccessible(&c, "data-2");
    c.eventually("the eviction of web-2 refused by the budget", || {
        actions(&c, "evict", "over_budget") > 0
    });
    assert!(pod_exists(&c, "web-2"), "over the eviction budget");
    assert_eq!(actions(&c, "evict", "success"), 1);
}

#[test]
fn in_dry_run_remediate_changes_nothing_and_says_what_it_would_do() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = policy_file(tmp.path());
    let c = Cluster::start_with(2, &["--with-remediation", "--remediation-policy", &policy]);
    c.inject_storage("node-2", "StorageUnreachable", "NetworkPartition", &[]);
    inaccessible(&c, "data-1");
    let said = |c: &Cluster, what: &str| {
        c.get_json("/api/v1/events").is_some_and(|e| {
            e["items"].as_array().unwrap().iter().any(|e| {
                e["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(&format!("dry run: would {what}")))
            })
        })
    };
    c.eventually("the dry-run Events", || {
        said(&c, "taint node node-2")
            && said(
                &c,
                "evict the pod(s) of PersistentVolumeClaim default/data-1",
            )
    });
    assert!(actions(&c, "taint", "dry_run") >= 1);
    assert!(tainted(&c).is_empty(), "dry run taints nothing");
    assert!(pod_exists(&c, "web-1"), "dry run evicts nothing");
    assert_eq!(actions(&c, "evict", "success"), 0);
}

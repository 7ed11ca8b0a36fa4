//! The names the manifests tie together agree: each workload runs as the service account its
//! bindings grant, the monitor's identity is the one `volhealth up` gives it, the admission
//! policy matches the agent's identity, every RBAC rule says which call needs it and none uses a
//! wildcard, and the agent mounts the kubelet's directories read-only at their host paths.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use serde_json::{Value, json};
use volhealth_deploy_tests::admission::{Decision, Policy, Request};
use volhealth_deploy_tests::manifests::{self, the_one};

/// The identity `volhealth up` gives the monitor in the embedded API server.
const MONITOR_USER: &str = "system:serviceaccount:kube-system:csi-external-health-monitor";

fn docs(file: &str) -> Vec<Value> {
    manifests::documents(&manifests::dir().join(file)).unwrap()
}

fn user_of(sa: &Value) -> String {
    format!(
        "system:serviceaccount:{}:{}",
        sa["metadata"]["namespace"].as_str().unwrap(),
        sa["metadata"]["name"].as_str().unwrap()
    )
}

/// Every binding of `docs` binds `role` to exactly the service account `sa`.
fn bindings_name_the_account(docs: &[Value], sa: &Value) -> usize {
    let mut n = 0;
    for b in docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
    {
        let subjects = b["subjects"].as_array().unwrap();
        assert_eq!(subjects.len(), 1, "{b}");
        assert_eq!(subjects[0]["kind"], "ServiceAccount");
        assert_eq!(subjects[0]["name"], sa["metadata"]["name"]);
        assert_eq!(subjects[0]["namespace"], sa["metadata"]["namespace"]);
        let role_kind = if b["kind"] == "RoleBinding" {
            "Role"
        } else {
            "ClusterRole"
        };
        assert_eq!(b["roleRef"]["kind"], role_kind, "{b}");
        let role = docs
            .iter()
            .find(|d| d["kind"] == role_kind && d["metadata"]["name"] == b["roleRef"]["name"])
            .unwrap_or_else(|| panic!("{b} refers to a role not in the file"));
        if role_kind == "Role" {
            assert_eq!(role["metadata"]["namespace"], b["metadata"]["namespace"]);
            assert_eq!(role["metadata"]["namespace"], sa["metadata"]["namespace"]);
        }
        n += 1;
    }
    n
}

#[test]
fn the_monitor_runs_as_the_account_its_bindings_grant() {
    let rbac = docs("monitor/rbac.yaml");
    let sa = the_one(&rbac, "ServiceAccount").unwrap();
    assert_eq!(user_of(sa), MONITOR_USER);
    assert_eq!(bindings_name_the_account(&rbac, sa), 2);
}

#[test]
fn the_monitor_sidecar_keeps_the_drivers_identity_and_volumes() {
    // As a sidecar, the monitor runs as the driver pod's account (the component binds the
    // monitor's roles to it): its patch neither replaces the account nor declares a volume.
    let patch = docs("components/monitor-sidecar/monitor-sidecar.yaml");
    let pod = &the_one(&patch, "Deployment").unwrap()["spec"]["template"]["spec"];
    let keys: Vec<&String> = pod.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["containers"], "the patch sets more than containers");
    let container = &pod["containers"][0];
    assert_eq!(pod["containers"].as_array().unwrap().len(), 1);
    assert!(!container["volumeMounts"].as_array().unwrap().is_empty());
    // The component's grants: the ClusterRole of monitor/rbac.yaml, and a Role with its rules.
    let rbac = docs("monitor/rbac.yaml");
    let component = docs("components/monitor-sidecar/rbac.yaml");
    let crb = the_one(&component, "ClusterRoleBinding").unwrap();
    let cluster_role = the_one(&rbac, "ClusterRole").unwrap();
    assert_eq!(crb["roleRef"]["name"], cluster_role["metadata"]["name"]);
    let rb = the_one(&component, "RoleBinding").unwrap();
    let role = the_one(&component, "Role").unwrap();
    assert_eq!(rb["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(role["rules"], the_one(&rbac, "Role").unwrap()["rules"]);
}

#[test]
fn the_agent_runs_as_the_account_its_binding_grants_and_its_policy_matches() {
    let rbac = docs("agent/rbac.yaml");
    let sa = the_one(&rbac, "ServiceAccount").unwrap();
    assert_eq!(bindings_name_the_account(&rbac, sa), 1);
    let ds = docs("agent/daemonset.yaml");
    let ds = the_one(&ds, "DaemonSet").unwrap();
    assert_eq!(ds["metadata"]["namespace"], sa["metadata"]["namespace"]);
    assert_eq!(
        ds["spec"]["template"]["spec"]["serviceAccountName"],
        sa["metadata"]["name"]
    );

    // The policy matches this account's writes (here: one it refuses) and no other account's.
    let policy = docs("agent/admission-policy.yaml");
    let policy =
        Policy::from_object(the_one(&policy, "ValidatingAdmissionPolicy").unwrap()).unwrap();
    let write = |username: &str| Request {
        request: json!({
            "resource": {"group": "storage.k8s.io", "version": "v1", "resource": "csinodes"},
            "subResource": "status",
            "name": "node-b",
            "operation": "UPDATE",
            "userInfo": {"username": username, "extra": {
                "authentication.kubernetes.io/node-name": ["node-a"]}},
        }),
        object: json!({"metadata": {"name": "node-b"}}),
        old_object: json!({"metadata": {"name": "node-b"}}),
    };
    assert!(matches!(
        policy.admit(&write(&user_of(sa))),
        Decision::Denied(_)
    ));
    assert_eq!(policy.admit(&write(MONITOR_USER)), Decision::NotMatched);
}

/// The rules of every Role and ClusterRole in `file`, and the file's text.
fn rules(file: &str) -> (Vec<Value>, String) {
    let text = std::fs::read_to_string(manifests::dir().join(file)).unwrap();
    let rules = docs(file)
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .flat_map(|r| r["rules"].as_array().unwrap().clone())
        .collect();
    (rules, text)
}

#[test]
fn every_rule_is_explained_and_names_no_wildcard() {
    for file in [
        "monitor/rbac.yaml",
        "agent/rbac.yaml",
        "components/monitor-sidecar/rbac.yaml",
    ] {
        let (rules, text) = rules(file);
        assert!(!rules.is_empty(), "{file}");
        for rule in &rules {
            for field in ["apiGroups", "resources", "verbs"] {
                let values = rule[field].as_array().unwrap();
                assert!(!values.is_empty(), "{file}: {rule}");
                assert!(
                    values.iter().all(|v| v != "*"),
                    "{file}: wildcard in {rule}"
                );
            }
            assert!(rule.get("nonResourceURLs").is_none(), "{file}: {rule}");
        }
        // Each rule's first line is right below a comment saying which call needs it.
        let lines: Vec<&str> = text.lines().collect();
        let starts: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].trim_start().starts_with("- apiGroups:"))
            .collect();
        assert_eq!(starts.len(), rules.len(), "{file}");
        for i in starts {
            assert!(
                i > 0 && lines[i - 1].trim_start().starts_with('#'),
                "{file}:{}: a rule without a comment above it",
                i + 1
            );
        }
    }
}

#[test]
fn the_agent_reads_the_kubelet_directories_read_only_at_their_host_paths() {
    let ds = docs("agent/daemonset.yaml");
    let spec = &the_one(&ds, "DaemonSet").unwrap()["spec"]["template"]["spec"];
    let container = &spec["containers"][0];
    let args = manifests::args(container).expect("the agent's args");
    // The image's single-component agent binary, which takes `volhealth agent`'s flags.
    assert_eq!(container["command"][0], "/usr/local/bin/volhealth-agent");
    assert!(!args.contains(&"agent"), "{args:?}");
    let root = args
        .iter()
        .find_map(|a| a.strip_prefix("--kubelet-root-dir="))
        .expect("--kubelet-root-dir");
    let volumes = spec["volumes"].as_array().unwrap();
    let mounts = container["volumeMounts"].as_array().unwrap();
    assert_eq!(mounts.len(), volumes.len(), "{mounts:?}");
    let mut paths = Vec::new();
    let mut node_faults = Vec::new();
    for v in volumes {
        let host = v["hostPath"]["path"]
            .as_str()
            .expect("only hostPath volumes");
        let mount = mounts
            .iter()
            .find(|m| m["name"] == v["name"])
            .unwrap_or_else(|| panic!("volume {} is not mounted", v["name"]));
        assert_eq!(mount["readOnly"], true, "{mount}");
        // Node fault detection's two files outside the kubelet's directories, exactly these.
        if !host.starts_with(&format!("{root}/")) {
            let at = mount["mountPath"].as_str().unwrap();
            node_faults.push((host, v["hostPath"]["type"].as_str().unwrap(), at));
            assert!(mount.get("mountPropagation").is_none(), "{mount}");
            continue;
        }
        assert_eq!(mount["mountPath"], host, "{mount}");
        assert!(
            host.starts_with(&format!("{root}/")),
            "{host} is outside {root}"
        );
        paths.push(host.strip_prefix(&format!("{root}/")).unwrap().to_string());
    }
    paths.sort();
    // What the agent reads: registration sockets, driver sockets and staging dirs, publish dirs.
    assert_eq!(paths, ["plugins", "plugins_registry", "pods"]);
    // The host's mount table (not under the container's /proc, and named first by --mountinfo)
    // and the kernel log.
    node_faults.sort();
    assert_eq!(
        node_faults,
        [
            ("/dev/kmsg", "CharDevice", "/dev/kmsg"),
            ("/proc/1/mountinfo", "File", "/host/proc/1/mountinfo"),
        ]
    );
    assert!(
        args.contains(&"--mountinfo=/host/proc/1/mountinfo,/proc/self/mountinfo"),
        "{args:?}"
    );
    // No host namespace, no privilege; one capability: SYSLOG, for /dev/kmsg.
    for host in ["hostPID", "hostIPC", "hostNetwork"] {
        assert!(spec.get(host).is_none(), "{host}");
    }
    let security = &container["securityContext"];
    assert!(security.get("privileged").is_none(), "{security}");
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(security["capabilities"]["add"], json!(["SYSLOG"]));
    // The kubelet's mounts of volumes reach the container, so that probes see them.
    for dir in ["plugins", "pods"] {
        let path = format!("{root}/{dir}");
        let mount = mounts.iter().find(|m| m["mountPath"] == path.as_str());
        assert_eq!(
            mount.unwrap()["mountPropagation"],
            "HostToContainer",
            "{path}"
        );
    }
    // NODE_NAME (the agent's --node-name) is the pod's own node.
    let env = container["env"].as_array().unwrap();
    let node = env
        .iter()
        .find(|e| e["name"] == "NODE_NAME")
        .expect("NODE_NAME");
    assert_eq!(node["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
    assert!(!args.iter().any(|a| a.starts_with("--node-name")));
}

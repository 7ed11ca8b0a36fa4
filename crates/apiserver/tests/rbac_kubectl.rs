//! kubectl against RBAC (`--authorization-mode Node,RBAC`): `apply -k` / `apply -f` of RBAC
//! objects and a ServiceAccount, tables, `auth whoami`, `auth can-i` (also `--list` and
//! `--subresource`) and `--as`. kubectl sends no bearer token over plain HTTP, so its own
//! requests are the anonymous administrator and the token users are reached with `--as`
//! (impersonation); refusals of impersonation are covered over raw HTTP in `reviews.rs`.
//! Skipped when kubectl is missing (fails under VOLHEALTH_REQUIRE_TOOLS=1).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use support::kubectl::Kubectl;

use std::path::Path;

/// A typical CSI sidecar RBAC file: a ServiceAccount, a ClusterRole and its binding, a Role
/// and a RoleBinding with a user and the service account.
const RBAC_YAML: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: monitor
  namespace: default
---
kind: ClusterRole
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: volhealth-monitor
rules:
  - apiGroups: [""]
    resources: ["persistentvolumeclaims"]
    verbs: ["get", "list", "watch"]
  - apiGroups: [""]
    resources: ["persistentvolumeclaims/status"]
    verbs: ["patch"]
  - apiGroups: [""]
    resources: ["events"]
    verbs: ["create", "patch"]
---
kind: ClusterRoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: volhealth-monitor
subjects:
  - kind: ServiceAccount
    name: monitor
    namespace: default
roleRef:
  kind: ClusterRole
  name: volhealth-monitor
  apiGroup: rbac.authorization.k8s.io
---
kind: Role
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: pod-reader
  namespace: default
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get", "list", "watch"]
---
kind: RoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: alice-reads
  namespace: default
subjects:
  - kind: User
    name: alice
    apiGroup: rbac.authorization.k8s.io
roleRef:
  kind: Role
  name: pod-reader
  apiGroup: rbac.authorization.k8s.io
"#;

fn setup(dir: &Path) -> Option<(support::ApiServer, Kubectl)> {
    if !support::kubectl::available() {
        return None;
    }
    let server = support::start_apiserver_with_tokens(
        dir,
        "admintok,admin,1,\"system:masters\"\nalicetok,alice,2\n",
        &["--anonymous-admin", "--authorization-mode", "Node,RBAC"],
    );
    let k = Kubectl::new(&server, dir);
    Some((server, k))
}

#[test]
fn kubectl_applies_rbac_and_asks_can_i_and_whoami() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_server, k)) = setup(dir.path()) else {
        return;
    };
    let base = dir.path().join("base");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("rbac.yaml"), RBAC_YAML).unwrap();
    std::fs::write(
        base.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - rbac.yaml\n",
    )
    .unwrap();
    let applied = k.ok(&["apply", "-k", base.to_str().unwrap()]);
    for want in [
        "serviceaccount/monitor created",
        "clusterrole.rbac.authorization.k8s.io/volhealth-monitor created",
        "clusterrolebinding.rbac.authorization.k8s.io/volhealth-monitor created",
        "role.rbac.authorization.k8s.io/pod-reader created",
        "rolebinding.rbac.authorization.k8s.io/alice-reads created",
    ] {
        assert!(applied.contains(want), "{want}: {applied}");
    }
    // A second apply with a changed rule patches the Role (client-side apply).
    let changed = RBAC_YAML.replace(
        "    resources: [\"pods\"]\n    verbs: [\"get\", \"list\", \"watch\"]",
        "    resources: [\"pods\"]\n    verbs: [\"get\", \"list\", \"watch\", \"delete\"]",
    );
    let file = dir.path().join("changed.yaml");
    std::fs::write(&file, &changed).unwrap();
    let again = k.ok(&["apply", "-f", file.to_str().unwrap()]);
    assert!(
        again.contains("role.rbac.authorization.k8s.io/pod-reader configured")
            && again.contains("rolebinding.rbac.authorization.k8s.io/alice-reads unchanged"),
        "{again}"
    );
    let wide = k.ok(&["get", "rolebindings", "-o", "wide"]);
    assert!(
        wide.contains("alice-reads") && wide.contains("Role/pod-reader") && wide.contains("alice"),
        "{wide}"
    );
    let sas = k.ok(&["get", "sa"]);
    assert!(sas.contains("monitor"), "{sas}");
    let described = k.ok(&["describe", "rolebinding", "alice-reads"]);
    assert!(
        described.contains("pod-reader") && described.contains("alice"),
        "{described}"
    );
    // Server-side apply of a ClusterRole, twice (the second changes a rule).
    let ssa = dir.path().join("ssa.yaml");
    let cluster_role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: ssa-role\nrules:\n  - apiGroups: [\"\"]\n    resources: [\"nodes\"]\n    verbs: [\"get\"]\n";
    std::fs::write(&ssa, cluster_role).unwrap();
    let out = k.ok(&["apply", "--server-side", "-f", ssa.to_str().unwrap()]);
    assert!(
        out.contains("clusterrole.rbac.authorization.k8s.io/ssa-role serverside-applied"),
        "{out}"
    );
    std::fs::write(
        &ssa,
        cluster_role.replace("[\"get\"]", "[\"get\", \"list\"]"),
    )
    .unwrap();
    k.ok(&["apply", "--server-side", "-f", ssa.to_str().unwrap()]);
    let verbs = k.ok(&[
        "get",
        "clusterrole",
        "ssa-role",
        "-o",
        "jsonpath={.rules[0].verbs}",
    ]);
    assert_eq!(verbs, "[\"get\",\"list\"]");
    let crs = k.ok(&["get", "clusterroles"]);
    assert!(
        crs.contains("cluster-admin") && crs.contains("system:basic-user"),
        "{crs}"
    );

    // The roleRef of a binding cannot change.
    let moved = changed.replace(
        "  kind: Role\n  name: pod-reader",
        "  kind: ClusterRole\n  name: volhealth-monitor",
    );
    std::fs::write(&file, &moved).unwrap();
    let refused = k.fails(&["apply", "-f", file.to_str().unwrap()]);
    assert!(refused.contains("cannot change roleRef"), "{refused}");

    // Who kubectl is, and who it is with --as.
    let me = k.ok(&["auth", "whoami"]);
    assert!(
        me.contains("system:unsecured") && me.contains("system:masters"),
        "{me}"
    );
    let alice = k.ok(&["auth", "whoami", "--as", "alice"]);
    assert!(
        alice.contains("alice")
            && alice.contains("system:authenticated")
            && !alice.contains("system:masters"),
        "{alice}"
    );

    // can-i for alice (through --as) and for the service account.
    assert_eq!(
        k.ok(&["auth", "can-i", "list", "pods", "--as", "alice"])
            .trim(),
        "yes"
    );
    assert_eq!(
        k.ok(&["auth", "can-i", "delete", "pods", "--as", "alice"])
            .trim(),
        "yes"
    );
    let no = k.run(&["auth", "can-i", "create", "pods", "--as", "alice"]);
    assert_eq!(String::from_utf8_lossy(&no.stdout).trim(), "no");
    assert_eq!(no.status.code(), Some(1), "can-i exits 1 on no");
    let no = k.run(&[
        "auth",
        "can-i",
        "list",
        "pods",
        "--as",
        "alice",
        "-n",
        "kube-system",
    ]);
    assert_eq!(String::from_utf8_lossy(&no.stdout).trim(), "no");
    let sa = "system:serviceaccount:default:monitor";
    assert_eq!(
        k.ok(&[
            "auth",
            "can-i",
            "patch",
            "persistentvolumeclaims",
            "--subresource=status",
            "--as",
            sa,
            "-n",
            "kube-system"
        ])
        .trim(),
        "yes"
    );
    let no = k.run(&[
        "auth",
        "can-i",
        "patch",
        "persistentvolumeclaims",
        "--as",
        sa,
    ]);
    assert_eq!(String::from_utf8_lossy(&no.stdout).trim(), "no");
    assert_eq!(
        k.ok(&["auth", "can-i", "get", "/healthz", "--as", "alice"])
            .trim(),
        "yes"
    );
    let list = k.ok(&["auth", "can-i", "--list", "--as", "alice"]);
    assert!(
        list.contains("pods") && list.contains("selfsubjectaccessreviews"),
        "{list}"
    );

    // kubectl --as: alice's rights and only those.
    k.ok(&["get", "pods", "--as", "alice"]);
    let denied = k.fails(&["get", "pods", "--as", "alice", "-n", "kube-system"]);
    assert!(
        denied.contains("Error from server (Forbidden): pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-system\""),
        "{denied}"
    );
}

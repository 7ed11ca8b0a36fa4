//! kubectl's typed generators send protobuf bodies (`kubectl create namespace|secret|
//! serviceaccount|role|rolebinding|clusterrole|clusterrolebinding`): the server reads them and
//! stores the same JSON a JSON body would give; `kubectl explain` reads `/openapi/v3`. Skipped when kubectl is missing (fails under
//! VOLHEALTH_REQUIRE_TOOLS=1).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::json;
use support::kubectl::Kubectl;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_sends_protobuf_and_it_is_stored() {
    let Some((_dir, server, kubectl)) = Kubectl::start(&[]) else {
        return;
    };
    let api = Api::new(&server.url);
    let k = |args: &[&str]| kubectl.ok(args);

    k(&["create", "namespace", "team-a"]);
    let ns = api.get("/api/v1/namespaces/team-a").await;
    assert_eq!(ns.code, 200, "{}", ns.json);
    assert_eq!(ns.json["metadata"]["name"], "team-a");

    k(&[
        "create",
        "secret",
        "generic",
        "s",
        "-n",
        "team-a",
        "--from-literal=a=b",
        "--from-literal=c=d",
    ]);
    let s = api.get("/api/v1/namespaces/team-a/secrets/s").await.json;
    assert_eq!(s["data"], json!({"a": "Yg==", "c": "ZA=="}), "{s}");
    assert_eq!(s["type"], "Opaque");
    let out = k(&[
        "get",
        "secret",
        "s",
        "-n",
        "team-a",
        "-o",
        "jsonpath={.data.a}",
    ]);
    assert_eq!(out, "Yg==");

    k(&["create", "serviceaccount", "robot", "-n", "team-a"]);
    let sa = api
        .get("/api/v1/namespaces/team-a/serviceaccounts/robot")
        .await;
    assert_eq!(sa.code, 200, "{}", sa.json);

    k(&[
        "create",
        "role",
        "reader",
        "-n",
        "team-a",
        "--verb=get,list",
        "--resource=persistentvolumeclaims",
    ]);
    let role = api
        .get("/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles/reader")
        .await
        .json;
    assert_eq!(role["rules"][0]["verbs"], json!(["get", "list"]), "{role}");
    assert_eq!(
        role["rules"][0]["resources"],
        json!(["persistentvolumeclaims"]),
        "{role}"
    );

    k(&[
        "create",
        "rolebinding",
        "reader",
        "-n",
        "team-a",
        "--role=reader",
        "--user=alice",
        "--serviceaccount=team-a:robot",
    ]);
    let rb = api
        .get("/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/reader")
        .await
        .json;
    assert_eq!(rb["roleRef"]["name"], "reader", "{rb}");
    assert_eq!(rb["subjects"].as_array().unwrap().len(), 2, "{rb}");

    k(&[
        "create",
        "clusterrole",
        "pv-reader",
        "--verb=get",
        "--resource=persistentvolumes",
    ]);
    k(&[
        "create",
        "clusterrolebinding",
        "pv-reader",
        "--clusterrole=pv-reader",
        "--group=ops",
    ]);
    let crb = api
        .get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/pv-reader")
        .await
        .json;
    assert_eq!(crb["subjects"][0]["name"], "ops", "{crb}");

    // The normal path still runs: a second create is a conflict, and a bad name is refused.
    for (args, refusal) in [
        (["create", "namespace", "team-a"], "AlreadyExists"),
        (["create", "namespace", "Bad_Name"], "Invalid"),
    ] {
        let out = kubectl.run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(refusal), "{stderr}");
    }

    // `kubectl run` builds a typed Pod (kubectl 1.32 sends it as JSON; the server reads it in
    // either encoding).
    k(&[
        "run",
        "web",
        "-n",
        "team-a",
        "--image=busybox:1.36",
        "--restart=Never",
        "--labels=app=web",
        "--env=MODE=fast",
        "--port=8080",
        "--",
        "sleep",
        "3600",
    ]);
    let pod = api.get("/api/v1/namespaces/team-a/pods/web").await.json;
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["image"], "busybox:1.36", "{pod}");
    assert_eq!(c["args"], json!(["sleep", "3600"]), "{pod}");
    assert_eq!(
        c["env"],
        json!([{"name": "MODE", "value": "fast"}]),
        "{pod}"
    );
    assert_eq!(c["ports"][0]["containerPort"], 8080, "{pod}");
    assert_eq!(pod["spec"]["restartPolicy"], "Never", "{pod}");
    assert_eq!(pod["metadata"]["labels"], json!({"app": "web"}), "{pod}");
}

/// `kubectl explain` reads `/openapi/v3` and the group-version documents, down to the health
/// fields of KEP-1432.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reaches_the_health_fields() {
    let Some((_dir, _server, kubectl)) = Kubectl::start(&[]) else {
        return;
    };
    let k = |args: &[&str]| kubectl.ok(args);
    let out = k(&["explain", "pvc.status.healthStatus"]);
    assert!(
        out.contains("healthConditions") && out.contains("lastTransitionTime"),
        "{out}"
    );
    let out = k(&["explain", "pvc.status.healthStatus.healthConditions.status"]);
    assert!(out.contains("Inaccessible"), "{out}");
    let out = k(&["explain", "pod.status.volumeHealth"]);
    assert!(
        out.contains("pod.spec.volumes") && out.contains("healthConditions"),
        "{out}"
    );
    let out = k(&["explain", "csinode.status.storageHealth"]);
    assert!(
        out.contains("StorageHealth") || out.contains("CSI driver"),
        "{out}"
    );
    let out = k(&["explain", "csinode.status.storageHealth.healthConditions"]);
    assert!(out.contains("StorageUnreachable"), "{out}");
}

/// `fieldValidation`: Strict (kubectl's default) refuses unknown fields naming them, Warn keeps
/// the request with a Warning header, Ignore says nothing; no mode stores them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_are_refused_warned_or_dropped_and_never_stored() {
    let (dir, server, api) = start_server(&[]);
    let mut body = pvc("strict");
    body["spec"]["foo"] = json!("bar");
    let r = api
        .post(&format!("{PVCS}?fieldValidation=Strict"), &body)
        .await;
    assert_eq!(r.code, 400);
    assert!(
        r.message().contains("unknown field \"spec.foo\""),
        "{}",
        r.json
    );
    assert_eq!(api.get(&format!("{PVCS}/strict")).await.code, 404);

    let r = api.post(PVCS, &body).await;
    assert_eq!(r.code, 201);
    assert_eq!(
        r.warnings.first().map(String::as_str),
        Some("299 - \"unknown field \\\"spec.foo\\\"\"")
    );
    let stored = api.get(&format!("{PVCS}/strict")).await.json;
    assert!(stored["spec"].get("foo").is_none(), "{stored}");

    let mut put = stored.clone();
    put["spec"]["bar"] = json!(1);
    let r = api
        .put(&format!("{PVCS}/strict?fieldValidation=Ignore"), &put)
        .await;
    assert_eq!(r.code, 200);
    assert!(r.warnings.is_empty());
    assert!(
        api.get(&format!("{PVCS}/strict")).await.json["spec"]
            .get("bar")
            .is_none()
    );
    let r = api
        .put(&format!("{PVCS}/strict?fieldValidation=Loose"), &put)
        .await;
    assert_eq!(r.code, 400);

    if !support::kubectl::available() {
        return;
    }
    let file = dir.path().join("pvc.yaml");
    std::fs::write(&file, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: applied\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  foo: bar\n  resources:\n    requests:\n      storage: 1Gi\n").unwrap();
    let kubectl = Kubectl::new(&server, dir.path());
    let run = |args: &[&str]| kubectl.run(args);
    let f = file.to_str().unwrap();
    // kubectl's default `--validate=true` asks for Strict, as `--validate=strict` does.
    for validate in ["--validate=strict", "--validate=true"] {
        let strict = run(&["apply", validate, "-f", f]);
        assert!(!strict.status.success());
        let err = String::from_utf8_lossy(&strict.stderr);
        assert!(err.contains("unknown field \"spec.foo\""), "{err}");
    }
    let warn = run(&["apply", "--validate=warn", "-f", f]);
    assert!(
        warn.status.success(),
        "{}",
        String::from_utf8_lossy(&warn.stderr)
    );
    let err = String::from_utf8_lossy(&warn.stderr);
    assert!(err.contains("unknown field \"spec.foo\""), "{err}");
    assert!(
        api.get(&format!("{PVCS}/applied")).await.json["spec"]
            .get("foo")
            .is_none()
    );
}

/// Sends a patch of `content_type` to `path`, under `fieldValidation=MODE` when `validation` is
/// `Some(MODE)`: the status, the Warning headers and the answer.
async fn send_patch(
    api: &Api,
    path: &str,
    validation: Option<&str>,
    content_type: &str,
    body: &serde_json::Value,
) -> (u16, Vec<String>, serde_json::Value) {
    let path = match validation {
        Some(mode) => format!("{path}?fieldValidation={mode}"),
        None => path.to_string(),
    };
    let a = api.patch(&path, content_type, body).await;
    (a.code, a.warnings, a.json)
}

/// `fieldValidation` on PATCH: a merge, strategic or JSON patch is applied and the patched object
/// is checked as a create body is, on the object and on its status subresource: Strict refuses
/// naming every unknown field, Warn answers a Warning per field, Ignore says nothing, and no mode
/// stores them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_are_field_validated_and_unknown_fields_never_stored() {
    let (dir, server, api) = start_server(&[]);
    api.create(PVCS, &pvc("p")).await;
    let claim = format!("{PVCS}/p");
    let stored = || async { api.get(&format!("{PVCS}/p")).await.json };

    let merge = json!({"metadata": {"labels": {"a": "1"}, "bogus": 1}, "spec": {"foo": "x"}});
    let strategic = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"foo": "x", "bar": 2}});
    let jsonpatch = json!([
        {"op": "add", "path": "/metadata/labels", "value": {"a": "1"}},
        {"op": "add", "path": "/spec/foo", "value": "x"},
        {"op": "add", "path": "/spec/bar", "value": 2}
    ]);
    for (ct, body, unknown) in [
        (MERGE, &merge, &["metadata.bogus", "spec.foo"][..]),
        (STRATEGIC, &strategic, &["spec.bar", "spec.foo"][..]),
        (JSONPATCH, &jsonpatch, &["spec.bar", "spec.foo"][..]),
    ] {
        let (code, _, status) = send_patch(&api, &claim, Some("Strict"), ct, body).await;
        assert_eq!(code, 400, "{ct}: {status}");
        let msg = status["message"].as_str().unwrap();
        for f in unknown {
            assert!(
                msg.contains(&format!("unknown field \"{f}\"")),
                "{ct}: {msg}"
            );
        }
        // Refused whole: not even the known label is kept.
        assert!(stored().await["metadata"].get("labels").is_none(), "{ct}");

        let (code, warnings, obj) = send_patch(&api, &claim, None, ct, body).await;
        assert_eq!(code, 200, "{ct}: {obj}");
        let mut want: Vec<String> = unknown
            .iter()
            .map(|f| format!("299 - \"unknown field \\\"{f}\\\"\""))
            .collect();
        let mut got = warnings.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{ct}");
        assert!(obj["spec"].get("foo").is_none(), "{ct}: {obj}");
        let s = stored().await;
        assert_eq!(s["metadata"]["labels"]["a"], "1", "{ct}: {s}");
        assert!(
            s["spec"].get("foo").is_none() && s["spec"].get("bar").is_none(),
            "{ct}: {s}"
        );
        assert!(s["metadata"].get("bogus").is_none(), "{ct}: {s}");

        let (code, warnings, _) = send_patch(&api, &claim, Some("Ignore"), ct, body).await;
        assert_eq!(code, 200, "{ct}");
        assert!(warnings.is_empty(), "{ct}: {warnings:?}");
        assert!(stored().await["spec"].get("foo").is_none(), "{ct}");
        // Back to no labels for the next patch type.
        let (code, _, _) = send_patch(
            &api,
            &claim,
            None,
            JSONPATCH,
            &json!([{"op": "remove", "path": "/metadata/labels"}]),
        )
        .await;
        assert_eq!(code, 200);
    }

    // The status subresource: the same checks on the patched status.
    let status = json!({"status": {"phase": "Bound", "healthStatus": {"healthConditions": [
        {"status": "Degraded", "reason": "Slow", "extra": true}]}}});
    let claim_status = format!("{claim}/status");
    let (code, _, answer) = send_patch(&api, &claim_status, Some("Strict"), MERGE, &status).await;
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"status.healthStatus.healthConditions[0].extra\""),
        "{answer}"
    );
    let s = stored().await;
    assert_ne!(s["status"]["phase"], "Bound", "{s}");
    assert!(s["status"].get("healthStatus").is_none(), "{s}");
    let (code, warnings, _) = send_patch(&api, &claim_status, None, MERGE, &status).await;
    assert_eq!(code, 200);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let s = stored().await;
    assert_eq!(s["status"]["phase"], "Bound", "{s}");
    assert_eq!(
        s["status"]["healthStatus"]["healthConditions"][0]["reason"], "Slow",
        "{s}"
    );
    assert!(
        s["status"]["healthStatus"]["healthConditions"][0]
            .get("extra")
            .is_none(),
        "{s}"
    );
    let (code, _, _) = send_patch(&api, &claim, Some("Loose"), MERGE, &merge).await;
    assert_eq!(code, 400);

    if !support::kubectl::available() {
        return;
    }
    let kubectl = Kubectl::new(&server, dir.path());
    let run = |args: &[&str]| kubectl.run(args);
    // kubectl 1.32's `patch` has no --validate and sends no fieldValidation: the server's
    // default, Warn, which kubectl prints.
    let patch = r#"{"spec":{"foo":"x"}}"#;
    for ty in ["merge", "strategic"] {
        let out = run(&["patch", "pvc", "p", "--type", ty, "-p", patch]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{ty}: {err}");
        assert!(
            err.contains("Warning: unknown field \"spec.foo\""),
            "{ty}: {err}"
        );
    }
    assert!(stored().await["spec"].get("foo").is_none());
}

//! `fieldValidation` on server-side apply (`application/apply-patch+yaml`), over HTTP and with
//! `kubectl apply --server-side --validate=...`: Strict refuses a body naming a field the kind
//! lacks (and one repeating a key), Warn answers a Warning per field, Ignore says nothing; in no
//! mode is the field stored or named in the manager's `managedFields` entry. The kubectl test is
//! skipped when kubectl is missing (fails under VOLHEALTH_REQUIRE_TOOLS=1).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::{Value, json};
use support::kubectl::Kubectl;

const APPLY: &str = "application/apply-patch+yaml";

/// Applies `yaml` to `path` as manager `m`, under `fieldValidation=MODE` when `validation` is
/// `Some(MODE)`.
async fn apply(api: &Api, path: &str, validation: Option<&str>, yaml: &str) -> Answer {
    let mut path = format!("{path}?fieldManager=m");
    if let Some(mode) = validation {
        path.push_str(&format!("&fieldValidation={mode}"));
    }
    api.raw("PATCH", &path, Some(APPLY), None, yaml.as_bytes().to_vec())
        .await
}

/// A PVC apply body with `label` and the unknown `metadata.bogus` and `spec.foo`.
fn pvc_yaml(name: &str, label: &str) -> String {
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\n  bogus: 1\n  labels:\n    {label}: \"1\"\nspec:\n  accessModes: [ReadWriteOnce]\n  foo: bar\n  resources:\n    requests:\n      storage: 1Gi\n"
    )
}

/// The field set `manager` holds on the main resource (`subresource` "").
fn field_set(obj: &Value, manager: &str, subresource: &str) -> Value {
    let entries = obj["metadata"]["managedFields"].as_array().unwrap();
    let e = entries
        .iter()
        .find(|e| e["manager"] == manager && e["subresource"].as_str().unwrap_or("") == subresource)
        .unwrap_or_else(|| panic!("no entry for {manager}: {obj}"));
    assert_eq!(e["operation"], "Apply", "{e}");
    e["fieldsV1"].clone()
}

/// What manager `m` owns after applying [`pvc_yaml`] with `label`: the unknown fields are not in it.
fn pvc_set(label: &str) -> Value {
    json!({
        "f:metadata": {"f:labels": {format!("f:{label}"): {}}},
        "f:spec": {"f:accessModes": {}, "f:resources": {"f:requests": {"f:storage": {}}}}
    })
}

fn warning(text: &str) -> String {
    format!("299 - \"{}\"", text.replace('"', "\\\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_in_an_apply_are_refused_warned_or_dropped_and_never_owned() {
    let (_dir, _server, api) = start_server(&[]);
    let target = |name: &str| format!("{PVCS}/{name}");

    // Strict, on create: refused naming both fields, nothing stored.
    let a = apply(&api, &target("s"), Some("Strict"), &pvc_yaml("s", "a")).await;
    assert_eq!(a.code, 400, "{}", a.json);
    assert_eq!(a.json["kind"], "Status", "{}", a.json);
    let msg = a.message();
    for f in [".spec.foo", ".metadata.bogus"] {
        assert!(
            msg.contains(&format!("{f}: field not declared in schema")),
            "{msg}"
        );
    }
    assert!(
        msg.starts_with(
            "failed to create typed patch object (default/s; /v1, Kind=PersistentVolumeClaim)"
        ),
        "{msg}"
    );
    assert_eq!(api.get(&format!("{PVCS}/s")).await.code, 404);

    // Strict, on an existing object: refused whole, the label is not applied and the manager's
    // field set is unchanged.
    let clean = pvc_yaml("s", "a")
        .replace("  bogus: 1\n", "")
        .replace("  foo: bar\n", "");
    let a = apply(&api, &target("s"), Some("Strict"), &clean).await;
    assert_eq!(a.code, 201, "{}", a.json);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    let a = apply(&api, &target("s"), Some("Strict"), &pvc_yaml("s", "b")).await;
    assert_eq!(a.code, 400, "{}", a.json);
    let s = api.get(&format!("{PVCS}/s")).await.json;
    assert_eq!(s["metadata"]["labels"], json!({"a": "1"}), "{s}");
    assert_eq!(field_set(&s, "m", ""), pvc_set("a"), "{s}");

    // Warn (the default) and Ignore, on create and then on update: accepted, the fields dropped
    // from the object and from the manager's field set; Warn names each in a Warning.
    for (name, validation, warned) in [("w", None, true), ("i", Some("Ignore"), false)] {
        for (label, code) in [("a", 201), ("b", 200)] {
            let a = apply(&api, &target(name), validation, &pvc_yaml(name, label)).await;
            assert_eq!(a.code, code, "{name}: {}", a.json);
            let mut got = a.warnings.clone();
            got.sort();
            let want: Vec<String> = if warned {
                vec![
                    warning("unknown field \"metadata.bogus\""),
                    warning("unknown field \"spec.foo\""),
                ]
            } else {
                Vec::new()
            };
            assert_eq!(got, want, "{name}");
            let s = api.get(&format!("{PVCS}/{name}")).await.json;
            assert!(s["spec"].get("foo").is_none(), "{name}: {s}");
            assert!(s["metadata"].get("bogus").is_none(), "{name}: {s}");
            assert_eq!(s["spec"]["resources"]["requests"]["storage"], "1Gi");
            // The label of the previous apply is gone: ownership came from the pruned body.
            assert_eq!(s["metadata"]["labels"], json!({label: "1"}), "{name}: {s}");
            assert_eq!(field_set(&s, "m", ""), pvc_set(label), "{name}: {s}");
            assert_eq!(
                a.json["metadata"]["managedFields"],
                s["metadata"]["managedFields"]
            );
        }
    }
}

/// The status subresource of a pod, with unknown fields inside list entries keyed by merge key:
/// the entries are applied and owned, the unknown fields are neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_inside_applied_status_lists_are_pruned_before_ownership() {
    let (_dir, _server, api) = start_server(&[]);
    api.create(PODS, &pod("p", "n1", "data")).await;
    let target = format!("{PODS}/p/status");
    let body = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nstatus:\n  volumeHealth:\n  - name: data\n    extra: 1\n    healthConditions:\n    - status: Degraded\n      reason: Slow\n      severity: high\n";
    let path = "status.volumeHealth[0].healthConditions[0].severity";

    let a = apply(&api, &target, Some("Strict"), body).await;
    assert_eq!(a.code, 400, "{}", a.json);
    let msg = a.message();
    assert!(
        msg.contains(&format!(".{path}: field not declared in schema")),
        "{msg}"
    );
    assert!(
        msg.contains(".status.volumeHealth[0].extra: field not declared in schema"),
        "{msg}"
    );
    let s = api.get(&format!("{PODS}/p")).await.json;
    assert!(s["status"].get("volumeHealth").is_none(), "{s}");

    let a = apply(&api, &target, None, body).await;
    assert_eq!(a.code, 200, "{}", a.json);
    let mut got = a.warnings.clone();
    got.sort();
    let mut want = vec![
        warning(&format!("unknown field \"{path}\"")),
        warning("unknown field \"status.volumeHealth[0].extra\""),
    ];
    want.sort();
    assert_eq!(got, want);
    let s = api.get(&format!("{PODS}/p")).await.json;
    assert_eq!(
        s["status"]["volumeHealth"],
        json!([{"name": "data", "healthConditions": [{"status": "Degraded", "reason": "Slow"}]}]),
        "{s}"
    );
    assert_eq!(
        field_set(&s, "m", "status"),
        json!({"f:metadata": {}, "f:status": {"f:volumeHealth": {"k:{\"name\":\"data\"}": {
            "f:name": {},
            "f:healthConditions": {}
        }}}}),
        "{s}"
    );
}

/// A key repeated in the YAML: Strict refuses it naming the key, Warn keeps the last value and
/// says so, Ignore keeps the last value silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_key_in_an_apply_is_refused_under_strict_and_the_last_wins_otherwise() {
    let (_dir, _server, api) = start_server(&[]);
    let target = format!("{PVCS}/d");
    let body = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: d\nspec:\n  volumeName: first\n  accessModes: [ReadWriteOnce]\n  volumeName: second\n  resources:\n    requests:\n      storage: 1Gi\n";

    let a = apply(&api, &target, Some("Strict"), body).await;
    assert_eq!(a.code, 400, "{}", a.json);
    let msg = a.message();
    assert!(msg.contains("duplicate field \"spec.volumeName\""), "{msg}");
    assert_eq!(api.get(&format!("{PVCS}/d")).await.code, 404);

    let a = apply(&api, &target, None, body).await;
    assert_eq!(a.code, 201, "{}", a.json);
    assert_eq!(
        a.warnings,
        vec![warning("duplicate field \"spec.volumeName\"")]
    );
    assert_eq!(
        api.get(&format!("{PVCS}/d")).await.json["spec"]["volumeName"],
        "second"
    );

    let a = apply(
        &api,
        &target,
        Some("Ignore"),
        &body.replace("second", "third"),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.json);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert_eq!(
        api.get(&format!("{PVCS}/d")).await.json["spec"]["volumeName"],
        "third"
    );
}

/// `kubectl apply --server-side` with each `--validate`: strict fails naming the field and stores
/// nothing; warn prints the warning; ignore prints nothing; neither stores the field nor lets
/// kubectl's field manager own it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_validates_fields() {
    let Some((dir, server, kubectl)) = Kubectl::start(&[]) else {
        return;
    };
    let api = Api::new(&server.url);
    let file = dir.path().join("pvc.yaml");
    std::fs::write(&file, pvc_yaml("k", "a").replace("  bogus: 1\n", "")).unwrap();
    let file = file.to_str().unwrap();
    let run = |validate: &str| kubectl.run(&["apply", "--server-side", validate, "-f", file]);
    let strict = run("--validate=strict");
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(!strict.status.success(), "{err}");
    assert!(
        err.contains(".spec.foo: field not declared in schema"),
        "{err}"
    );
    assert_eq!(api.get(&format!("{PVCS}/k")).await.code, 404);

    for (validate, warned) in [("--validate=warn", true), ("--validate=ignore", false)] {
        let out = run(validate);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{validate}: {err}");
        assert_eq!(
            err.contains("Warning: unknown field \"spec.foo\""),
            warned,
            "{validate}: {err}"
        );
        let s = api.get(&format!("{PVCS}/k")).await.json;
        assert!(s["spec"].get("foo").is_none(), "{validate}: {s}");
        let set = field_set(&s, "kubectl", "");
        assert!(set["f:spec"].get("f:foo").is_none(), "{validate}: {set}");
        assert!(
            set["f:spec"].get("f:accessModes").is_some(),
            "{validate}: {set}"
        );
    }
}

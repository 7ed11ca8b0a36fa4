//! Property test of the refusal shapes: generated inputs kube-apiserver refuses (bad strategic
//! merge directives, list entries without their merge key, PUT without a name, bad
//! DeleteOptions, invalid quantities, names and labels, huge annotations, bad query parameters)
//! each get a 4xx `Status` of the expected code, and nothing stored changes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Cases per run; `VOLHEALTH_PROPTEST_CASES` raises it.
fn cases() -> u32 {
    std::env::var("VOLHEALTH_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

/// One refused request: method, path, content type, body, and the codes kube-apiserver answers.
#[derive(Debug, Clone)]
struct Refused {
    method: &'static str,
    path: String,
    content_type: &'static str,
    body: Value,
    codes: &'static [u16],
}

impl Refused {
    /// A refused request with a JSON body.
    fn json(
        method: &'static str,
        path: impl Into<String>,
        body: Value,
        codes: &'static [u16],
    ) -> Refused {
        Refused {
            method,
            path: path.into(),
            content_type: "application/json",
            body,
            codes,
        }
    }

    /// A strategic merge patch of pod `app`, refused with 400 or 422.
    fn strategic_patch(body: Value) -> Refused {
        Refused {
            method: "PATCH",
            path: format!("{PODS}/app"),
            content_type: STRATEGIC,
            body,
            codes: &[400, 422],
        }
    }
}

fn refused() -> impl Strategy<Value = Refused> {
    let word = "[a-z]{1,8}";
    prop_oneof![
        // A strategic merge directive that does not exist.
        word.prop_filter("not a directive", |w| !matches!(
            w.as_str(),
            "delete" | "replace" | "merge"
        ))
        .prop_map(|w| Refused::strategic_patch(
            json!({"spec": {"containers": [{"name": "c", "$patch": w}]}})
        )),
        // A list entry without its merge key.
        word.prop_map(|w| Refused::strategic_patch(
            json!({"spec": {"containers": [{"image": w}]}})
        )),
        // PUT without a name.
        Just(Refused::json(
            "PUT",
            format!("{PVCS}/data"),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {}}),
            &[400]
        )),
        // DeleteOptions with a propagation policy that does not exist.
        word.prop_filter("not a policy", |w| !matches!(
            w.as_str(),
            "Orphan" | "Background" | "Foreground"
        ))
        .prop_map(|w| Refused::json(
            "DELETE",
            format!("{PVCS}/data"),
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": w}),
            &[400, 422]
        )),
        // A quantity that does not parse.
        "[a-z]{1,4}[!@#]{1,2}".prop_map(|q| {
            let mut b = pvc("q");
            b["spec"]["resources"]["requests"]["storage"] = json!(q);
            Refused::json("POST", PVCS, b, &[400, 422])
        }),
        // A name that is not a DNS subdomain.
        "[A-Z_]{1,3}[a-z]{0,4}".prop_map(|n| Refused::json("POST", PVCS, pvc(&n), &[422])),
        // A label value with characters labels cannot hold.
        "[a-z]{1,4}[ /!]{1,2}[a-z]{1,4}".prop_map(|v| {
            let mut b = pvc("labelled");
            b["metadata"]["labels"] = json!({"app": v});
            Refused::json("POST", PVCS, b, &[422])
        }),
        // Annotations over 256 KiB in all.
        (257usize..400).prop_map(|kib| {
            let mut b = pvc("annotated");
            b["metadata"]["annotations"] = json!({"big": "a".repeat(kib * 1024)});
            Refused::json("POST", PVCS, b, &[422])
        }),
        // Query parameters with values that do not exist.
        word.prop_map(|w| Refused::json("POST", format!("{PVCS}?dryRun={w}"), pvc("dry"), &[400])),
        word.prop_map(|w| Refused::json(
            "POST",
            format!("{PVCS}?fieldValidation={w}"),
            pvc("fv"),
            &[400]
        )),
    ]
}

async fn stored(api: &Api) -> Vec<Value> {
    let mut out = Vec::new();
    for path in [PVCS, PODS] {
        let list = api.get(path).await.json;
        out.extend(list["items"].as_array().cloned().unwrap_or_default());
    }
    out
}

#[test]
fn refused_inputs_get_a_status_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let api = Api::new(&server.url);
    rt.block_on(async {
        assert_eq!(api.post(PVCS, &pvc("data")).await.code, 201);
        assert_eq!(
            api.post(PODS, &pod("app", "node-a", "data")).await.code,
            201
        );
    });
    let before = rt.block_on(stored(&api));
    let config = ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    };
    proptest!(config, |(r in refused())| {
        let answer = rt.block_on(api.raw(r.method, &r.path, Some(r.content_type), None,
            serde_json::to_vec(&r.body).unwrap()));
        prop_assert!(r.codes.contains(&answer.code), "{} {}: {} {}", r.method, r.path, answer.code, answer.text);
        prop_assert_eq!(answer.json["kind"].as_str(), Some("Status"), "{}", answer.text);
        prop_assert_eq!(answer.json["code"].as_u64(), Some(u64::from(answer.code)));
        let after = rt.block_on(stored(&api));
        prop_assert_eq!(&after, &before, "{} {} changed what is stored", r.method, r.path);
    });
}

//! Property test of the refusal shapes: generated inputs kube-apiserver refuses (bad strategic
//! merge directives, list entries without their merge key, PUT without a name, bad
//! DeleteOptions, invalid quantities, names and labels, huge annotations, bad query parameters)
//! each get a 4xx `Status` of the expected code, and nothing stored changes; and a fixed list of
//! inputs kube-apiserver refuses, each refused with a `Status` naming the field.
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
    let (_dir, _server, api) = start_server(&[]);
    let rt = volhealth_testkit::runtime();
    rt.block_on(async {
        api.create(PVCS, &pvc("data")).await;
        api.create(PODS, &pod("app", "node-a", "data")).await;
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

/// Inputs kube-apiserver refuses, each with the field its Status must name.
fn fixed_refusals() -> Vec<(Refused, &'static str)> {
    let event = |name: &str| {
        json!({"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "app", "namespace": "default"},
            "reason": "R", "message": "m", "type": "Normal"})
    };
    let events = "/api/v1/namespaces/default/events";
    let mut number_version = pvc("numbered");
    number_version["apiVersion"] = json!(1);
    let delete = |query: &str| Refused {
        method: "DELETE",
        path: format!("{PVCS}/data?{query}"),
        content_type: "application/json",
        body: Value::Null,
        codes: &[400, 422],
    };
    vec![
        (
            Refused::json("POST", PVCS, number_version, &[400]),
            "apiVersion",
        ),
        (
            Refused::strategic_patch(json!({"spec": {"$setElementOrder/volumes": "notalist"}})),
            "$setElementOrder/volumes",
        ),
        (
            Refused::strategic_patch(json!({"spec": {"$setElementOrder/volumes": [{"nope": 1}]}})),
            "$setElementOrder/volumes",
        ),
        (
            Refused::strategic_patch(
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}),
            ),
            "$deleteFromPrimitiveList/finalizers",
        ),
        (
            Refused::strategic_patch(
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [{"a": 1}]}}),
            ),
            "$deleteFromPrimitiveList/finalizers",
        ),
        (
            Refused::json("POST", events, event(&"x".repeat(300)), &[422]),
            "metadata.name",
        ),
        (
            Refused::json("POST", events, event("ñ"), &[422]),
            "metadata.name",
        ),
        (
            Refused::json(
                "POST",
                CSINODES,
                json!({"metadata": {"name": "node-x"}, "spec": {"drivers": [{"name": "d.example.com", "nodeID": "node-x"}]},
                    "status": {"storageHealth": [{"healthConditions": []}]}}),
                &[400, 422],
            ),
            "status.storageHealth[0].name",
        ),
        (
            Refused::json(
                "POST",
                CSINODES,
                json!({"metadata": {"name": "node-y"}, "spec": {"drivers": []}, "status": "broken"}),
                &[400, 422],
            ),
            "status",
        ),
        (
            Refused {
                method: "PATCH",
                path: format!("{PVCS}/data"),
                content_type: MERGE,
                body: json!({"metadata": {"resourceVersion": 5}}),
                codes: &[400, 422],
            },
            "metadata.resourceVersion",
        ),
        (delete("gracePeriodSeconds=-5"), "gracePeriodSeconds"),
        (delete("gracePeriodSeconds=abc"), "gracePeriodSeconds"),
        (delete("propagationPolicy=Bogus"), "propagationPolicy"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_refusals_name_the_field() {
    let (_dir, _server, api) = start_server(&[]);
    api.create(PVCS, &pvc("data")).await;
    api.create(PODS, &pod("app", "node-a", "data")).await;
    let before = stored(&api).await;
    for (r, field) in fixed_refusals() {
        let body = if r.body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&r.body).unwrap()
        };
        let answer = api
            .raw(r.method, &r.path, Some(r.content_type), None, body)
            .await;
        let what = format!("{} {} {}", r.method, r.path, r.body);
        assert!(
            r.codes.contains(&answer.code),
            "{what}: {} {}",
            answer.code,
            answer.text
        );
        assert_eq!(answer.json["kind"], "Status", "{what}: {}", answer.text);
        assert_eq!(
            answer.json["code"].as_u64(),
            Some(u64::from(answer.code)),
            "{what}"
        );
        assert!(
            answer.text.contains(field),
            "{what}: the Status must name {field}: {}",
            answer.text
        );
    }
    assert_eq!(
        stored(&api).await,
        before,
        "a refused request changed nothing"
    );
    assert_eq!(
        api.get("/apis/storage.k8s.io/v1/csinodes").await.json["items"],
        json!([]),
        "no CSINode was created"
    );
    assert_eq!(
        api.get("/api/v1/namespaces/default/events").await.json["items"],
        json!([]),
        "no Event was created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_authorization_header_is_401_with_a_status() {
    let (_dir, server, _api) =
        start_server_with_tokens("admintok,admin,1,\"system:masters\"\n", &[]);
    for header in [
        "Bearer  admintok x",
        "Bearer admintok x",
        "Basic YTpi",
        "Bearer",
    ] {
        let r = reqwest::Client::new()
            .get(format!("{}{PVCS}", server.url))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401, "{header:?}");
        let v: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(
            (v["kind"].as_str(), v["code"].as_u64(), v["reason"].as_str()),
            (Some("Status"), Some(401), Some("Unauthorized")),
            "{header:?}: {v}"
        );
    }
    // Sent as is, without a client library tidying it.
    for header in ["Bearer  admintok x", "Bearer\tadmintok"] {
        let answer = support::send_as_is(
            &server,
            &format!(
                "GET {PVCS} HTTP/1.1\r\nHost: x\r\nAuthorization: {header}\r\nConnection: close\r\n\r\n"
            ),
        );
        assert!(answer.starts_with("HTTP/1.1 401"), "{header:?}: {answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        assert!(
            body.contains("\"kind\":\"Status\"") && body.contains("\"code\":401"),
            "{header:?}: {answer}"
        );
    }
    // A control character does not even parse as a header (kube-apiserver's HTTP server refuses
    // it with a 400 too): still a Status body.
    let answer = support::send_as_is(
        &server,
        &format!("GET {PVCS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admintok\u{7f}\r\n\r\n"),
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("\"kind\":\"Status\"") && answer.contains("\"code\":400"),
        "{answer}"
    );
    // The well-formed header still authenticates.
    let r = reqwest::Client::new()
        .get(format!("{}{PVCS}", server.url))
        .header("authorization", "Bearer admintok")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

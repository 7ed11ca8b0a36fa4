//! `pods/binding`, as kube-scheduler uses it: sets spec.nodeName once, refuses a second binding,
//! a binding to nothing and any verb but create.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_bound_to_a_node_once() {
    let (_dir, _server, api) = start_server(&[]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = api.create(PODS, &pod).await;
    let uid = created.json["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let binding = |node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "uid": uid},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    };
    let path = format!("{PODS}/p/binding");

    let empty = api.post(&path, &binding("")).await;
    assert_eq!(empty.code, 400, "{}", empty.text);
    let bound = api.create(&path, &binding("node-1")).await;
    assert_eq!(bound.json["status"], "Success");
    let pod = api.get(&format!("{PODS}/p")).await;
    assert_eq!(pod.json["spec"]["nodeName"], "node-1");

    let again = api.post(&path, &binding("node-2")).await;
    assert_eq!(again.code, 409, "{}", again.text);
    let pod = api.get(&format!("{PODS}/p")).await;
    assert_eq!(pod.json["spec"]["nodeName"], "node-1");

    let missing = api
        .post(&format!("{PODS}/nope/binding"), &binding("node-1"))
        .await;
    assert_eq!(missing.code, 404, "{}", missing.text);
    let get = api.get(&path).await;
    assert_eq!(get.code, 405, "{}", get.text);
}

//! Discovery documents: legacy (`APIVersions`, `APIGroupList`, `APIResourceList`) and, only when
//! the client offers `v=v2`, aggregated `apidiscovery.k8s.io/v2`.

use crate::registry::{self, ResourceDef};
use serde_json::{Value, json};

/// The Content-Type of an aggregated discovery answer.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the Accept header offers aggregated discovery v2.
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
    })
}

/// The short names and categories of `r` (kubectl's `po`, `all`), on its discovery entry `v`.
fn add_aliases(v: &mut Value, r: &ResourceDef) {
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
}

fn legacy_resource(r: &ResourceDef) -> Value {
    let mut v = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs(),
    });
    add_aliases(&mut v, r);
    v
}

/// `GET /api/v1` or `GET /apis/{g}/{v}`.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let defs: Vec<&ResourceDef> = registry::in_group_version(group, version).collect();
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for r in &defs {
        resources.push(legacy_resource(r));
        if r.has_status {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.plural == "pods" && r.group.is_empty() {
            resources.push(json!({
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": true,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }));
            resources.push(json!({
                "name": "pods/binding",
                "singularName": "",
                "namespaced": true,
                "kind": "Binding",
                "verbs": ["create"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// `GET /api` (legacy).
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn api_group(group: &str) -> Option<Value> {
    let (g, v) = registry::group_versions()
        .into_iter()
        .find(|(g, _)| *g == group && !g.is_empty())?;
    let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
    Some(json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv}))
}

/// `GET /apis/{g}`.
pub fn group(group: &str) -> Option<Value> {
    let mut g = api_group(group)?;
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// `GET /apis` (legacy).
pub fn group_list() -> Value {
    let groups: Vec<Value> = registry::group_versions()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .filter_map(|(g, _)| api_group(g))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn aggregated_resource(r: &ResourceDef) -> Value {
    let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let mut v = json!({
        "resource": r.plural,
        "responseKind": kind,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs(),
    });
    add_aliases(&mut v, r);
    if r.has_status {
        v["subresources"] = json!([{"subresource": "status", "responseKind": kind, "verbs": ["get", "patch", "update"]}]);
    }
    if r.plural == "pods"
        && r.group.is_empty()
        && let Some(subs) = v["subresources"].as_array_mut()
    {
        subs.push(json!({"subresource": "eviction",
            "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "verbs": ["create"]}));
        subs.push(json!({"subresource": "binding",
            "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
            "verbs": ["create"]}));
    }
    v
}

/// Aggregated discovery for `/api` (`core` true) or `/apis`.
pub fn aggregated(core: bool) -> Value {
    let items: Vec<Value> = registry::group_versions()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, v)| {
            let resources: Vec<Value> = registry::in_group_version(g, v)
                .map(aggregated_resource)
                .collect();
            json!({
                "metadata": {"name": g, "creationTimestamp": null},
                "versions": [{"version": v, "resources": resources, "freshness": "Current"}],
            })
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

/// `GET /version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "37",
        "emulationMajor": "1",
        "emulationMinor": "37",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "36",
        "gitVersion": "v1.37.0-volhealth",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, match std::env::consts::ARCH { "x86_64" => "amd64", "aarch64" => "arm64", a => a }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_and_documents() {
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
        ));
        let core = resource_list("", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"persistentvolumeclaims/status"));
        assert!(names.contains(&"pods/eviction"));
        assert!(names.contains(&"pods/binding"));
        assert!(
            resource_list("storage.k8s.io", "v1").unwrap()["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "csinodes/status")
        );
        let groups: Vec<Value> = aggregated(false)["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].clone())
            .collect();
        assert_eq!(
            groups,
            [
                "events.k8s.io",
                "storage.k8s.io",
                "coordination.k8s.io",
                "rbac.authorization.k8s.io",
                "policy",
                "authentication.k8s.io",
                "authorization.k8s.io"
            ]
        );
        let reviews = resource_list("authorization.k8s.io", "v1").unwrap();
        assert!(
            reviews["resources"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["verbs"] == json!(["create"]))
        );
    }
}

//! Validation of the RBAC objects as kube-apiserver does it for the essentials: policy rules
//! (verbs; API groups and resources, or non-resource URLs on ClusterRoles only), roleRef (API
//! group, kind, name; immutable) and subjects (User, Group, ServiceAccount).

use crate::errors::{ApiError, Cause};
use crate::kinds::names::name_of;
use crate::registry::ResourceDef;
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
use serde::Deserialize;
use serde_json::Value;

const GROUP: &str = "rbac.authorization.k8s.io";

fn decode<T: serde::de::DeserializeOwned>(obj: &Value, kind: &str) -> Result<T, ApiError> {
    T::deserialize(obj).map_err(|e| ApiError::bad_request(format!("error decoding {kind}: {e}")))
}

fn quoted(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", items.join(", "))
}

#[derive(Deserialize)]
struct Rules {
    #[serde(default)]
    rules: Option<Vec<PolicyRule>>,
}

fn rules(obj: &Value, def: &ResourceDef, causes: &mut Vec<Cause>) -> Result<(), ApiError> {
    let namespaced = def.namespaced;
    let r: Rules = decode(obj, def.kind)?;
    for (i, rule) in r.rules.iter().flatten().enumerate() {
        let path = format!("rules[{i}]");
        if rule.verbs.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.verbs"),
                "Required value: verbs must contain at least one value",
            ));
        }
        let urls = rule.non_resource_urls.as_deref().unwrap_or(&[]);
        let groups = rule.api_groups.as_deref().unwrap_or(&[]);
        let resources = rule.resources.as_deref().unwrap_or(&[]);
        let names = rule.resource_names.as_deref().unwrap_or(&[]);
        if !urls.is_empty() {
            if namespaced {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("{path}.nonResourceURLs"),
                    format!(
                        "Invalid value: {}: namespaced rules cannot apply to non-resource URLs",
                        quoted(urls)
                    ),
                ));
            }
            if !groups.is_empty() || !resources.is_empty() || !names.is_empty() {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("{path}.nonResourceURLs"),
                    format!(
                        "Invalid value: {}: rules cannot apply to both regular resources and non-resource URLs",
                        quoted(urls)
                    ),
                ));
            }
            continue;
        }
        if groups.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.apiGroups"),
                "Required value: resource rules must supply at least one api group",
            ));
        }
        if resources.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.resources"),
                "Required value: resource rules must supply at least one resource",
            ));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct Binding {
    #[serde(rename = "roleRef")]
    role_ref: Option<RoleRef>,
    #[serde(default)]
    subjects: Option<Vec<Subject>>,
}

fn not_supported(field: String, value: &str, allowed: &[&str]) -> Cause {
    let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
    Cause::new(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: \"{value}\": supported values: {}",
            list.join(", ")
        ),
    )
}

fn binding(obj: &Value, def: &ResourceDef, causes: &mut Vec<Cause>) -> Result<(), ApiError> {
    let b: Binding = decode(obj, def.kind)?;
    let kinds: &[&str] = if def.namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    match &b.role_ref {
        None => causes.push(Cause::new(
            "FieldValueRequired",
            "roleRef",
            "Required value",
        )),
        Some(r) => {
            let api_group = r.api_group.as_deref().unwrap_or("");
            if api_group != GROUP {
                causes.push(not_supported(
                    "roleRef.apiGroup".into(),
                    api_group,
                    &[GROUP],
                ));
            }
            if r.kind.is_empty() {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    "roleRef.kind",
                    "Required value",
                ));
            } else if !kinds.contains(&r.kind.as_str()) {
                causes.push(not_supported("roleRef.kind".into(), &r.kind, kinds));
            }
            if r.name.is_empty() {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    "roleRef.name",
                    "Required value",
                ));
            } else if r.name == "." || r.name == ".." || r.name.contains(['/', '%']) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "roleRef.name",
                    format!(
                        "Invalid value: \"{}\": may not be '.' or '..' and may not contain '/' or '%'",
                        r.name
                    ),
                ));
            }
        }
    }
    for (i, s) in b.subjects.iter().flatten().enumerate() {
        let path = format!("subjects[{i}]");
        if s.name.is_empty() {
            causes.push(Cause::new(
                "FieldValueRequired",
                format!("{path}.name"),
                "Required value",
            ));
        }
        let api_group = s.api_group.as_deref().unwrap_or("");
        match s.kind.as_str() {
            "ServiceAccount" => {
                if !api_group.is_empty() {
                    causes.push(not_supported(format!("{path}.apiGroup"), api_group, &[""]));
                }
                if !def.namespaced && s.namespace.as_deref().unwrap_or("").is_empty() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("{path}.namespace"),
                        "Required value",
                    ));
                }
            }
            "User" | "Group" => {
                if api_group != GROUP {
                    causes.push(not_supported(
                        format!("{path}.apiGroup"),
                        api_group,
                        &[GROUP],
                    ));
                }
            }
            other => causes.push(not_supported(
                format!("{path}.kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
    Ok(())
}

/// Adds the causes of an invalid Role, ClusterRole, RoleBinding or ClusterRoleBinding.
pub fn check(obj: &Value, def: &ResourceDef, causes: &mut Vec<Cause>) -> Result<(), ApiError> {
    if def.kind.ends_with("Binding") {
        binding(obj, def, causes)
    } else {
        rules(obj, def, causes)
    }
}

/// Refuses an update that changes a binding's roleRef (422), as kube-apiserver does: delete and
/// recreate the binding instead.
pub fn check_update(def: &ResourceDef, old: &Value, new: &Value) -> Result<(), ApiError> {
    if !def.kind.ends_with("Binding") || old.get("roleRef") == new.get("roleRef") {
        return Ok(());
    }
    let name = name_of(new);
    let value = new.get("roleRef").cloned().unwrap_or(Value::Null);
    Err(ApiError::invalid(
        def.group,
        def.kind,
        name,
        vec![Cause::new(
            "FieldValueInvalid",
            "roleRef",
            format!("Invalid value: {value}: cannot change roleRef"),
        )],
    ))
}

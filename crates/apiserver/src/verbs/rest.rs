//! The resource verbs: get, list, create, update, patch (four types), delete and
//! deletecollection; watch is in `watch`.

use crate::errors::ApiError;
use crate::http::body::parse_body;
use crate::http::call::{Call, Verb};
use crate::http::response::{json_response, list_response, render_one};
use crate::http::state::AppState;
use crate::kinds::convert;
use crate::kinds::field_validation;
use crate::kinds::objects;
use crate::kinds::patch::{self, PatchType, apply};
use crate::registry::{self, ResourceDef};
use crate::security::authz::{self, Attributes, Binding, Request, User, review_wire, reviews};
use crate::storage::store::Outcome;
use crate::verbs::query::select;
use crate::wire::request::Target;
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;

fn authorize(st: &AppState, c: &Call) -> Result<(), ApiError> {
    let Some(user) = &c.user else { return Ok(()) };
    let def = c.target.def;
    // A create names its object in the body; only the node authorizer looks at it.
    let body_name = if c.verb == Verb::Create && user.node_name().is_some() {
        parse_body(c)
            .ok()
            .and_then(|b| {
                b.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default()
    } else {
        String::new()
    };
    let attrs = Attributes {
        verb: c.verb.authz_name(),
        group: def.group,
        resource: def.plural,
        subresource: c.target.sub.as_deref().unwrap_or(""),
        namespace: &c.target.ns,
        name: if c.verb == Verb::Create && c.target.sub.is_none() {
            &body_name
        } else {
            c.name()
        },
    };
    st.authorizer.authorize(
        &st.store,
        user,
        &Request::Resource(attrs),
        Binding::Lookup(&st.store),
    )
}

/// Refuses, before the body is read or parsed, what no body could make allowed: the authorizer
/// is asked with the most permissive values a body or the store could still supply (for a
/// node's create, its own name; an object bound to the node). [`handle`] asks again with the
/// real ones.
pub(crate) fn authorize_before_body(
    st: &AppState,
    user: Option<&User>,
    target: &Target,
    verb: Verb,
) -> Result<(), ApiError> {
    let Some(user) = user else { return Ok(()) };
    let node = user.node_name();
    let name = match (verb, node) {
        (Verb::Create, Some(node)) if target.sub.is_none() => node,
        (Verb::Create, None) if target.sub.is_none() => "",
        _ => target.name.as_deref().unwrap_or(""),
    };
    let attrs = Attributes {
        verb: verb.authz_name(),
        group: target.def.group,
        resource: target.def.plural,
        subresource: target.sub.as_deref().unwrap_or(""),
        namespace: &target.ns,
        name,
    };
    st.authorizer.authorize(
        &st.store,
        user,
        &Request::Resource(attrs),
        Binding::Assume(node),
    )
}

/// Answers a review (SelfSubjectReview, the access reviews): only create is served, and nothing
/// is stored.
fn review(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    if c.verb != Verb::Create {
        return Err(ApiError::method_not_allowed(format!(
            "{} only supports create",
            c.target.def.plural
        )));
    }
    let anonymous = authz::anonymous();
    let user = c.user.as_ref().unwrap_or(&anonymous);
    let protobuf = c
        .content_type
        .trim()
        .to_ascii_lowercase()
        .starts_with(review_wire::CONTENT_TYPE);
    let mut body = if protobuf {
        review_wire::decode(&c.body)?
    } else {
        parse_body(c)?
    };
    objects::check_type(c.target.def, &mut body)?;
    let answer = match c.target.def.plural {
        "selfsubjectreviews" => reviews::self_subject_review(user, body),
        "selfsubjectaccessreviews" => {
            reviews::self_subject_access_review(&st.authorizer, &st.store, user, body)?
        }
        "subjectaccessreviews" => reviews::subject_access_review(&st.authorizer, &st.store, body)?,
        "selfsubjectrulesreviews" => {
            reviews::self_subject_rules_review(&st.authorizer, &st.store, user, body)
        }
        other => return Err(ApiError::internal(format!("no review handler for {other}"))),
    };
    Ok(json_response(201, &answer))
}

/// Runs one resource request.
pub async fn handle(st: Arc<AppState>, c: Call) -> Result<Response, ApiError> {
    authorize(&st, &c)?;
    if c.target.def.printer == registry::Printer::Review {
        return review(&st, &c);
    }
    if c.target.sub.as_deref() == Some("eviction") {
        if c.verb != Verb::Create {
            return Err(ApiError::method_not_allowed(
                "pods/eviction only supports create",
            ));
        }
        let st2 = st.clone();
        return tokio::task::spawn_blocking(move || crate::verbs::eviction::create(&st2, &c))
            .await
            .map_err(|e| ApiError::internal(format!("eviction task failed: {e}")))?;
    }
    crate::verbs::query::check_options(c.verb, &c.query)?;
    match c.verb {
        Verb::Get => get(&st, &c),
        Verb::List => list(&st, &c),
        Verb::Watch => crate::verbs::watch::start(
            st,
            &c.target,
            &c.query,
            &c.accept,
            c.user
                .as_ref()
                .map_or(crate::security::authz::ANONYMOUS, |u| u.name.as_str()),
        ),
        _ => {
            let st2 = st.clone();
            tokio::task::spawn_blocking(move || write(&st2, &c))
                .await
                .map_err(|e| ApiError::internal(format!("write task failed: {e}")))?
        }
    }
}

fn get(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    let def = c.target.def;
    let obj = st
        .store
        .get(&c.res(), &c.target.ns, c.name())
        .ok_or_else(|| ApiError::not_found(def.group, def.plural, c.name()))?;
    Ok(render_one(def, c, &obj, st.store.current_rv(), 200))
}

fn list(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    let (rv, items) = select(st, &c.target, &c.query)?;
    let chunk = crate::kinds::paging::chunk(rv, items, &c.query)?;
    Ok(list_response(
        c.target.def,
        c,
        chunk.resource_version,
        &chunk.items,
        chunk.more.as_ref(),
    ))
}

fn write(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    match c.verb {
        Verb::Create => create(st, c),
        Verb::Update => update(st, c),
        Verb::Patch(pt) => patch_object(st, c, pt),
        Verb::Delete => crate::verbs::deletion::delete(st, c),
        Verb::DeleteCollection => crate::verbs::deletion::delete_collection(st, c),
        _ => Err(ApiError::internal("not a write")),
    }
}

fn namespace_must_exist(st: &AppState, def: &ResourceDef, ns: &str) -> Result<(), ApiError> {
    if !def.namespaced {
        return Ok(());
    }
    if ns.is_empty() {
        return Err(ApiError::bad_request(
            "a namespace is required to create this resource",
        ));
    }
    let nsdef = registry::find("", "v1", "namespaces")
        .ok_or_else(|| ApiError::internal("namespaces not registered"))?;
    match st.store.get(&nsdef.store_name(), "", ns) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::forbidden(
            "",
            "namespaces",
            ns,
            format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )),
        Some(_) => Ok(()),
    }
}

fn create_object(st: &AppState, c: &Call, mut obj: Value, code: u16) -> Result<Response, ApiError> {
    let api_def = c.target.def;
    objects::check_type(api_def, &mut obj)?;
    let mut obj = convert::to_storage(api_def, obj);
    let def = convert::storage_def(api_def);
    let ns = c.target.ns.clone();
    namespace_must_exist(st, def, &ns)?;
    crate::kinds::validation::check_create_status(def, &obj)?;
    let name = objects::prepare_create(def, &mut obj, &ns)?;
    objects::admit(st.gates, def, None, &mut obj)?;
    if c.dry_run() {
        return Ok(json_response(code, &obj));
    }
    let w = st.store.mutate(&c.res(), &ns, &name, |old| {
        if old.is_some() {
            return Err(ApiError::already_exists(def.group, def.plural, &name));
        }
        Ok(Outcome::Put(obj))
    })?;
    let new = w
        .new
        .ok_or_else(|| ApiError::internal("create stored nothing"))?;
    Ok(render_one(api_def, c, &new, st.store.current_rv(), code))
}

/// Prunes the fields the kind lacks, as `fieldValidation` asks; the warnings to send.
fn validate_fields(c: &Call, obj: &mut Value) -> Result<Vec<String>, ApiError> {
    let mode = field_validation::Mode::parse(c.q("fieldValidation"))?;
    field_validation::check(c.target.def, mode, obj)
}

fn create(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    let mut obj = parse_body(c)?;
    if crate::verbs::binding::is_binding(c) {
        // A Binding, not a Pod: the pod's field checks do not apply to it.
        return crate::verbs::binding::bind(st, c, &obj);
    }
    let warnings = validate_fields(c, &mut obj)?;
    let mut resp = create_object(st, c, obj, 201)?;
    field_validation::add_warnings(&mut resp, &warnings);
    Ok(resp)
}

fn check_name(c: &Call, obj: &Value) -> Result<(), ApiError> {
    match obj.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != c.name() => Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({})",
            c.name()
        ))),
        _ => Ok(()),
    }
}

/// Commits `new` (built from `old`) unless nothing changed; finishes deletion when the last
/// finalizer of a terminating object goes away.
fn save(
    st: &AppState,
    old: &Value,
    mut new: Value,
    def: &ResourceDef,
) -> Result<Outcome, ApiError> {
    objects::admit(st.gates, def, Some(old), &mut new)?;
    if !objects::changed(old, &new) {
        return Ok(Outcome::Unchanged);
    }
    let terminating = new.pointer("/metadata/deletionTimestamp").is_some();
    let no_finalizers = new
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|f| f.is_empty());
    if terminating && no_finalizers {
        return Ok(Outcome::Delete);
    }
    Ok(Outcome::Put(new))
}

fn update(st: &AppState, c: &Call) -> Result<Response, ApiError> {
    let api_def = c.target.def;
    let def = convert::storage_def(api_def);
    let mut proposed = parse_body(c)?;
    // An update names its object: a body without a name would replace it with a nameless one.
    if proposed
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object () does not match the name on the URL ({})",
            c.name()
        )));
    }
    check_name(c, &proposed)?;
    let warnings = validate_fields(c, &mut proposed)?;
    objects::check_type(api_def, &mut proposed)?;
    let proposed = convert::to_storage(api_def, proposed);
    let name = c.name().to_string();
    let status_only = c.status_only();
    let w = st.store.mutate(&c.res(), &c.target.ns, &name, |old| {
        let old = old.ok_or_else(|| ApiError::not_found(def.group, def.plural, &name))?;
        if let Some(rv) = objects::resource_version(&proposed)
            && Some(rv) != objects::resource_version(old)
        {
            return Err(ApiError::conflict(def.group, def.plural, &name));
        }
        let mut new = objects::merge_update(def, old, proposed, status_only)?;
        if c.dry_run() {
            // A dry run answers what a real write would store: admitted (validated, with the
            // fields of disabled feature gates dropped), as kube-apiserver's dry run is.
            objects::admit(st.gates, def, Some(old), &mut new)?;
            return Err(dry_run_answer(new));
        }
        save(st, old, new, def)
    });
    let mut resp = finish(st, api_def, c, w, 200)?;
    field_validation::add_warnings(&mut resp, &warnings);
    Ok(resp)
}

fn dry_run_answer(obj: Value) -> ApiError {
    ApiError {
        code: 200,
        reason: "DryRun",
        message: String::new(),
        details: Some(obj),
    }
}

fn finish(
    st: &AppState,
    def: &ResourceDef,
    c: &Call,
    w: Result<crate::storage::store::Written, ApiError>,
    code: u16,
) -> Result<Response, ApiError> {
    match w {
        Ok(w) => {
            let obj = w
                .new
                .or(w.deleted)
                .ok_or_else(|| ApiError::not_found(def.group, def.plural, c.name()))?;
            Ok(render_one(def, c, &obj, st.store.current_rv(), code))
        }
        Err(e) if e.reason == "DryRun" => Ok(json_response(
            200,
            e.details.as_ref().unwrap_or(&Value::Null),
        )),
        Err(e) => Err(e),
    }
}

fn patch_object(st: &AppState, c: &Call, pt: PatchType) -> Result<Response, ApiError> {
    let api_def = c.target.def;
    let def = convert::storage_def(api_def);
    let name = c.name().to_string();
    if pt == PatchType::Apply && c.q("fieldManager").is_none() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions.meta.k8s.io",
            "",
            vec![crate::errors::Cause::new(
                "FieldValueRequired",
                "fieldManager",
                "Required value: is required for apply patch",
            )],
        ));
    }
    let status_only = c.status_only();
    let manager = c.q("fieldManager").unwrap_or("");
    let sub = c.target.sub.as_deref().unwrap_or("");
    // Parsed before the store is locked: a bad directive is refused whatever the object.
    let mode = field_validation::Mode::parse(c.q("fieldValidation"))?;
    let mut warnings = Vec::new();
    // An apply body is checked before it is merged: its unknown fields are then neither stored
    // nor part of the field set `managedFields` records for the manager.
    let applied = if pt == PatchType::Apply {
        let (mut a, duplicates) = patch::parse_yaml_noting_duplicates(&c.body)?;
        if !a.is_object() {
            return Err(ApiError::bad_request("an apply patch must be an object"));
        }
        let object = if c.target.ns.is_empty() {
            name.clone()
        } else {
            format!("{}/{name}", c.target.ns)
        };
        warnings = field_validation::check_apply(api_def, mode, &mut a, &duplicates, &object)?;
        Some(a)
    } else {
        None
    };
    let mut created = false;
    let w = st.store.mutate(&c.res(), &c.target.ns, &name, |old| {
        let Some(old) = old else {
            let (Some(a), false) = (&applied, status_only) else {
                return Err(ApiError::not_found(def.group, def.plural, &name));
            };
            let mut obj = a.clone();
            check_name(c, &obj)?;
            objects::check_type(api_def, &mut obj)?;
            let mut obj = convert::to_storage(api_def, obj);
            objects::metadata_mut(&mut obj)?.insert("name".into(), json!(name));
            namespace_must_exist(st, def, &c.target.ns)?;
            crate::kinds::validation::check_create_status(def, &obj)?;
            objects::prepare_create(def, &mut obj, &c.target.ns)?;
            objects::admit(st.gates, def, None, &mut obj)?;
            apply::record(api_def, &mut obj, a, manager, sub, &objects::now_rfc3339());
            created = true;
            if c.dry_run() {
                return Err(dry_run_answer(obj));
            }
            return Ok(Outcome::Put(obj));
        };
        let view = convert::from_storage(api_def, old);
        let patched = match &applied {
            Some(a) => apply::apply(api_def, &view, a, manager, sub)?,
            None => {
                // The patched result is what is checked: a JSON patch's paths, a merge patch's
                // keys and a strategic patch's directives all end up in it, and only there are
                // they fields of the kind or not.
                let mut patched = patch::apply(api_def, pt, &view, &c.body)?;
                warnings = field_validation::check(api_def, mode, &mut patched)?;
                patched
            }
        };
        // A number where a string belongs would otherwise be dropped silently (no precondition).
        objects::check_string_fields(&patched)?;
        let patched = convert::to_storage(api_def, patched);
        if let Some(rv) = objects::resource_version(&patched)
            && Some(rv) != objects::resource_version(old)
        {
            return Err(ApiError::conflict(def.group, def.plural, &name));
        }
        check_name(c, &patched)?;
        let mut new = objects::merge_update(def, old, patched, status_only)?;
        if let Some(a) = &applied {
            apply::record(api_def, &mut new, a, manager, sub, &objects::now_rfc3339());
        }
        if c.dry_run() {
            objects::admit(st.gates, def, Some(old), &mut new)?;
            return Err(dry_run_answer(new));
        }
        save(st, old, new, def)
    });
    let code = if created { 201 } else { 200 };
    let mut resp = finish(st, api_def, c, w, code)?;
    field_validation::add_warnings(&mut resp, &warnings);
    Ok(resp)
}

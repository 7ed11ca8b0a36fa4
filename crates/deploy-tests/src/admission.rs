//! A ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`) applied to one admission
//! request the way the API server applies it:
//!
//! 1. `matchConstraints.resourceRules`: the request's group, version, operation and
//!    resource (`resource/subresource`) must match one rule, else the policy does not apply;
//! 2. `matchConditions`: every one must be true, else the policy does not apply;
//! 3. `variables`, in order, each visible to the later ones as `variables.NAME`;
//! 4. `validations`: each must be true; a false one refuses the request with its
//!    `messageExpression` (or `message`).
//!
//! An expression that fails to evaluate refuses the request under `failurePolicy: Fail` and is
//! skipped under `Ignore`, as the API server does. The CEL variables are `request` (the
//! AdmissionRequest), `object`, `oldObject` (null for CREATE and DELETE respectively),
//! `variables`, and `params` and `namespaceObject`, which are always null here (the policies
//! checked take no params). `authorizer` is not provided.
//!
//! What the `cel` interpreter does not do that the API server does: it does not type-check an
//! expression against the objects' schemas when the policy is created (it is dynamically typed,
//! so only the paths the samples take are checked); it has no optional syntax (`obj.?field`,
//! `map[?key]`); and it has none of the Kubernetes CEL libraries (`authorizer`, `quantity`,
//! `url`, `ip`, `cidr`, `format`, regex `matches`, the string extensions). The agent's policy
//! uses none of them: it tests keys with `has()` and `in` instead of optional syntax.

use crate::{Error, Result};
use cel::{Context, Program, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// One admission request as the policy's expressions see it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The AdmissionRequest (`resource`, `subResource`, `operation`, `name`, `userInfo`, ...).
    pub request: serde_json::Value,
    /// The object after the write; null for DELETE.
    pub object: serde_json::Value,
    /// The stored object before the write; null for CREATE.
    pub old_object: serde_json::Value,
}

/// What the policy says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The policy does not apply (no resource rule or a false match condition).
    NotMatched,
    /// Every validation passed.
    Allowed,
    /// Refused, with the message of each failed validation (or evaluation error).
    Denied(Vec<String>),
}

#[derive(Debug, Clone)]
struct ResourceRule {
    groups: Vec<String>,
    versions: Vec<String>,
    operations: Vec<String>,
    resources: Vec<String>,
}

struct Compiled {
    name: String,
    source: String,
    program: Program,
}

struct Validation {
    check: Compiled,
    message: Option<String>,
    message_expression: Option<Compiled>,
}

/// A compiled policy.
pub struct Policy {
    fail_closed: bool,
    rules: Vec<ResourceRule>,
    match_conditions: Vec<Compiled>,
    variables: Vec<Compiled>,
    validations: Vec<Validation>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("fail_closed", &self.fail_closed)
            .field("rules", &self.rules)
            .field("validations", &self.validations.len())
            .finish_non_exhaustive()
    }
}

fn strings(v: &serde_json::Value, what: &str) -> Result<Vec<String>> {
    v.as_array()
        .ok_or_else(|| Error::Policy(format!("{what} is not a list")))?
        .iter()
        .map(|s| {
            s.as_str()
                .map(String::from)
                .ok_or_else(|| Error::Policy(format!("{what} holds a non-string")))
        })
        .collect()
}

fn compile(name: &str, source: &str) -> Result<Compiled> {
    let program = Program::compile(source)
        .map_err(|e| Error::Policy(format!("compiling {name} ({source:?}): {e}")))?;
    Ok(Compiled {
        name: name.to_string(),
        source: source.to_string(),
        program,
    })
}

fn expression(v: &serde_json::Value, what: &str) -> Result<String> {
    v["expression"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| Error::Policy(format!("{what} has no expression")))
}

impl Policy {
    /// Compiles the policy object (a ValidatingAdmissionPolicy as JSON).
    pub fn from_object(policy: &serde_json::Value) -> Result<Policy> {
        if policy["kind"] != "ValidatingAdmissionPolicy" {
            return Err(Error::Policy(format!("kind is {}", policy["kind"])));
        }
        let spec = &policy["spec"];
        let fail_closed = match spec["failurePolicy"].as_str() {
            None | Some("Fail") => true,
            Some("Ignore") => false,
            Some(other) => return Err(Error::Policy(format!("failurePolicy {other:?}"))),
        };
        let mut rules = Vec::new();
        let raw_rules = spec["matchConstraints"]["resourceRules"]
            .as_array()
            .ok_or_else(|| Error::Policy("no matchConstraints.resourceRules".into()))?;
        for r in raw_rules {
            rules.push(ResourceRule {
                groups: strings(&r["apiGroups"], "apiGroups")?,
                versions: strings(&r["apiVersions"], "apiVersions")?,
                operations: strings(&r["operations"], "operations")?,
                resources: strings(&r["resources"], "resources")?,
            });
        }
        let named = |list: &serde_json::Value, what: &str| -> Result<Vec<Compiled>> {
            let Some(items) = list.as_array() else {
                return Ok(Vec::new());
            };
            items
                .iter()
                .map(|c| {
                    let name = c["name"]
                        .as_str()
                        .ok_or_else(|| Error::Policy(format!("a {what} has no name")))?;
                    compile(&format!("{what} {name}"), &expression(c, what)?)
                })
                .collect()
        };
        let match_conditions = named(&spec["matchConditions"], "matchCondition")?;
        let variables = named(&spec["variables"], "variable")?;
        let mut validations = Vec::new();
        let raw_validations = spec["validations"]
            .as_array()
            .ok_or_else(|| Error::Policy("no validations".into()))?;
        for (i, v) in raw_validations.iter().enumerate() {
            let what = format!("validation {i}");
            validations.push(Validation {
                check: compile(&what, &expression(v, &what)?)?,
                message: v["message"].as_str().map(str::trim).map(String::from),
                message_expression: v["messageExpression"]
                    .as_str()
                    .map(|m| compile(&format!("{what} messageExpression"), m))
                    .transpose()?,
            });
        }
        Ok(Policy {
            fail_closed,
            rules,
            match_conditions,
            variables,
            validations,
        })
    }

    /// Applies the policy to `req`.
    pub fn admit(&self, req: &Request) -> Decision {
        if !self.rules.iter().any(|r| r.matches(&req.request)) {
            return Decision::NotMatched;
        }
        let mut ctx = match base_context(req) {
            Ok(ctx) => ctx,
            Err(e) => return Decision::Denied(vec![e.to_string()]),
        };
        let mut denials = Vec::new();
        for c in &self.match_conditions {
            match eval_bool(c, &ctx) {
                Ok(true) => {}
                Ok(false) => return Decision::NotMatched,
                Err(e) if self.fail_closed => return Decision::Denied(vec![e.to_string()]),
                Err(_) => return Decision::NotMatched,
            }
        }
        let mut values: HashMap<String, Value> = HashMap::new();
        for v in &self.variables {
            // The API server evaluates variables lazily: one that fails is an error only where a
            // later expression uses it, which then fails on the missing key here.
            if let Ok(value) = v.program.execute(&ctx) {
                let name = v.name.trim_start_matches("variable ").to_string();
                values.insert(name, value);
                ctx.add_variable_from_value("variables", Value::from(values.clone()));
            }
        }
        for v in &self.validations {
            match eval_bool(&v.check, &ctx) {
                Ok(true) => {}
                Ok(false) => denials.push(message(v, &ctx)),
                Err(e) if self.fail_closed => denials.push(e.to_string()),
                Err(_) => {}
            }
        }
        if denials.is_empty() {
            Decision::Allowed
        } else {
            Decision::Denied(denials)
        }
    }
}

impl ResourceRule {
    fn matches(&self, request: &serde_json::Value) -> bool {
        let s = |p: &str| request.pointer(p).and_then(|v| v.as_str()).unwrap_or("");
        let any = |list: &[String], value: &str| list.iter().any(|x| x == "*" || x == value);
        let (resource, sub) = (s("/resource/resource"), s("/subResource"));
        let full = if sub.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{sub}")
        };
        let resource_ok = self.resources.iter().any(|r| {
            r == "*" && sub.is_empty()
                || *r == full
                || r == "*/*"
                || (!sub.is_empty() && (*r == format!("{resource}/*") || *r == format!("*/{sub}")))
        });
        any(&self.groups, s("/resource/group"))
            && any(&self.versions, s("/resource/version"))
            && any(&self.operations, s("/operation"))
            && resource_ok
    }
}

/// Why a CEL expression gave no verdict; the text is the denial the API server would give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum CelFailure {
    /// A variable of the request could not be handed to the interpreter.
    #[error("passing {name} to CEL: {message}")]
    Bind {
        /// The variable.
        name: &'static str,
        /// The interpreter's words.
        message: String,
    },
    /// The expression gave something other than a bool.
    #[error("{name} ({expression}) gave {got}, not a bool")]
    NotBool {
        /// What the expression is (`validation 0`).
        name: String,
        /// The expression.
        expression: String,
        /// What it gave, debug-printed.
        got: String,
    },
    /// The expression failed.
    #[error("evaluating {name} ({expression}): {message}")]
    Eval {
        /// What the expression is.
        name: String,
        /// The expression.
        expression: String,
        /// The interpreter's words.
        message: String,
    },
}

fn base_context(req: &Request) -> std::result::Result<Context<'static, 'static>, CelFailure> {
    let mut ctx = Context::default();
    let add = |ctx: &mut Context<'static, 'static>, name: &'static str, v: &serde_json::Value| {
        ctx.add_variable(name, v.clone())
            .map_err(|e| CelFailure::Bind {
                name,
                message: e.to_string(),
            })
    };
    add(&mut ctx, "request", &req.request)?;
    add(&mut ctx, "object", &req.object)?;
    add(&mut ctx, "oldObject", &req.old_object)?;
    add(&mut ctx, "params", &serde_json::Value::Null)?;
    add(&mut ctx, "namespaceObject", &serde_json::Value::Null)?;
    ctx.add_variable_from_value("variables", Value::from(HashMap::<String, Value>::new()));
    Ok(ctx)
}

fn eval_bool(c: &Compiled, ctx: &Context<'_, '_>) -> std::result::Result<bool, CelFailure> {
    match c.program.execute(ctx) {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(other) => Err(CelFailure::NotBool {
            name: c.name.clone(),
            expression: c.source.clone(),
            got: format!("{other:?}"),
        }),
        Err(e) => Err(CelFailure::Eval {
            name: c.name.clone(),
            expression: c.source.clone(),
            message: e.to_string(),
        }),
    }
}

/// The message of a failed validation: its messageExpression when that gives a string, else its
/// message, else the expression (as the API server does).
fn message(v: &Validation, ctx: &Context<'_, '_>) -> String {
    if let Some(m) = &v.message_expression
        && let Ok(Value::String(s)) = m.program.execute(ctx)
    {
        return Arc::unwrap_or_clone(s);
    }
    v.message
        .clone()
        .unwrap_or_else(|| format!("failed expression: {}", v.check.source))
}

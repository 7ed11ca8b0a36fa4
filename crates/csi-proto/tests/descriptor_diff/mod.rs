//! Structural comparison of two compiled `csi.v1` descriptors, listing every
//! difference in words (names, numbers, types, labels, oneofs, options).

use std::collections::BTreeMap;

use prost::Message;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    FileDescriptorSet, ServiceDescriptorProto,
};
use protox::prost_reflect::{DescriptorPool, DynamicMessage, Value};

/// The file of package `package` in `set`, if there is exactly one.
pub fn file_of_package<'a>(
    set: &'a FileDescriptorSet,
    package: &str,
) -> Result<&'a FileDescriptorProto, String> {
    let found: Vec<_> = set.file.iter().filter(|f| f.package() == package).collect();
    match found.as_slice() {
        [one] => Ok(one),
        other => Err(format!(
            "expected one file of package {package}, found {}",
            other.len()
        )),
    }
}

/// Every structural difference between `released` and `ours`.
pub fn structural(released: &FileDescriptorProto, ours: &FileDescriptorProto) -> Vec<String> {
    let mut diff = Vec::new();
    let prefix = format!(".{}", released.package());
    compare_by_name(
        &mut diff,
        "service",
        &prefix,
        &released.service,
        &ours.service,
        |s| s.name(),
        compare_service,
    );
    compare_by_name(
        &mut diff,
        "message",
        &prefix,
        &released.message_type,
        &ours.message_type,
        |m| m.name(),
        compare_message,
    );
    compare_by_name(
        &mut diff,
        "enum",
        &prefix,
        &released.enum_type,
        &ours.enum_type,
        |e| e.name(),
        compare_enum,
    );
    compare_by_name(
        &mut diff,
        "extension",
        &prefix,
        &released.extension,
        &ours.extension,
        |f| f.name(),
        |diff, path, r, o| {
            check(diff, path, "extendee", r.extendee(), o.extendee());
            compare_field(diff, path, r, o, &[], &[]);
        },
    );
    diff
}

/// Pairs up items by name, reports missing and extra ones, and compares pairs.
fn compare_by_name<T>(
    diff: &mut Vec<String>,
    what: &str,
    parent: &str,
    released: &[T],
    ours: &[T],
    name: impl Fn(&T) -> &str,
    mut compare: impl FnMut(&mut Vec<String>, &str, &T, &T),
) {
    let ours_by_name: BTreeMap<&str, &T> = ours.iter().map(|o| (name(o), o)).collect();
    let released_names: Vec<&str> = released.iter().map(&name).collect();
    for r in released {
        let path = format!("{parent}.{}", name(r));
        match ours_by_name.get(name(r)) {
            Some(o) => compare(diff, &path, r, o),
            None => diff.push(format!("{what} {path}: missing from ours")),
        }
    }
    for o in ours {
        if !released_names.contains(&name(o)) {
            diff.push(format!(
                "{what} {parent}.{}: ours has it, the release does not",
                name(o)
            ));
        }
    }
}

fn check<T: PartialEq + std::fmt::Debug>(
    diff: &mut Vec<String>,
    path: &str,
    what: &str,
    released: T,
    ours: T,
) {
    if released != ours {
        diff.push(format!(
            "{path}: {what} differs: release {released:?}, ours {ours:?}"
        ));
    }
}

fn compare_service(
    diff: &mut Vec<String>,
    path: &str,
    r: &ServiceDescriptorProto,
    o: &ServiceDescriptorProto,
) {
    compare_by_name(
        diff,
        "method",
        path,
        &r.method,
        &o.method,
        |m| m.name(),
        |diff, path, r, o| {
            check(diff, path, "input type", r.input_type(), o.input_type());
            check(diff, path, "output type", r.output_type(), o.output_type());
            check(
                diff,
                path,
                "client streaming",
                r.client_streaming(),
                o.client_streaming(),
            );
            check(
                diff,
                path,
                "server streaming",
                r.server_streaming(),
                o.server_streaming(),
            );
        },
    );
}

/// Checks what a message or an enum reserves: number ranges and names. A macro, as the two
/// kinds' range types differ while their fields are named alike.
macro_rules! check_reserved {
    ($diff:expr, $path:expr, $r:expr, $o:expr) => {{
        let ranges: [Vec<(i32, i32)>; 2] = [$r, $o].map(|side| {
            side.reserved_range
                .iter()
                .map(|x| (x.start(), x.end()))
                .collect()
        });
        let [r_ranges, o_ranges] = ranges;
        check($diff, $path, "reserved ranges", r_ranges, o_ranges);
        let names = (&$r.reserved_name, &$o.reserved_name);
        check($diff, $path, "reserved names", names.0, names.1);
    }};
}

fn compare_message(diff: &mut Vec<String>, path: &str, r: &DescriptorProto, o: &DescriptorProto) {
    let map_entry = |m: &DescriptorProto| m.options.as_ref().is_some_and(|x| x.map_entry());
    check(diff, path, "map entry flag", map_entry(r), map_entry(o));
    let oneofs = |m: &DescriptorProto| -> Vec<String> {
        m.oneof_decl.iter().map(|d| d.name().to_string()).collect()
    };
    let (r_oneofs, o_oneofs) = (oneofs(r), oneofs(o));
    check(diff, path, "oneof names", &r_oneofs, &o_oneofs);
    compare_by_name(
        diff,
        "field",
        path,
        &r.field,
        &o.field,
        |f| f.name(),
        |diff, path, rf, of| compare_field(diff, path, rf, of, &r_oneofs, &o_oneofs),
    );
    check_reserved!(diff, path, r, o);
    compare_by_name(
        diff,
        "message",
        path,
        &r.nested_type,
        &o.nested_type,
        |m| m.name(),
        compare_message,
    );
    compare_by_name(
        diff,
        "enum",
        path,
        &r.enum_type,
        &o.enum_type,
        |e| e.name(),
        compare_enum,
    );
}

fn compare_field(
    diff: &mut Vec<String>,
    path: &str,
    r: &FieldDescriptorProto,
    o: &FieldDescriptorProto,
    r_oneofs: &[String],
    o_oneofs: &[String],
) {
    check(diff, path, "number", r.number(), o.number());
    check(diff, path, "type", r.r#type(), o.r#type());
    check(diff, path, "type name", r.type_name(), o.type_name());
    check(diff, path, "label", r.label(), o.label());
    check(
        diff,
        path,
        "proto3_optional",
        r.proto3_optional(),
        o.proto3_optional(),
    );
    let oneof = |f: &FieldDescriptorProto, names: &[String]| {
        f.oneof_index.map(|i| {
            names
                .get(i as usize)
                .cloned()
                .unwrap_or_else(|| format!("#{i}"))
        })
    };
    check(diff, path, "oneof", oneof(r, r_oneofs), oneof(o, o_oneofs));
}

fn compare_enum(
    diff: &mut Vec<String>,
    path: &str,
    r: &EnumDescriptorProto,
    o: &EnumDescriptorProto,
) {
    compare_by_name(
        diff,
        "enum value",
        path,
        &r.value,
        &o.value,
        |v| v.name(),
        |diff, path, rv, ov| check(diff, path, "number", rv.number(), ov.number()),
    );
    check_reserved!(diff, path, r, o);
}

/// Reads an encoded descriptor that is either a `FileDescriptorSet` or a
/// single `FileDescriptorProto` (the released file is the latter), returning
/// the file of `package`, as a set holding just that file.
pub fn decode_either(encoded: &[u8], package: &str) -> Result<FileDescriptorSet, String> {
    if let Ok(set) = FileDescriptorSet::decode(encoded)
        && let Ok(file) = file_of_package(&set, package)
    {
        return Ok(FileDescriptorSet {
            file: vec![file.clone()],
        });
    }
    let file = FileDescriptorProto::decode(encoded)
        .map_err(|e| format!("neither a FileDescriptorSet nor a FileDescriptorProto: {e}"))?;
    if file.package() != package {
        return Err(format!(
            "descriptor is of package {:?}, expected {package}",
            file.package()
        ));
    }
    Ok(FileDescriptorSet { file: vec![file] })
}

/// Builds a pool from encoded bytes (a set or a single file), taking the
/// well-known types from prost-reflect's global pool when they are missing.
/// Works on the raw bytes because prost-types drops extension options.
pub fn pool(encoded: &[u8]) -> Result<DescriptorPool, String> {
    if let Ok(pool) = DescriptorPool::decode(encoded) {
        return Ok(pool);
    }
    let mut pool = DescriptorPool::global();
    if pool.decode_file_descriptor_set(encoded).is_ok() {
        return Ok(pool);
    }
    let mut pool = DescriptorPool::global();
    pool.decode_file_descriptor_proto(encoded)
        .map_err(|e| format!("building a descriptor pool: {e}"))?;
    Ok(pool)
}

/// Custom options of package `package` (extensions set to true) on every
/// service, method, message, field, enum and enum value, keyed by element.
pub fn custom_options(pool: &DescriptorPool, package: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut record = |element: String, options: DynamicMessage| {
        let set: Vec<String> = options
            .extensions()
            .filter(|(ext, _)| ext.package_name() == package)
            .filter(|(_, value)| !matches!(value, Value::Bool(false)))
            .map(|(ext, value)| match value {
                Value::Bool(true) => ext.name().to_string(),
                other => format!("{}={other:?}", ext.name()),
            })
            .collect();
        if !set.is_empty() {
            out.insert(element, set);
        }
    };
    for service in pool.services().filter(|s| s.package_name() == package) {
        record(
            format!("service {}", service.full_name()),
            service.options(),
        );
        for method in service.methods() {
            record(format!("method {}", method.full_name()), method.options());
        }
    }
    for message in pool.all_messages().filter(|m| m.package_name() == package) {
        record(
            format!("message {}", message.full_name()),
            message.options(),
        );
        for field in message.fields() {
            record(format!("field {}", field.full_name()), field.options());
        }
    }
    for en in pool.all_enums().filter(|e| e.package_name() == package) {
        record(format!("enum {}", en.full_name()), en.options());
        for value in en.values() {
            record(format!("enum value {}", value.full_name()), value.options());
        }
    }
    out
}

/// Differences between two option maps from [`custom_options`].
pub fn options(
    released: &BTreeMap<String, Vec<String>>,
    ours: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let mut diff = Vec::new();
    let empty = Vec::new();
    let keys: std::collections::BTreeSet<&String> = released.keys().chain(ours.keys()).collect();
    for key in keys {
        let r = released.get(key).unwrap_or(&empty);
        let o = ours.get(key).unwrap_or(&empty);
        if r != o {
            diff.push(format!("{key}: options differ: release {r:?}, ours {o:?}"));
        }
    }
    diff
}

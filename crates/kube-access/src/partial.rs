//! Decoding watched objects into partial types: a component declares a type with only the fields it
//! reads, and every other field (managedFields, annotations, a pod's containers, a volume's
//! other sources) is skipped while decoding, never allocated. The decoders of the whole
//! k8s-openapi types are then not linked either, which for `Pod`, `PersistentVolume` and `Node`
//! is a good part of a sidecar's code.
//!
//! A partial type takes its metadata through [`slim_meta`] and gets its [`kube::Resource`]
//! identity from the whole type with [`resource_as!`](crate::resource_as), so an `Api`, a watch
//! or a reflector of it addresses the same resource.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};

#[doc(hidden)]
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as PartialMeta;
#[doc(hidden)]
pub use kube::Resource as PartialResource;

/// The identity and version of an object, and whether it is being deleted: all the writers
/// read of its metadata.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct SlimMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// Decodes `metadata` keeping only name, namespace, uid, resourceVersion and deletionTimestamp
/// (`#[serde(deserialize_with = "volhealth_kube_access::partial::slim_meta")]`).
pub fn slim_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = SlimMeta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        deletion_timestamp: m.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

/// [`slim_meta`], with the one annotation `key` kept when the object has it (every other
/// annotation is dropped after decoding).
pub fn slim_meta_keeping<'de, D: Deserializer<'de>>(
    d: D,
    key: &str,
) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Annotated {
        #[serde(flatten)]
        base: SlimMeta,
        annotations: Option<std::collections::BTreeMap<String, String>>,
    }
    let m = Annotated::deserialize(d)?;
    let kept = m
        .annotations
        .and_then(|mut a| a.remove_entry(key))
        .map(|(k, v)| std::collections::BTreeMap::from([(k, v)]));
    Ok(ObjectMeta {
        name: m.base.name,
        namespace: m.base.namespace,
        uid: m.base.uid,
        resource_version: m.base.resource_version,
        deletion_timestamp: m.base.deletion_timestamp,
        annotations: kept,
        ..ObjectMeta::default()
    })
}

/// Implements [`kube::Resource`] for a partial type (with a `metadata: ObjectMeta` field) by the
/// resource of the whole k8s-openapi type: `resource_as!(WatchedPod, Pod);`.
#[macro_export]
macro_rules! resource_as {
    ($partial:ty, $whole:ty) => {
        impl $crate::partial::PartialResource for $partial {
            type DynamicType = ();
            type Scope = <$whole as $crate::partial::PartialResource>::Scope;
            fn kind(dt: &()) -> ::std::borrow::Cow<'_, str> {
                <$whole as $crate::partial::PartialResource>::kind(dt)
            }
            fn group(dt: &()) -> ::std::borrow::Cow<'_, str> {
                <$whole as $crate::partial::PartialResource>::group(dt)
            }
            fn version(dt: &()) -> ::std::borrow::Cow<'_, str> {
                <$whole as $crate::partial::PartialResource>::version(dt)
            }
            fn plural(dt: &()) -> ::std::borrow::Cow<'_, str> {
                <$whole as $crate::partial::PartialResource>::plural(dt)
            }
            fn meta(&self) -> &$crate::partial::PartialMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut $crate::partial::PartialMeta {
                &mut self.metadata
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::Resource;

    #[derive(Debug, Clone, Default, Deserialize)]
    struct Named {
        #[serde(deserialize_with = "slim_meta")]
        metadata: ObjectMeta,
    }
    crate::resource_as!(Named, Pod);

    #[test]
    fn only_the_identity_is_kept_and_the_resource_is_the_whole_types() {
        let n: Named = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "labels": {"a": "b"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap();
        assert_eq!(n.metadata.name.as_deref(), Some("web"));
        assert_eq!(n.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(n.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(n.metadata.resource_version.as_deref(), Some("7"));
        assert!(n.metadata.labels.is_none() && n.metadata.managed_fields.is_none());
        assert_eq!(Named::plural(&()), "pods");
        assert_eq!(Named::kind(&()), "Pod");
        assert_eq!(Named::version(&()), "v1");
        assert_eq!(n.meta().uid.as_deref(), Some("u-1"));
    }
}

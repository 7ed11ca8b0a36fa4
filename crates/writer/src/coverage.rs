//! Which health source watches a driver's volumes, as the writers publish it for `volhealth
//! status`: the monitor on its driver's cluster-scoped CSIDriver ([`CONTROLLER_SOURCE`],
//! [`CONTROLLER_MODE`]), the agent on its own node's CSINode ([`NODE_SOURCES`]). Without it,
//! "no condition" on a volume nothing watches would read as healthy.
//!
//! The values are written with JSON merge patches of `metadata.annotations` alone, and only when
//! they differ from what the object holds ([`annotation_patch`]), so a steady cluster sees no
//! writes, also after a restart.

use std::collections::BTreeMap;

/// CSIDriver annotation: what answers for the driver's volumes on the controller side
/// (`health-rpcs`, `legacy-volume-condition`, `annotation` or `none`), set by the monitor.
pub const CONTROLLER_SOURCE: &str = "volhealth.io/controller-health-source";
/// CSIDriver annotation: how the monitor asks (`list`, `get`, `annotation` or `off`).
pub const CONTROLLER_MODE: &str = "volhealth.io/controller-health-mode";
/// CSINode annotation: a JSON object from each driver the agent has registered on the node to
/// what answers for its volumes there, e.g. `{"ebs.csi.aws.com":"node-faults",
/// "hostpath.csi.k8s.io":"health-rpcs"}`.
pub const NODE_SOURCES: &str = "volhealth.io/node-health-sources";

/// One source of volume health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The CSI v1.13 health RPCs of the driver.
    HealthRpcs,
    /// The legacy VOLUME_CONDITION shape, through the bridge.
    LegacyVolumeCondition,
    /// The storage system's PVC annotation (vSphere's), controller side only.
    Annotation,
}

impl Source {
    /// Every source, in the order `volhealth status` lists them.
    pub const ALL: [Source; 3] = [
        Source::HealthRpcs,
        Source::LegacyVolumeCondition,
        Source::Annotation,
    ];

    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::HealthRpcs => "health-rpcs",
            Source::LegacyVolumeCondition => "legacy-volume-condition",
            Source::Annotation => "annotation",
        }
    }

    /// The short word `volhealth status` prints.
    pub fn short(self) -> &'static str {
        match self {
            Source::HealthRpcs => "rpc",
            Source::LegacyVolumeCondition => "legacy",
            Source::Annotation => "annotation",
        }
    }

    fn parse(s: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// The value written when nothing answers.
pub const NONE: &str = "none";
/// The node fault detector, in a node value.
pub const NODE_FAULTS: &str = "node-faults";

/// What answers for a driver's volumes on the controller side: `None` = nothing.
pub fn controller_value(source: Option<Source>) -> &'static str {
    source.map_or(NONE, Source::as_str)
}

/// A controller value read back: `Ok(None)` = `none`; `Err` = a value this version does not know.
pub fn parse_controller(value: &str) -> Result<Option<Source>, UnknownValue> {
    match value.trim() {
        NONE => Ok(None),
        v => Source::parse(v)
            .map(Some)
            .ok_or_else(|| UnknownValue(v.to_string())),
    }
}

/// What answers for one driver's volumes on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NodeSources {
    /// The driver's own node health: the v1.13 RPC or the legacy condition.
    pub own: Option<Source>,
    /// The node fault detector (alone, or beside the driver's own answer).
    pub node_faults: bool,
}

impl NodeSources {
    /// Whether anything answers.
    pub fn any(self) -> bool {
        self.own.is_some() || self.node_faults
    }

    fn join(self, word: fn(Source) -> &'static str, faults: &str) -> String {
        match (self.own, self.node_faults) {
            (None, false) => NONE.to_string(),
            (None, true) => faults.to_string(),
            (Some(s), false) => word(s).to_string(),
            (Some(s), true) => format!("{}+{faults}", word(s)),
        }
    }

    /// The annotation value: `health-rpcs`, `node-faults`, `legacy-volume-condition+node-faults`,
    /// `none`, …
    pub fn value(self) -> String {
        self.join(Source::as_str, NODE_FAULTS)
    }

    /// The short form `volhealth status` prints: `rpc`, `node-faults`, `legacy+node-faults`, …
    pub fn short(self) -> String {
        self.join(Source::short, NODE_FAULTS)
    }

    /// A value read back.
    pub fn parse(value: &str) -> Result<NodeSources, UnknownValue> {
        let value = value.trim();
        if value == NONE {
            return Ok(NodeSources::default());
        }
        let mut out = NodeSources::default();
        for part in value.split('+') {
            if part == NODE_FAULTS && !out.node_faults {
                out.node_faults = true;
            } else if let (None, Some(s)) = (out.own, Source::parse(part)) {
                out.own = Some(s);
            } else {
                return Err(UnknownValue(value.to_string()));
            }
        }
        Ok(out)
    }
}

/// A coverage value this version cannot read (written by a newer writer, or by hand).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown health source {0:?}")]
pub struct UnknownValue(pub String);

/// The node annotation's value for these drivers (keys sorted, so equal maps give equal text).
pub fn node_value(drivers: &BTreeMap<String, NodeSources>) -> String {
    let map: BTreeMap<&str, String> = drivers
        .iter()
        .map(|(name, s)| (name.as_str(), s.value()))
        .collect();
    serde_json::to_string(&map).unwrap_or_else(|_| "{}".to_string())
}

/// The node annotation read back, per driver; a driver whose value this version cannot read is
/// left out (so it shows as unknown), and text that is no JSON object gives an error.
pub fn parse_node(value: &str) -> Result<BTreeMap<String, NodeSources>, UnknownValue> {
    let map: BTreeMap<String, String> =
        serde_json::from_str(value).map_err(|_| UnknownValue(value.to_string()))?;
    Ok(map
        .into_iter()
        .filter_map(|(driver, v)| Some((driver, NodeSources::parse(&v).ok()?)))
        .collect())
}

/// The merge patch that makes `current` (an object's annotations) hold every `(key, value)` of
/// `wanted`, touching nothing else; `None` when it already does.
pub fn annotation_patch(
    current: Option<&BTreeMap<String, String>>,
    wanted: &[(&str, &str)],
) -> Option<serde_json::Value> {
    let differing: serde_json::Map<String, serde_json::Value> = wanted
        .iter()
        .filter(|(k, v)| current.and_then(|c| c.get(*k)).map(String::as_str) != Some(*v))
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    (!differing.is_empty()).then(|| serde_json::json!({ "metadata": { "annotations": differing } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_values_read_back_as_written() {
        for own in [
            None,
            Some(Source::HealthRpcs),
            Some(Source::LegacyVolumeCondition),
        ] {
            for node_faults in [false, true] {
                let s = NodeSources { own, node_faults };
                assert_eq!(NodeSources::parse(&s.value()), Ok(s), "{}", s.value());
            }
        }
        assert_eq!(NodeSources::default().value(), "none");
        let both = NodeSources {
            own: Some(Source::LegacyVolumeCondition),
            node_faults: true,
        };
        assert_eq!(both.value(), "legacy-volume-condition+node-faults");
        assert_eq!(both.short(), "legacy+node-faults");
        for bad in [
            "",
            "rpc",
            "node-faults+node-faults",
            "health-rpcs+annotation+x",
        ] {
            assert!(NodeSources::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn controller_values_read_back_as_written() {
        for s in std::iter::once(None).chain(Source::ALL.map(Some)) {
            assert_eq!(parse_controller(controller_value(s)), Ok(s));
        }
        assert!(parse_controller("carrier-pigeon").is_err());
    }

    #[test]
    fn the_node_map_is_sorted_json_and_skips_what_it_cannot_read() {
        let mut m = BTreeMap::new();
        m.insert(
            "z.example".to_string(),
            NodeSources {
                own: None,
                node_faults: true,
            },
        );
        m.insert(
            "a.example".to_string(),
            NodeSources {
                own: Some(Source::HealthRpcs),
                node_faults: false,
            },
        );
        let text = node_value(&m);
        assert_eq!(
            text,
            r#"{"a.example":"health-rpcs","z.example":"node-faults"}"#
        );
        assert_eq!(parse_node(&text), Ok(m));
        let odd = parse_node(r#"{"a":"health-rpcs","b":"telepathy"}"#).unwrap();
        assert_eq!(odd.keys().collect::<Vec<_>>(), ["a"]);
        assert!(parse_node("not json").is_err());
    }

    #[test]
    fn a_patch_only_when_a_value_differs_and_only_of_those_keys() {
        let mut current = BTreeMap::new();
        current.insert("other".to_string(), "kept".to_string());
        current.insert(CONTROLLER_SOURCE.to_string(), "health-rpcs".to_string());
        assert_eq!(
            annotation_patch(Some(&current), &[(CONTROLLER_SOURCE, "health-rpcs")]),
            None
        );
        let patch = annotation_patch(
            Some(&current),
            &[(CONTROLLER_SOURCE, "none"), (CONTROLLER_MODE, "off")],
        )
        .unwrap();
        assert_eq!(
            patch,
            serde_json::json!({"metadata": {"annotations": {
                CONTROLLER_SOURCE: "none", CONTROLLER_MODE: "off"}}})
        );
        assert!(annotation_patch(None, &[(NODE_SOURCES, "{}")]).is_some());
    }
}

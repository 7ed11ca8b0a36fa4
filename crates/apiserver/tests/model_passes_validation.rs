//! Property tests: whatever a CSI driver reports, what `volhealth_model` makes of it passes this
//! server's validation, and the two agree on what a duplicate condition is.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use proptest::prelude::*;
use serde_json::{Value, json};
use volhealth_apiserver::registry::{self, ResourceDef};
use volhealth_apiserver::validation::{self, storage_condition_causes, volume_condition_causes};
use volhealth_csi::v1::VolumeCapability;
use volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_csi::v1::volume_capability::{self, AccessMode, AccessType};
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_model::{
    PodVolumeHealth, StorageHealth, StorageHealthCondition, Timestamp, VolumeHealthCondition,
    VolumeHealthStatus, Write,
};

const CASES: u32 = 1_000;
const DRIVER: &str = "d.example.com";
const VOLUME: &str = "data";
/// Kubernetes access modes and the CSI mode each maps from.
const ACCESS_MODES: &[(&str, i32)] = &[
    ("ReadWriteOnce", 1),
    ("ReadOnlyMany", 3),
    ("ReadWriteMany", 5),
    ("ReadWriteOncePod", 6),
];

/// Reasons as drivers send them: valid, empty, few (so duplicates happen), unicode, huge.
fn reason() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        prop_oneof![Just("Slow"), Just("SlowIo"), Just("Gone"), Just("slow io")]
            .prop_map(str::to_string),
        "\\PC{0,40}",
        ".{0,12}",
        (250usize..1200).prop_map(|n| "ab cd".repeat(n / 5)),
        (60usize..400).prop_map(|n| "é漢🙂".repeat(n)),
    ]
}

fn message() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "\\PC{0,60}",
        (900usize..3000).prop_map(|n| "m".repeat(n)),
        (300usize..900).prop_map(|n| "ü🙂".repeat(n)),
    ]
}

/// CSI enum values: the released ones, zero, and numbers no version knows.
fn status(known: i32) -> impl Strategy<Value = i32> {
    prop_oneof![8 => 0..=known, 1 => any::<i32>()]
}

fn volume_entries() -> impl Strategy<Value = Vec<VolumeHealthEntry>> {
    prop::collection::vec(
        (status(3), reason(), message()).prop_map(|(status, reason, message)| VolumeHealthEntry {
            status,
            reason,
            message,
        }),
        0..40,
    )
}

fn capability() -> impl Strategy<Value = Option<VolumeCapability>> {
    let mode = prop_oneof![4 => 0..=8i32, 1 => any::<i32>()].prop_map(|mode| AccessMode { mode });
    let access_type = prop_oneof![
        Just(None),
        Just(Some(AccessType::Block(volume_capability::BlockVolume {}))),
        Just(Some(AccessType::Mount(
            volume_capability::MountVolume::default()
        ))),
    ];
    prop::option::of((prop::option::of(mode), access_type).prop_map(
        |(access_mode, access_type)| VolumeCapability {
            access_mode,
            access_type,
        },
    ))
}

fn storage_entries() -> impl Strategy<Value = Vec<StorageBackendHealth>> {
    prop::collection::vec(
        (status(2), reason(), message(), capability()).prop_map(
            |(status, reason, message, volume_capability)| StorageBackendHealth {
                status,
                reason,
                message,
                volume_capability,
            },
        ),
        0..40,
    )
}

fn time() -> impl Strategy<Value = Timestamp> {
    (0i64..4_000_000_000).prop_map(|s| Timestamp::from_second(s).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn def(group: &str, plural: &str) -> &'static ResourceDef {
    registry::find(group, "v1", plural).unwrap_or_else(|| panic!("{plural} is registered"))
}

fn assert_valid(def: &ResourceDef, obj: &Value) -> Result<(), TestCaseError> {
    match validation::validate(def, obj) {
        Ok(()) => Ok(()),
        Err(e) => Err(TestCaseError::fail(format!(
            "{} refused: {} ({:?})\n{obj:#}",
            def.kind, e.message, e.details
        ))),
    }
}

fn set<T>(w: Option<Write<T>>) -> Option<T> {
    match w {
        Some(Write::Set(v)) => Some(v),
        _ => None,
    }
}

fn pvc(status: &VolumeHealthStatus) -> Value {
    json!({"metadata": {"name": "claim"}, "spec": {},
        "status": {"healthStatus": serde_json::to_value(status).unwrap_or_default()}})
}

fn pod(entry: &PodVolumeHealth) -> Value {
    json!({"metadata": {"name": "pod"},
        "spec": {"containers": [{"name": "c"}], "volumes": [{"name": VOLUME}]},
        "status": {"volumeHealth": [serde_json::to_value(entry).unwrap_or_default()]}})
}

fn csinode(entry: &StorageHealth) -> Value {
    json!({"metadata": {"name": "node"},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": "node"}]},
        "status": {"storageHealth": [serde_json::to_value(entry).unwrap_or_default()]}})
}

fn duplicates(causes: &[volhealth_apiserver::errors::Cause]) -> usize {
    causes
        .iter()
        .filter(|c| c.reason == "FieldValueDuplicate")
        .count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Volume reports, first and following (so the stored value and lastTransitionTime paths
    /// run), give a PVC status and a pod volumeHealth entry the server accepts.
    #[test]
    fn volume_reports_pass_validation(
        first in volume_entries(),
        second in volume_entries(),
        t1 in time(),
        t2 in time(),
    ) {
        let pvcs = def("", "persistentvolumeclaims");
        let pods = def("", "pods");
        let r1 = volhealth_model::volume_report(&first);
        let r2 = volhealth_model::volume_report(&second);
        let s1 = set(volhealth_model::reconcile_pvc(None, &r1, t1));
        let s2 = set(volhealth_model::reconcile_pvc(s1.as_ref(), &r2, t2));
        for s in s1.iter().chain(&s2) {
            assert_valid(pvcs, &pvc(s))?;
            let conds = s.health_conditions.as_deref().unwrap_or_default();
            prop_assert!(volume_condition_causes(conds, "c").is_empty());
        }
        let p1 = set(volhealth_model::reconcile_pod_volume(None, VOLUME, &r1, t1));
        let p2 = set(volhealth_model::reconcile_pod_volume(p1.as_ref(), VOLUME, &r2, t2));
        for p in p1.iter().chain(&p2) {
            assert_valid(pods, &pod(p))?;
        }
    }

    /// Storage reports, with arbitrary capabilities, give a CSINode storageHealth entry the
    /// server accepts.
    #[test]
    fn storage_reports_pass_validation(
        first in storage_entries(),
        second in storage_entries(),
        t1 in time(),
        t2 in time(),
    ) {
        let csinodes = def("storage.k8s.io", "csinodes");
        let r1 = volhealth_model::storage_report(&first);
        let r2 = volhealth_model::storage_report(&second);
        let s1 = set(volhealth_model::reconcile_storage(None, DRIVER, &r1, t1));
        let s2 = set(volhealth_model::reconcile_storage(s1.as_ref(), DRIVER, &r2, t2));
        for s in s1.iter().chain(&s2) {
            assert_valid(csinodes, &csinode(s))?;
            let conds = s.health_conditions.as_deref().unwrap_or_default();
            prop_assert!(storage_condition_causes(conds, "c").is_empty());
        }
    }

    /// A volume condition list the server refuses for a duplicate is exactly one whose report
    /// the model merges (reasons already valid, so sanitising changes nothing else).
    #[test]
    fn volume_duplicates_agree(
        list in prop::collection::vec(
            (1..=3i32, prop_oneof![Just("Slow"), Just("Gone"), Just("Full")], "[a-z]{0,3}"),
            0..=16,
        ),
    ) {
        let entries: Vec<VolumeHealthEntry> = list
            .iter()
            .map(|(status, reason, message)| VolumeHealthEntry {
                status: *status,
                reason: (*reason).to_string(),
                message: message.clone(),
            })
            .collect();
        let api: Vec<VolumeHealthCondition> = list
            .iter()
            .map(|(status, reason, message)| VolumeHealthCondition {
                status: ["", "Degraded", "Inaccessible", "DataLoss"][*status as usize].to_string(),
                reason: (*reason).to_string(),
                message: (!message.is_empty()).then(|| message.clone()),
            })
            .collect();
        let causes = volume_condition_causes(&api, "c");
        prop_assert_eq!(duplicates(&causes), causes.len(), "only duplicates can be wrong here");
        let merged = volhealth_model::volume_report(&entries).conditions.len();
        prop_assert_eq!(duplicates(&causes), list.len() - merged);
    }

    /// The same for a driver's storage conditions, whose capabilities may differ: the server
    /// refuses a duplicate (status, reason) exactly when the model merges it, whatever the
    /// access and volume modes.
    #[test]
    fn storage_duplicates_agree(
        list in prop::collection::vec(
            (
                1..=2i32,
                prop_oneof![Just("Slow"), Just("Gone"), Just("Full")],
                prop::option::of(prop::sample::select(ACCESS_MODES)),
                prop::option::of(prop_oneof![Just("Block"), Just("Filesystem")]),
            ),
            0..=16,
        ),
    ) {
        let entries: Vec<StorageBackendHealth> = list
            .iter()
            .map(|(status, reason, access, volume)| StorageBackendHealth {
                status: *status,
                reason: (*reason).to_string(),
                message: String::new(),
                volume_capability: Some(VolumeCapability {
                    access_mode: access.map(|(_, mode)| AccessMode { mode }),
                    access_type: volume.map(|v| match v {
                        "Block" => AccessType::Block(volume_capability::BlockVolume {}),
                        _ => AccessType::Mount(volume_capability::MountVolume::default()),
                    }),
                }),
            })
            .collect();
        let report = volhealth_model::storage_report(&entries);
        // The API view of each entry, one condition per CSI entry as a naive writer would send.
        let api: Vec<StorageHealthCondition> = list
            .iter()
            .map(|(status, reason, access, volume)| StorageHealthCondition {
                status: ["", "StorageDegraded", "StorageUnreachable"][*status as usize].to_string(),
                reason: (*reason).to_string(),
                access_mode: access.map(|(name, _)| name.to_string()),
                volume_mode: volume.map(str::to_string),
                ..Default::default()
            })
            .collect();
        let causes = storage_condition_causes(&api, "c");
        prop_assert_eq!(duplicates(&causes), causes.len());
        prop_assert_eq!(duplicates(&causes), list.len() - report.conditions.len());
        prop_assert!(storage_condition_causes(&report.conditions, "c").is_empty());
    }
}

#[test]
fn a_capability_twice_is_one_storage_condition_for_both() {
    let entry = |mode: i32| StorageBackendHealth {
        status: 1,
        reason: "Slow".into(),
        message: String::new(),
        volume_capability: Some(VolumeCapability {
            access_mode: Some(AccessMode { mode }),
            access_type: None,
        }),
    };
    let report = volhealth_model::storage_report(&[entry(1), entry(5)]);
    assert_eq!(report.conditions.len(), 1);
    let naive = vec![
        StorageHealthCondition {
            status: "StorageDegraded".into(),
            reason: "Slow".into(),
            access_mode: Some("ReadWriteOnce".into()),
            ..Default::default()
        },
        StorageHealthCondition {
            status: "StorageDegraded".into(),
            reason: "Slow".into(),
            access_mode: Some("ReadWriteMany".into()),
            ..Default::default()
        },
    ];
    let causes = storage_condition_causes(&naive, "status.storageHealth[0].healthConditions");
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(
        causes[0].field,
        "status.storageHealth[0].healthConditions[1]"
    );
}

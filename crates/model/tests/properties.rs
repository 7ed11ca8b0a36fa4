//! Property tests of the reconciliation contract (1,000+ cases each).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use volhealth_csi_proto::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_csi_proto::v1::volume_capability::{
    AccessMode, AccessType, BlockVolume, MountVolume,
};
use volhealth_csi_proto::v1::volume_health::VolumeHealthEntry;
use volhealth_csi_proto::v1::{VolumeCapability, VolumeHealth};
use volhealth_model::sanitize::{
    MAX_CONDITIONS, MAX_MESSAGE_BYTES, MAX_REASON_BYTES, is_camel_case,
};
use volhealth_model::*;

/// 1,000 cases in every run; the fuzz run sets `VOLHEALTH_FUZZ_CASES=100000` (see
/// docs/benchmarks.md).
fn cases() -> ProptestConfig {
    ProptestConfig {
        // Read here, not through testkit's `fuzz_cases`: testkit would bring a transport into
        // this crate's dependencies (see tests/no_transport.rs).
        cases: std::env::var("VOLHEALTH_FUZZ_CASES").map_or(1000, |v| {
            v.trim()
                .parse()
                .expect("VOLHEALTH_FUZZ_CASES is a whole number of cases")
        }),
        ..ProptestConfig::default()
    }
}

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Reasons drawn mostly from a small set, so duplicates and collisions happen often.
fn reason() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec!["VolumeNotFound", "SlowIo", "Fsck", "ThinPool", "a b", "", "x_y"]).prop_map(String::from),
        1 => ".{0,300}",
    ]
}

fn entry() -> impl Strategy<Value = VolumeHealthEntry> {
    (
        prop_oneof![8 => 0i32..4, 1 => any::<i32>()],
        reason(),
        prop_oneof![3 => "[a-z ]{0,20}", 1 => ".{0,1200}"],
    )
        .prop_map(|(status, reason, message)| VolumeHealthEntry {
            status,
            reason,
            message,
        })
}

fn entries() -> impl Strategy<Value = Vec<VolumeHealthEntry>> {
    prop::collection::vec(entry(), 0..24)
}

fn stored_pvc() -> impl Strategy<Value = Option<VolumeHealthStatus>> {
    prop::option::of((entries(), 0i64..1000)).prop_map(|o| {
        o.map(|(e, t)| VolumeHealthStatus {
            health_conditions: Some(volume_report(&e).conditions),
            last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(t))),
        })
    })
}

fn apply<T: Clone>(stored: Option<T>, w: Option<Write<T>>) -> Option<T> {
    match w {
        None => stored,
        Some(Write::Set(v)) => Some(v),
        Some(Write::Remove) => None,
    }
}

fn storage_entry() -> impl Strategy<Value = StorageBackendHealth> {
    (
        prop_oneof![6 => 0i32..3, 1 => any::<i32>()],
        reason(),
        "[a-z ]{0,20}",
        prop::option::of((0i32..9, any::<bool>())),
    )
        .prop_map(|(status, reason, message, cap)| StorageBackendHealth {
            status,
            reason,
            message,
            volume_capability: cap.map(|(mode, block)| VolumeCapability {
                access_mode: Some(AccessMode { mode }),
                access_type: Some(if block {
                    AccessType::Block(BlockVolume {})
                } else {
                    AccessType::Mount(MountVolume::default())
                }),
            }),
        })
}

proptest! {
    #![proptest_config(cases())]

    /// Applying reconcile's output and reconciling the same report again writes nothing.
    #[test]
    fn reconcile_pvc_is_idempotent(stored in stored_pvc(), e in entries(), t in 1000i64..2000) {
        let report = volume_report(&e);
        let once = apply(stored.clone(), reconcile_pvc(stored.as_ref(), &report, ts(t)));
        prop_assert_eq!(reconcile_pvc(once.as_ref(), &report, ts(t + 60)), None);
    }

    /// The same for a pod volume entry.
    #[test]
    fn reconcile_pod_volume_is_idempotent(e1 in entries(), e2 in entries()) {
        let first = apply(None, reconcile_pod_volume(None, "data", &volume_report(&e1), ts(1)));
        let report = volume_report(&e2);
        let once = apply(first.clone(), reconcile_pod_volume(first.as_ref(), "data", &report, ts(2)));
        prop_assert_eq!(reconcile_pod_volume(once.as_ref(), "data", &report, ts(3)), None);
    }

    /// The same for a driver's CSINode entry.
    #[test]
    fn reconcile_storage_is_idempotent(
        e1 in prop::collection::vec(storage_entry(), 0..20),
        e2 in prop::collection::vec(storage_entry(), 0..20),
    ) {
        let first = apply(None, reconcile_storage(None, "d", &storage_report(&e1), ts(1)));
        let report = storage_report(&e2);
        let once = apply(first.clone(), reconcile_storage(first.as_ref(), "d", &report, ts(2)));
        prop_assert_eq!(reconcile_storage(once.as_ref(), "d", &report, ts(3)), None);
    }

    /// A report with any known condition never results in a removal or an empty list.
    #[test]
    fn unhealthy_never_looks_healthy(stored in stored_pvc(), e in entries()) {
        let report = volume_report(&e);
        let any_known = e.iter().any(|x| VolumeStatus::from_csi(x.status).is_some());
        let any_unknown = e.iter().any(|x| VolumeStatus::from_csi(x.status).is_none());
        let out = apply(stored.clone(), reconcile_pvc(stored.as_ref(), &report, ts(5000)));
        if any_known {
            let conds = out.and_then(|s| s.health_conditions).unwrap_or_default();
            prop_assert!(!conds.is_empty());
        } else if any_unknown {
            prop_assert_eq!(out, stored);
        }
    }

    /// Whatever a driver sends, the mapped report fits the API's limits and never panics.
    #[test]
    fn volume_report_fits_api_limits(e in entries()) {
        let r = volume_report(&e);
        prop_assert!(r.conditions.len() <= MAX_CONDITIONS);
        prop_assert!(r.unknown.len() <= MAX_CONDITIONS);
        let mut keys = BTreeSet::new();
        for c in &r.conditions {
            prop_assert!(is_camel_case(&c.reason), "reason {:?}", c.reason);
            prop_assert!(!c.reason.is_empty() && c.reason.len() <= MAX_REASON_BYTES);
            prop_assert!(c.message.as_ref().is_none_or(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES));
            prop_assert!(VolumeStatus::parse(&c.status).is_some());
            prop_assert!(keys.insert((c.status.clone(), c.reason.clone())));
        }
    }

    /// The same for storage reports, including access and volume modes.
    #[test]
    fn storage_report_fits_api_limits(e in prop::collection::vec(storage_entry(), 0..30)) {
        let r = storage_report(&e);
        prop_assert!(r.conditions.len() <= MAX_CONDITIONS);
        let mut keys = BTreeSet::new();
        for c in &r.conditions {
            prop_assert!(is_camel_case(&c.reason));
            prop_assert!(StorageStatus::parse(&c.status).is_some());
            prop_assert!(c.access_mode.as_deref().is_none_or(|m| ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"].contains(&m)));
            prop_assert!(c.volume_mode.as_deref().is_none_or(|m| m == "Block" || m == "Filesystem"));
            prop_assert!(keys.insert((c.status.clone(), c.reason.clone())));
        }
        let any_known = e.iter().any(|x| StorageStatus::from_csi(x.status).is_some());
        prop_assert_eq!(any_known, !r.conditions.is_empty());
    }
}

/// One simulated list cycle: what goes wrong in it.
#[derive(Debug, Clone)]
struct CycleFaults {
    page_size: usize,
    fails: bool,
    duplicate: Vec<usize>,
    omit: Vec<usize>,
    get_fails: bool,
}

fn cycle_faults() -> impl Strategy<Value = CycleFaults> {
    (
        1usize..4,
        prop::bool::weighted(0.25),
        prop::collection::vec(0usize..8, 0..4),
        prop::collection::vec(0usize..8, 0..4),
        any::<bool>(),
    )
        .prop_map(
            |(page_size, fails, duplicate, omit, get_fails)| CycleFaults {
                page_size,
                fails,
                duplicate,
                omit,
                get_fails,
            },
        )
}

/// The driver's truth: volume id → entries (empty = healthy).
type Truth = BTreeMap<String, Vec<VolumeHealthEntry>>;

fn truth_from(mask: &[Option<u8>]) -> Truth {
    mask.iter()
        .enumerate()
        .map(|(i, m)| {
            let entries = match m {
                None => vec![],
                Some(k) => vec![VolumeHealthEntry {
                    status: 1 + (*k as i32 % 3),
                    reason: format!("R{k}"),
                    message: String::new(),
                }],
            };
            (format!("v{i}"), entries)
        })
        .collect()
}

/// The scenarios both list-mode properties range over: what the driver reports about up to
/// seven volumes, what goes wrong in each of up to eleven list cycles, and whether
/// ControllerGetVolumeHealth is there.
fn list_scenario() -> impl Strategy<Value = (Truth, Vec<CycleFaults>, bool)> {
    (
        prop::collection::vec(prop::option::of(0u8..5), 1..8).prop_map(|m| truth_from(&m)),
        prop::collection::vec(cycle_faults(), 1..12),
        any::<bool>(),
    )
}

/// Runs one list cycle against `truth` and applies the verdicts to `api`.
/// Returns true when the cycle completed.
fn run_cycle(
    tracker: &mut ListRecovery,
    api: &mut BTreeMap<String, VolumeHealthStatus>,
    truth: &Truth,
    faults: &CycleFaults,
    omit: &BTreeSet<String>,
    get_available: bool,
    now: i64,
) -> bool {
    let mut listed: Vec<VolumeHealth> = truth
        .iter()
        .filter(|(id, e)| !e.is_empty() && !omit.contains(*id))
        .map(|(id, e)| VolumeHealth {
            volume_id: id.clone(),
            health_statuses: e.clone(),
        })
        .collect();
    for d in &faults.duplicate {
        if let Some(v) = listed.get(*d % listed.len().max(1)).cloned() {
            listed.push(v);
        }
    }
    tracker.begin_cycle();
    for (n, page) in listed.chunks(faults.page_size).enumerate() {
        if faults.fails && n == 0 {
            tracker.abort_cycle();
            return false;
        }
        tracker.page(page);
    }
    if faults.fails {
        tracker.abort_cycle();
        return false;
    }
    let stored: BTreeSet<String> = api.keys().cloned().collect();
    for (id, verdict) in tracker.complete_cycle(&stored, get_available) {
        let verdict = match verdict {
            ListVerdict::Confirm if faults.get_fails => tracker.confirmed(&id, Err(())),
            ListVerdict::Confirm => {
                let e = truth.get(&id).cloned().unwrap_or_default();
                tracker.confirmed(&id, Ok(&e))
            }
            v => v,
        };
        match verdict {
            ListVerdict::Report(r) => {
                let out = apply(
                    api.get(&id).cloned(),
                    reconcile_pvc(api.get(&id), &r, ts(now)),
                );
                match out {
                    Some(v) => api.insert(id, v),
                    None => api.remove(&id),
                };
            }
            ListVerdict::Clear => {
                api.remove(&id);
            }
            ListVerdict::Keep | ListVerdict::Confirm => {}
        }
    }
    true
}

proptest! {
    #![proptest_config(cases())]

    /// Duplicates, omissions (never the same volume in two consecutive complete cycles, as the
    /// spec's paging inconsistency allows), failed pages and failed Gets never clear a condition
    /// the driver still reports.
    #[test]
    fn no_false_clear_in_list_mode((truth, faults, get_available) in list_scenario()) {
        let mut tracker = ListRecovery::new();
        let mut api = BTreeMap::new();
        let mut omitted_last = BTreeSet::new();
        let mut written = BTreeSet::new();
        for (c, f) in faults.iter().enumerate() {
            let ids: Vec<&String> = truth.keys().collect();
            let omit: BTreeSet<String> = f.omit.iter()
                .map(|i| ids[*i % ids.len()].clone())
                .filter(|id| !omitted_last.contains(id))
                .collect();
            let complete = run_cycle(&mut tracker, &mut api, &truth, f, &omit, get_available, c as i64);
            if complete {
                omitted_last = omit;
            }
            for id in &written {
                prop_assert!(api.contains_key(id), "{} was cleared while the driver still reports it", id);
            }
            written.extend(api.keys().cloned());
            // Anything stored is something the driver reports.
            for id in api.keys() {
                prop_assert!(!truth[id].is_empty(), "{} stored but healthy", id);
            }
        }
    }

    /// A real recovery (the volume leaves the list, Get answers healthy) is cleared within two
    /// complete cycles without Get, and on the first complete cycle whose confirming Get answers
    /// with Get, however many failed cycles (or failed confirmations) come between.
    #[test]
    fn real_recovery_clears_within_two_complete_cycles((sick, faults, get_available) in list_scenario()) {
        let mut tracker = ListRecovery::new();
        let mut api = BTreeMap::new();
        let clean = CycleFaults { page_size: 2, fails: false, duplicate: vec![], omit: vec![], get_fails: false };
        run_cycle(&mut tracker, &mut api, &sick, &clean, &BTreeSet::new(), get_available, 0);
        let healthy: Truth = sick.keys().map(|k| (k.clone(), vec![])).collect();
        let mut complete = 0;
        for (c, f) in faults.iter().enumerate() {
            let completed = run_cycle(&mut tracker, &mut api, &healthy, f, &BTreeSet::new(), get_available, 1 + c as i64);
            if completed && !(get_available && f.get_fails) {
                complete += 1;
            }
            if complete >= if get_available { 1 } else { 2 } {
                prop_assert!(api.is_empty(), "still stored after {} complete cycles: {:?}", complete, api.keys());
            }
        }
    }

    /// With Get advertised, failed confirmations never clear a condition, however many complete
    /// cycles the volume is absent from.
    #[test]
    fn failed_confirmations_never_clear(
        mask in prop::collection::vec(prop::option::of(0u8..5), 1..8),
        cycles in 1usize..8,
    ) {
        let sick = truth_from(&mask);
        let mut tracker = ListRecovery::new();
        let mut api = BTreeMap::new();
        let clean = CycleFaults { page_size: 2, fails: false, duplicate: vec![], omit: vec![], get_fails: false };
        run_cycle(&mut tracker, &mut api, &sick, &clean, &BTreeSet::new(), true, 0);
        let before: BTreeSet<String> = api.keys().cloned().collect();
        let healthy: Truth = sick.keys().map(|k| (k.clone(), vec![])).collect();
        let failing = CycleFaults { get_fails: true, ..clean };
        for c in 0..cycles {
            run_cycle(&mut tracker, &mut api, &healthy, &failing, &BTreeSet::new(), true, 1 + c as i64);
            let now: BTreeSet<String> = api.keys().cloned().collect();
            prop_assert_eq!(&now, &before, "cleared without a healthy answer");
        }
    }
}

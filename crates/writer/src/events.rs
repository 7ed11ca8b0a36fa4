//! Events about health transitions, for all three objects: which change deserves one, and the
//! recorder that sends them on a budget of their own (so status writes never wait behind them),
//! coalescing repeats for one object and aggregating when many objects transition at once, as
//! Kubernetes' own event recorder does.

use crate::api::ApiFailure;
use crate::metrics::WriterMetrics;
use crate::rate_limit::RateLimiter;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use volhealth_model::same_conditions;
use volhealth_model::sanitize::Condition;

/// Warning: conditions appeared on a healthy volume.
pub const REASON_VOLUME_DEGRADED: &str = "VolumeHealthDegraded";
/// Warning: a volume's conditions (or a message) changed.
pub const REASON_VOLUME_CHANGED: &str = "VolumeConditionsChanged";
/// Normal: all of a volume's conditions cleared.
pub const REASON_VOLUME_RECOVERED: &str = "VolumeHealthRecovered";
/// Warning: conditions appeared on a healthy storage backend.
pub const REASON_STORAGE_DEGRADED: &str = "StorageHealthDegraded";
/// Warning: a backend's conditions (or a message) changed.
pub const REASON_STORAGE_CHANGED: &str = "StorageConditionsChanged";
/// Normal: all of a backend's conditions cleared.
pub const REASON_STORAGE_RECOVERED: &str = "StorageHealthRecovered";
/// Warning: the driver sent a status value this version does not know.
pub const REASON_UNKNOWN: &str = "UnknownVolumeHealthCondition";
/// Warning, only with `--upstream-event-reasons`: a volume is abnormal, with the driver's
/// message, as the upstream sidecar up to v0.18 and the kubelet before v1.37 reported it.
pub const REASON_UPSTREAM_ABNORMAL: &str = "VolumeConditionAbnormal";

/// Warning, once per run: the API server accepts health writes but drops the field (its
/// `CSIVolumeHealth` feature gate is off), so no object shows health.
pub const REASON_FIELD_DROPPED: &str = "HealthStatusNotStored";

/// Every reason the writers' Events carry (docs/kubectl.md lists exactly these).
pub const ALL_REASONS: [&str; 9] = [
    REASON_FIELD_DROPPED,
    REASON_VOLUME_DEGRADED,
    REASON_VOLUME_CHANGED,
    REASON_VOLUME_RECOVERED,
    REASON_STORAGE_DEGRADED,
    REASON_STORAGE_CHANGED,
    REASON_STORAGE_RECOVERED,
    REASON_UNKNOWN,
    REASON_UPSTREAM_ABNORMAL,
];

/// Whether volume transitions also raise [`REASON_UPSTREAM_ABNORMAL`]; set once at start.
static UPSTREAM_REASONS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Makes every abnormal volume transition also raise the upstream Event
/// ([`REASON_UPSTREAM_ABNORMAL`]), for alerting and dashboards built on the Go components'
/// Events. Process-wide, like the command-line flag it stands for; the first call wins.
pub fn emit_upstream_reasons(on: bool) {
    let _ = UPSTREAM_REASONS.set(on);
}

fn upstream_reasons() -> bool {
    UPSTREAM_REASONS.get().copied().unwrap_or(false)
}

/// Events sent per second at most, sustained (their own budget, apart from status writes).
pub const EVENT_QPS: f64 = 5.0;
/// Events sent at once at most.
pub const EVENT_BURST: u32 = 25;
/// Most Events kept waiting; the oldest is dropped first (Events are advisory).
pub const MAX_PENDING_EVENTS: usize = 4096;
/// More similar Events than this waiting at once are sent as one summary.
pub const AGGREGATE_AFTER: usize = 10;

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// `v1` or `storage.k8s.io/v1`.
    pub api_version: &'static str,
    /// `PersistentVolumeClaim`, `Pod` or `CSINode`.
    pub kind: &'static str,
    /// Its namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its uid, when known.
    pub uid: Option<String>,
}

impl ObjectRef {
    /// The namespace the Event lives in (`default` for a cluster-scoped object, as the kubelet does).
    pub fn event_namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }
}

/// Kind of Event, as core/v1 spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One Event to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthEvent {
    /// What it is about.
    pub object: ObjectRef,
    /// Normal or Warning.
    pub event_type: EventType,
    /// CamelCase reason.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
}

/// Which vocabulary a condition list uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// Volume conditions (PVC, pod volume).
    Volume,
    /// Storage backend conditions (CSINode driver entry).
    Storage,
}

fn describe<C: Condition>(cs: &[C]) -> String {
    cs.iter()
        .map(|c| match c.message() {
            Some(m) if !m.is_empty() => format!("{}/{}: {}", c.status(), c.reason(), m),
            _ => format!("{}/{}", c.status(), c.reason()),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The Event for a stored change of one condition list from `before` to `after`, if it is a
/// transition (by the same rule that decides whether anything is written). `context` names the
/// part of the object (`volume data`, `driver x`), if any.
pub fn transition_event<C: Condition>(
    object: &ObjectRef,
    subject: Subject,
    context: Option<&str>,
    before: &[C],
    after: &[C],
) -> Option<HealthEvent> {
    if same_conditions(before, after) {
        return None;
    }
    let (degraded, changed, recovered, noun) = match subject {
        Subject::Volume => (
            REASON_VOLUME_DEGRADED,
            REASON_VOLUME_CHANGED,
            REASON_VOLUME_RECOVERED,
            "Volume health",
        ),
        Subject::Storage => (
            REASON_STORAGE_DEGRADED,
            REASON_STORAGE_CHANGED,
            REASON_STORAGE_RECOVERED,
            "Storage health",
        ),
    };
    let prefix = context.map(|c| format!("{c}: ")).unwrap_or_default();
    let (event_type, reason, message) = match (before.is_empty(), after.is_empty()) {
        (true, _) => (
            EventType::Warning,
            degraded,
            format!("{prefix}{noun} conditions reported: {}", describe(after)),
        ),
        (false, true) => (
            EventType::Normal,
            recovered,
            format!(
                "{prefix}{noun} conditions cleared (were: {})",
                describe(before)
            ),
        ),
        (false, false) => (
            EventType::Warning,
            changed,
            format!("{prefix}{noun} conditions now: {}", describe(after)),
        ),
    };
    Some(HealthEvent {
        object: object.clone(),
        event_type,
        reason,
        message,
    })
}

/// The Events of a stored change of one condition list: [`transition_event`]'s, and for volume
/// conditions that are abnormal after it, the upstream [`REASON_UPSTREAM_ABNORMAL`] beside it
/// when [`emit_upstream_reasons`] is on.
pub fn transition_events<C: Condition>(
    object: &ObjectRef,
    subject: Subject,
    context: Option<&str>,
    before: &[C],
    after: &[C],
) -> Vec<HealthEvent> {
    transition_events_with(upstream_reasons(), object, subject, context, before, after)
}

fn transition_events_with<C: Condition>(
    upstream: bool,
    object: &ObjectRef,
    subject: Subject,
    context: Option<&str>,
    before: &[C],
    after: &[C],
) -> Vec<HealthEvent> {
    let Some(primary) = transition_event(object, subject, context, before, after) else {
        return Vec::new();
    };
    let abnormal = upstream && subject == Subject::Volume && !after.is_empty();
    let mut out = vec![primary];
    if abnormal {
        // The upstream message is the driver's message itself.
        let message = after
            .iter()
            .map(|c| match c.message() {
                Some(m) if !m.is_empty() => m.to_string(),
                _ => format!("{}/{}", c.status(), c.reason()),
            })
            .collect::<Vec<_>>()
            .join("; ");
        let prefix = context.map(|c| format!("{c}: ")).unwrap_or_default();
        out.push(HealthEvent {
            object: object.clone(),
            event_type: EventType::Warning,
            reason: REASON_UPSTREAM_ABNORMAL,
            message: format!("{prefix}{message}"),
        });
    }
    out
}

/// The one Warning saying that the API server drops the health field of `resource` (on the
/// first object whose write it dropped).
pub fn field_dropped_event(object: &ObjectRef, resource: &str) -> HealthEvent {
    HealthEvent {
        object: object.clone(),
        event_type: EventType::Warning,
        reason: REASON_FIELD_DROPPED,
        message: format!(
            "The API server accepted the write of {resource} but did not store the health field: its CSIVolumeHealth feature gate is off, so no object shows volume health until it is turned on (--feature-gates=CSIVolumeHealth=true). Writes continue slowly and resume when it is"
        ),
    }
}

/// The Warning for status values this version does not know (`what` lists them).
pub fn unknown_event(object: &ObjectRef, context: &str, what: &str) -> HealthEvent {
    HealthEvent {
        object: object.clone(),
        event_type: EventType::Warning,
        reason: REASON_UNKNOWN,
        message: format!(
            "The driver reported health values this version does not know for {context} ({what}); they are not written to status and are not treated as healthy"
        ),
    }
}

/// Creates Events in the API server.
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event`, which stands for `count` occurrences.
    fn create(
        &self,
        event: &HealthEvent,
        count: i32,
    ) -> impl Future<Output = Result<(), ApiFailure>> + Send;
}

impl<T: EventSink> EventSink for Arc<T> {
    fn create(
        &self,
        event: &HealthEvent,
        count: i32,
    ) -> impl Future<Output = Result<(), ApiFailure>> + Send {
        self.as_ref().create(event, count)
    }
}

/// [`EventSink`] over a kube client.
#[derive(Clone)]
pub struct KubeEventSink {
    client: kube::Client,
    component: &'static str,
    instance: String,
    host: Option<String>,
}

impl KubeEventSink {
    /// Events reported by `component` (`volhealth-monitor`), `instance`, on `host` (a node name) if any.
    pub fn new(
        client: kube::Client,
        component: &'static str,
        instance: String,
        host: Option<String>,
    ) -> Self {
        KubeEventSink {
            client,
            component,
            instance,
            host,
        }
    }
}

impl EventSink for KubeEventSink {
    async fn create(&self, e: &HealthEvent, count: i32) -> Result<(), ApiFailure> {
        let namespace = e.object.event_namespace().to_string();
        let api = Api::<Event>::namespaced(self.client.clone(), &namespace);
        let now = jiff::Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}.", e.object.name)),
                namespace: Some(namespace),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some(e.object.api_version.to_string()),
                kind: Some(e.object.kind.to_string()),
                name: Some(e.object.name.clone()),
                namespace: e.object.namespace.clone(),
                uid: e.object.uid.clone().filter(|u| !u.is_empty()),
                ..Default::default()
            },
            reason: Some(e.reason.to_string()),
            message: Some(e.message.clone()),
            type_: Some(e.event_type.as_str().to_string()),
            reporting_component: Some(self.component.to_string()),
            reporting_instance: Some(self.instance.clone()),
            source: Some(EventSource {
                component: Some(self.component.to_string()),
                host: self.host.clone(),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            action: Some("HealthCheck".into()),
            count: Some(count.max(1)),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event).await?;
        Ok(())
    }
}

type EventKey = (&'static str, Option<String>, String, &'static str);
type GroupKey = (&'static str, Option<String>, &'static str);

fn key_of(e: &HealthEvent) -> EventKey {
    (
        e.object.kind,
        e.object.namespace.clone(),
        e.object.name.clone(),
        e.reason,
    )
}

fn group_of(e: &HealthEvent) -> GroupKey {
    (e.object.kind, e.object.namespace.clone(), e.reason)
}

#[derive(Debug, Default)]
struct Pending {
    order: VecDeque<EventKey>,
    events: HashMap<EventKey, (HealthEvent, i32)>,
    groups: HashMap<GroupKey, usize>,
}

impl Pending {
    fn take(&mut self, key: &EventKey) -> Option<(HealthEvent, i32)> {
        let (e, n) = self.events.remove(key)?;
        let g = group_of(&e);
        if let Some(c) = self.groups.get_mut(&g) {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.groups.remove(&g);
            }
        }
        Some((e, n))
    }
}

/// What the recorder sends next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    /// One Event standing for `count` occurrences.
    One(HealthEvent, i32),
    /// A summary of many similar Events (same kind, namespace and reason): the first one's object,
    /// a message naming how many and which.
    Summary(HealthEvent, i32),
}

/// The Event queue with its own budget.
#[derive(Debug)]
pub struct EventRecorder {
    pending: Mutex<Pending>,
    notify: Notify,
    metrics: Arc<WriterMetrics>,
}

impl EventRecorder {
    /// An empty recorder counting into `metrics`.
    pub fn new(metrics: Arc<WriterMetrics>) -> Self {
        EventRecorder {
            pending: Mutex::new(Pending::default()),
            notify: Notify::new(),
            metrics,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues an Event; a pending one for the same object and reason takes the new message.
    pub fn record(&self, e: HealthEvent) {
        let key = key_of(&e);
        let reason = e.reason;
        let outcome = {
            let mut p = self.lock();
            if let Some((old, n)) = p.events.get_mut(&key) {
                *old = e;
                *n = n.saturating_add(1);
                "coalesced"
            } else {
                let mut dropped = None;
                if p.events.len() >= MAX_PENDING_EVENTS {
                    while let Some(k) = p.order.pop_front() {
                        if let Some((old, _)) = p.take(&k) {
                            dropped = Some(old.reason);
                            break;
                        }
                    }
                }
                *p.groups.entry(group_of(&e)).or_insert(0) += 1;
                p.order.push_back(key.clone());
                p.events.insert(key, (e, 1));
                if let Some(r) = dropped {
                    self.metrics.event(r, "dropped");
                }
                "queued"
            }
        };
        if outcome == "coalesced" {
            self.metrics.event(reason, "coalesced");
        }
        self.notify.notify_one();
    }

    /// Number of Events waiting.
    pub fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// Whether no Event is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops everything waiting (leadership lost: another replica reports now).
    pub fn clear(&self) {
        *self.lock() = Pending::default();
    }

    /// Takes what to send next, summarising when many similar Events wait at once.
    pub fn pop(&self) -> Option<Outgoing> {
        let mut p = self.lock();
        let (first, count) = loop {
            let key = p.order.pop_front()?;
            if let Some(found) = p.take(&key) {
                break found;
            }
        };
        let group = group_of(&first);
        let similar = p.groups.get(&group).copied().unwrap_or(0);
        if similar < AGGREGATE_AFTER {
            return Some(Outgoing::One(first, count));
        }
        let keys: Vec<EventKey> = p
            .order
            .iter()
            .filter(|k| k.0 == group.0 && k.1 == group.1 && k.3 == group.2)
            .cloned()
            .collect();
        let mut names = vec![first.object.name.clone()];
        let mut total = count;
        for k in &keys {
            if let Some((e, n)) = p.take(k) {
                names.push(e.object.name);
                total = total.saturating_add(n);
            }
        }
        let Pending { order, events, .. } = &mut *p;
        order.retain(|k| events.contains_key(k));
        drop(p);
        for _ in 1..names.len() {
            self.metrics.event(first.reason, "aggregated");
        }
        let shown: Vec<&str> = names.iter().take(10).map(String::as_str).collect();
        let more = names.len().saturating_sub(shown.len());
        let mut message = format!(
            "(combined from {} similar events) {} {}s: {}",
            names.len(),
            first.reason,
            first.object.kind,
            shown.join(", ")
        );
        if more > 0 {
            message.push_str(&format!(" and {more} more"));
        }
        message.push_str(&format!("; latest: {}", first.message));
        Some(Outgoing::Summary(HealthEvent { message, ..first }, total))
    }

    /// Sends Events through `sink` at most `qps` per second (bursts of `burst`) until `shutdown`.
    pub async fn run<S: EventSink>(
        self: Arc<Self>,
        sink: S,
        mut limiter: RateLimiter,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        loop {
            let out = loop {
                if let Some(o) = self.pop() {
                    break o;
                }
                tokio::select! {
                    _ = &mut shutdown => return,
                    _ = self.notify.notified() => {}
                }
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = limiter.acquire() => {}
            }
            let (event, count) = match out {
                Outgoing::One(e, n) | Outgoing::Summary(e, n) => (e, n),
            };
            match sink.create(&event, count).await {
                Ok(()) => self.metrics.event(event.reason, "sent"),
                Err(err) => {
                    self.metrics.event(event.reason, "error");
                    tracing::debug!(object = %event.object.name, reason = event.reason, error = %err, "could not create event");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volhealth_model::VolumeHealthCondition;

    fn pvc(name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1",
            kind: "PersistentVolumeClaim",
            namespace: Some("ns".into()),
            name: name.into(),
            uid: Some(format!("uid-{name}")),
        }
    }

    fn c(reason: &str, message: &str) -> VolumeHealthCondition {
        VolumeHealthCondition {
            status: "Degraded".into(),
            reason: reason.into(),
            message: Some(message.into()),
        }
    }

    #[test]
    fn only_transitions_raise_events() {
        let o = pvc("a");
        let deg = [c("Slow", "m")];
        let e = transition_event(&o, Subject::Volume, None, &[], &deg).unwrap();
        assert_eq!(
            (e.event_type, e.reason),
            (EventType::Warning, REASON_VOLUME_DEGRADED)
        );
        let e = transition_event(&o, Subject::Volume, None, &deg, &[]).unwrap();
        assert_eq!(
            (e.event_type, e.reason),
            (EventType::Normal, REASON_VOLUME_RECOVERED)
        );
        let e = transition_event(
            &o,
            Subject::Volume,
            Some("volume data"),
            &deg,
            &[c("Slow", "other")],
        )
        .unwrap();
        assert_eq!(e.reason, REASON_VOLUME_CHANGED);
        assert!(e.message.starts_with("volume data: "), "{}", e.message);
        assert_eq!(
            transition_event(&o, Subject::Volume, None, &deg, &deg),
            None
        );
        let empty: [VolumeHealthCondition; 0] = [];
        assert_eq!(
            transition_event(&o, Subject::Volume, None, &empty, &empty),
            None
        );
        let e = transition_event(&o, Subject::Storage, None, &[], &deg).unwrap();
        assert_eq!(e.reason, REASON_STORAGE_DEGRADED);
    }

    fn recorder() -> EventRecorder {
        let mut r = prometheus_client::registry::Registry::default();
        EventRecorder::new(Arc::new(WriterMetrics::new(&mut r)))
    }

    #[test]
    fn the_upstream_reason_comes_beside_ours_for_abnormal_volumes_only() {
        let o = pvc("data-1");
        let deg = vec![c("SlowDisk", "writes take 800 ms")];
        let reasons = |upstream: bool,
                       subject: Subject,
                       before: &[VolumeHealthCondition],
                       after: &[VolumeHealthCondition]| {
            transition_events_with(upstream, &o, subject, None, before, after)
                .into_iter()
                .map(|e| (e.reason, e.message))
                .collect::<Vec<_>>()
        };
        let on = reasons(true, Subject::Volume, &[], &deg);
        assert_eq!(on.len(), 2);
        assert_eq!(on[0].0, REASON_VOLUME_DEGRADED);
        assert_eq!(
            on[1],
            (REASON_UPSTREAM_ABNORMAL, "writes take 800 ms".to_string())
        );
        assert_eq!(
            reasons(false, Subject::Volume, &[], &deg).len(),
            1,
            "off by default"
        );
        assert_eq!(
            reasons(true, Subject::Volume, &deg, &[]).len(),
            1,
            "a recovery is not abnormal"
        );
        assert_eq!(
            reasons(true, Subject::Storage, &[], &deg).len(),
            1,
            "volumes only"
        );
        assert!(
            reasons(true, Subject::Volume, &deg, &deg).is_empty(),
            "no transition"
        );
    }

    #[test]
    fn the_docs_list_exactly_the_reasons_the_writers_emit() {
        let doc = include_str!("../../../docs/kubectl.md");
        let section = doc
            .split("## Events the writers raise")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .unwrap_or_else(|| panic!("docs/kubectl.md has no section on the Events"));
        let mut documented: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        documented.sort_unstable();
        let mut emitted = ALL_REASONS.to_vec();
        emitted.sort_unstable();
        assert_eq!(documented, emitted);
    }

    fn ev(name: &str, reason: &'static str) -> HealthEvent {
        HealthEvent {
            object: pvc(name),
            event_type: EventType::Warning,
            reason,
            message: format!("about {name}"),
        }
    }

    #[test]
    fn repeats_coalesce_and_many_similar_are_summarised() {
        let r = recorder();
        r.record(ev("a", REASON_VOLUME_DEGRADED));
        r.record(HealthEvent {
            message: "newer".into(),
            ..ev("a", REASON_VOLUME_DEGRADED)
        });
        assert_eq!(r.len(), 1);
        match r.pop() {
            Some(Outgoing::One(e, 2)) => assert_eq!(e.message, "newer"),
            other => panic!("{other:?}"),
        }
        for i in 0..25 {
            r.record(ev(&format!("v{i:02}"), REASON_VOLUME_DEGRADED));
        }
        r.record(ev("other", REASON_VOLUME_RECOVERED));
        match r.pop() {
            Some(Outgoing::Summary(e, 25)) => {
                assert_eq!(e.object.name, "v00");
                assert!(e.message.contains("25 similar"), "{}", e.message);
                assert!(e.message.contains("and 15 more"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(r.pop(), Some(Outgoing::One(e, 1)) if e.object.name == "other"));
        assert_eq!(r.pop(), None);
    }

    #[test]
    fn the_queue_is_bounded() {
        let r = recorder();
        for i in 0..(MAX_PENDING_EVENTS + 5) {
            r.record(HealthEvent {
                object: ObjectRef {
                    namespace: Some(format!("ns{i}")),
                    ..pvc("a")
                },
                ..ev("a", REASON_VOLUME_DEGRADED)
            });
        }
        assert_eq!(r.len(), MAX_PENDING_EVENTS);
    }
}

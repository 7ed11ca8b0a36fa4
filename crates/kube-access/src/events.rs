//! Events in the API server, sent on a budget of their own (so the requests a component exists
//! for never wait behind them): the [`EventRecorder`] queue, which coalesces repeats for one
//! object and sends a summary when many similar objects have one at once, as Kubernetes' own
//! event recorder does, and the [`EventSink`] it sends through ([`KubeEventSink`] over a client).
//! What deserves an Event, and its reason and message, is the component's own (the writers'
//! health transitions, the scheduler extender's invalid policy, a remediation's action).

use crate::api_failure::ApiFailure;
use crate::rate_limit::RateLimiter;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, PostParams};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

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
    /// Its `apiVersion`: `v1`, `storage.k8s.io/v1`, ….
    pub api_version: &'static str,
    /// Its kind: `PersistentVolumeClaim`, `Pod`, `CSINode`, `CSIDriver`, ….
    pub kind: &'static str,
    /// Its namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its uid, when known.
    pub uid: Option<String>,
}

impl ObjectRef {
    /// A PersistentVolumeClaim's reference.
    pub fn claim(namespace: &str, name: &str, uid: Option<&str>) -> ObjectRef {
        ObjectRef {
            api_version: "v1",
            kind: "PersistentVolumeClaim",
            namespace: Some(namespace.to_string()),
            name: name.to_string(),
            uid: uid.map(str::to_string),
        }
    }

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

/// Where the recorder counts what became of each Event (`queued` ones are not counted; `coalesced`,
/// `dropped`, `aggregated`, `sent`, `error` are), by reason: the component's metric family.
pub trait EventCounter: Send + Sync + 'static {
    /// Counts one Event of `reason` that ended as `result`.
    fn event(&self, reason: &str, result: &str);
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
pub struct EventRecorder {
    pending: Mutex<Pending>,
    notify: Notify,
    metrics: Arc<dyn EventCounter>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// An empty recorder counting into `metrics`.
    pub fn new<M: EventCounter>(metrics: Arc<M>) -> Self {
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
mod tests;

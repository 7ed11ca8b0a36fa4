//! Log lines in the JSON shape of the Kubernetes components (`--logging-format json`): one object
//! per line with `ts` (seconds since the epoch, fractional), `v` (the klog verbosity of the
//! line), `msg`, and the line's key/values flat beside them; an error value is `err`, and lines
//! above info carry `level` (`warning`, `error`), so a log pipeline built for kube-apiserver or a
//! Go sidecar reads volhealth's lines unchanged.

use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The formatter.
pub struct KubeJson;

/// The klog verbosity a line of `level` is written at (the inverse of `--v`'s mapping).
fn verbosity(level: &Level) -> u8 {
    match *level {
        Level::TRACE => 4,
        Level::DEBUG => 2,
        _ => 0,
    }
}

/// Collects an event's fields: `message` becomes `msg`, errors `err`, the rest flat.
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let key = match field.name() {
            "message" => "msg",
            name => name,
        };
        self.0.insert(key.to_string(), value);
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_error(&mut self, _field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert("err".into(), Value::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }
}

impl<S, N> FormatEvent<S, N> for KubeJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writeln!(writer, "{}", line(event, std::time::SystemTime::now()))
    }
}

/// One event as its JSON line (without the newline).
fn line(event: &Event<'_>, now: std::time::SystemTime) -> Value {
    let meta = event.metadata();
    let ts = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut out = Map::new();
    out.insert("ts".into(), Value::from(ts));
    out.insert("v".into(), Value::from(verbosity(meta.level())));
    match *meta.level() {
        Level::ERROR => {
            out.insert("level".into(), Value::from("error"));
        }
        Level::WARN => {
            out.insert("level".into(), Value::from("warning"));
        }
        _ => {}
    }
    out.insert("logger".into(), Value::from(meta.target()));
    out.insert(
        "msg".into(),
        fields.0.remove("msg").unwrap_or(Value::from("")),
    );
    out.extend(fields.0);
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt as _;

    /// Everything the formatter writes, for the test to read back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut v) = self.0.lock() {
                v.extend_from_slice(buf);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_have_the_kubernetes_shape() {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .event_format(KubeJson)
                .with_writer(move || sink.clone()),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(pvc = "default/data-1", count = 3, "wrote health");
            let e = std::io::Error::other("connection refused");
            tracing::warn!(error = &e as &dyn std::error::Error, "patch failed");
            tracing::debug!("detail");
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0]["ts"].as_f64().unwrap() > 1.7e9);
        assert_eq!(lines[0]["v"], 0);
        assert_eq!(lines[0]["msg"], "wrote health");
        assert_eq!(lines[0]["pvc"], "default/data-1");
        assert_eq!(lines[0]["count"], 3);
        assert!(lines[0].get("level").is_none());
        assert_eq!(lines[1]["level"], "warning");
        assert_eq!(lines[1]["err"], "connection refused");
        assert_eq!(lines[2]["v"], 2);
    }
}

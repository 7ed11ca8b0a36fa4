//! The `webhook` action: a JSON document describing the object, the rule and the condition,
//! POSTed to a URL with a timeout. Deliveries run beside the loop (never blocking it); a failed
//! one is counted and retried with exponential backoff, up to a few attempts.

use crate::plan::Planned;
use std::time::Duration;

/// How long one POST may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per delivery.
pub const ATTEMPTS: u32 = 5;
/// The wait before the second attempt; it doubles after each failure, each wait jittered
/// (from half to all of its nominal value).
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// What a delivery reports, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered 2xx.
    Delivered,
    /// One attempt failed; another follows.
    Failed,
    /// The last attempt failed.
    GaveUp,
}

/// The document POSTed for `p`.
pub fn document(p: &Planned, now: jiff::Timestamp) -> serde_json::Value {
    let f = &p.finding;
    serde_json::json!({
        "apiVersion": "volhealth.io/v1alpha1",
        "kind": "RemediationWebhook",
        "time": now.to_string(),
        "rule": p.rule,
        "object": {
            "kind": format!("{:?}", f.kind),
            "namespace": f.namespace,
            "name": f.name,
            "volume": f.volume,
            "node": f.node,
            "driver": f.driver,
        },
        "condition": {
            "status": f.status,
            "reason": f.reason,
            "lastTransitionTime": f.since.map(|t| t.to_string()),
        },
    })
}

/// Sends webhook documents in the background.
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
}

impl Sender {
    /// A sender whose POSTs time out after [`TIMEOUT`].
    pub fn new() -> Result<Sender, reqwest::Error> {
        Ok(Sender {
            client: reqwest::Client::builder().timeout(TIMEOUT).build()?,
        })
    }

    /// Starts delivering `body` to `url`; `report` hears every attempt's outcome.
    pub fn send(
        &self,
        url: String,
        body: serde_json::Value,
        report: impl Fn(Outcome) + Send + 'static,
    ) {
        let client = self.client.clone();
        tokio::spawn(async move {
            let mut backoff = volhealth_kube_access::Backoff::new(
                FIRST_BACKOFF,
                FIRST_BACKOFF.saturating_mul(1 << (ATTEMPTS - 1)),
            );
            for attempt in 1..=ATTEMPTS {
                let result = client.post(&url).json(&body).send().await;
                let why = match result {
                    Ok(r) if r.status().is_success() => {
                        report(Outcome::Delivered);
                        return;
                    }
                    Ok(r) => format!("answered {}", r.status()),
                    Err(e) => e.to_string(),
                };
                if attempt == ATTEMPTS {
                    tracing::warn!(%url, attempt, "webhook failed ({why}); giving up");
                    report(Outcome::GaveUp);
                    return;
                }
                let pause = backoff.next_delay();
                tracing::warn!(%url, attempt, "webhook failed ({why}); retrying in {pause:?}");
                report(Outcome::Failed);
                tokio::time::sleep(pause).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_failed_delivery_is_counted_and_retried_until_it_is_delivered() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        tokio::spawn(async move {
            // The first attempt gets a 500, the second a 200.
            for status in ["500 Internal Server Error", "200 OK"] {
                let (mut s, _) = listener.accept().await.unwrap();
                // Headers and body may come in several reads: read up to the body's end.
                let mut got = Vec::new();
                let mut buf = vec![0u8; 8192];
                while !String::from_utf8_lossy(&got).ends_with('}') {
                    let n = s.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&got).to_string());
                let answer =
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                s.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        let outcomes = Arc::new(Mutex::new(Vec::new()));
        let o = outcomes.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        Sender::new().unwrap().send(
            url,
            serde_json::json!({"rule": "r", "condition": {"status": "Inaccessible"}}),
            move |outcome| {
                o.lock().unwrap().push(outcome);
                let _ = tx.send(());
            },
        );
        rx.recv().await.unwrap();
        rx.recv().await.unwrap();
        assert_eq!(
            *outcomes.lock().unwrap(),
            [Outcome::Failed, Outcome::Delivered]
        );
        let bodies = bodies.lock().unwrap();
        assert_eq!(bodies.len(), 2);
        assert!(bodies[1].starts_with("POST /hook"), "{}", bodies[1]);
        assert!(bodies[1].contains("\"rule\":\"r\""), "{}", bodies[1]);
    }
}

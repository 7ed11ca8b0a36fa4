//! The signals that stop a long-running component: SIGINT (Ctrl-C) and SIGTERM (what the kubelet sends).

/// Completes at the first SIGINT or SIGTERM, and logs that the component is shutting down.
///
/// If SIGTERM cannot be watched (no signal handling available), only SIGINT stops the wait.
pub async fn sigint_or_sigterm() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
}

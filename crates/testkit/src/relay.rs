//! A TCP relay in front of a server, to cut the network between a client and it while the server
//! itself keeps running (a load balancer's blip, a partition): the client's connections are
//! dropped and new ones are closed at once until the relay is restored.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::task::AbortHandle;

/// A running relay; dropping it closes every connection and stops listening.
pub struct Relay {
    /// The address clients connect to.
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    accepting: AbortHandle,
}

impl Relay {
    /// Relays connections to `upstream` from a new loopback address, on the current runtime.
    pub async fn start(upstream: SocketAddr) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the relay");
        let addr = listener.local_addr().expect("the relay's address");
        let cut = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(Vec::<AbortHandle>::new()));
        let (is_cut, open) = (cut.clone(), connections.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if is_cut.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees its connection closed
                }
                let relayed = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                let mut open = open.lock().unwrap_or_else(PoisonError::into_inner);
                open.retain(|c| !c.is_finished());
                open.push(relayed.abort_handle());
            }
        })
        .abort_handle();
        Relay {
            addr,
            cut,
            connections,
            accepting,
        }
    }

    /// Cuts the network: every relayed connection is dropped, and new ones are closed at once.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        let open = std::mem::take(
            &mut *self
                .connections
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for connection in open {
            connection.abort();
        }
    }

    /// Restores the network: new connections are relayed again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
        self.accepting.abort();
    }
}

//! `statfs` of mounted paths on a bounded pool of dedicated OS threads, under a deadline.
//!
//! A `statfs` on a dead hard-mounted NFS or a stuck FUSE server blocks in the kernel and cannot
//! be cancelled. So a probe runs on a pool thread, never on the async runtime; the caller waits
//! for it only until its deadline. At most one probe per path is in flight: a caller that finds
//! one running waits on that one instead of starting another, so a hung mount holds one thread,
//! not one per cycle. Threads are started on demand up to a bound and idle ones are reused; when
//! every thread is busy a probe waits for one, and if none frees up by its deadline (every
//! thread held by a hung mount) the caller learns that nothing was probed
//! ([`Probe::NoCapacity`]), never that its path hung.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// `statfs` answered.
    Answered,
    /// `statfs` failed with this errno.
    Failed(nix::errno::Errno),
    /// No answer within the deadline; the probe started this long before the deadline passed.
    NoAnswer {
        /// How long the probe has been running.
        running_for: Duration,
    },
    /// No pool thread became free before the deadline (all held by hung mounts): nothing was
    /// probed.
    NoCapacity,
}

type Waiter = oneshot::Sender<Result<(), nix::errno::Errno>>;

struct InFlight {
    /// When a thread took it; `None` while it waits for one.
    started: Option<Instant>,
    waiters: Vec<Waiter>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<PathBuf>,
    in_flight: HashMap<PathBuf, InFlight>,
    threads: usize,
    idle: usize,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    max_threads: usize,
    timed_out: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic in another holder: every change is one step.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pool; cheap to clone, threads end when it is dropped and they are idle.
#[derive(Clone)]
pub struct ProbePool {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ProbePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbePool")
            .field("max_threads", &self.shared.max_threads)
            .finish_non_exhaustive()
    }
}

impl ProbePool {
    /// A pool of at most `max_threads` (at least 1) threads.
    pub fn new(max_threads: usize) -> ProbePool {
        ProbePool {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
                max_threads: max_threads.max(1),
                timed_out: AtomicU64::new(0),
            }),
        }
    }

    /// Probes `path` and waits for the answer until `timeout` from now.
    pub async fn statfs(&self, path: &Path, timeout: Duration) -> Probe {
        let (tx, rx) = oneshot::channel();
        {
            let mut state = self.shared.lock();
            if let Some(flight) = state.in_flight.get_mut(path) {
                flight.waiters.retain(|w| !w.is_closed());
                flight.waiters.push(tx);
            } else {
                state.in_flight.insert(
                    path.to_path_buf(),
                    InFlight {
                        started: None,
                        waiters: vec![tx],
                    },
                );
                state.queue.push_back(path.to_path_buf());
                // Each waiting thread takes one queued path; start one more when they are too
                // few and the bound allows. Otherwise the path waits for a busy thread.
                if state.queue.len() > state.idle && state.threads < self.shared.max_threads {
                    let shared = self.shared.clone();
                    let spawned = std::thread::Builder::new()
                        .name("statfs-probe".into())
                        .spawn(move || worker(shared))
                        .is_ok();
                    if spawned {
                        state.threads += 1;
                    }
                } else {
                    self.shared.work.notify_one();
                }
            }
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(()))) => Probe::Answered,
            Ok(Ok(Err(errno))) => Probe::Failed(errno),
            // The sender is only dropped unanswered if the worker died: no answer either way.
            Ok(Err(_)) | Err(_) => {
                let started = self
                    .shared
                    .lock()
                    .in_flight
                    .get(path)
                    .and_then(|f| f.started);
                match started {
                    // Still waiting for a thread (all held by hung mounts): nothing was probed.
                    // The path stays queued; its answer serves the next caller.
                    None => Probe::NoCapacity,
                    Some(started) => {
                        self.shared.timed_out.fetch_add(1, Ordering::Relaxed);
                        Probe::NoAnswer {
                            running_for: started.elapsed(),
                        }
                    }
                }
            }
        }
    }

    /// Probes now running (each holds a thread; a hung mount holds one until it answers).
    pub fn in_flight(&self) -> usize {
        self.shared.lock().in_flight.len()
    }

    /// Threads the pool has now.
    pub fn threads(&self) -> usize {
        self.shared.lock().threads
    }

    /// Probes whose caller stopped waiting at the deadline, since the pool started.
    pub fn timed_out(&self) -> u64 {
        self.shared.timed_out.load(Ordering::Relaxed)
    }
}

/// How long an idle thread waits for work before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(60);

fn worker(shared: Arc<Shared>) {
    let mut state = shared.lock();
    loop {
        if let Some(path) = state.queue.pop_front() {
            if let Some(flight) = state.in_flight.get_mut(&path) {
                flight.started = Some(Instant::now());
            }
            drop(state);
            let answer = nix::sys::statfs::statfs(&path).map(|_| ());
            state = shared.lock();
            if let Some(flight) = state.in_flight.remove(&path) {
                for waiter in flight.waiters {
                    let _ = waiter.send(answer);
                }
            }
            continue;
        }
        // The only holders left are the pool's threads: the pool is gone.
        if Arc::strong_count(&shared) <= state.threads {
            break;
        }
        state.idle += 1;
        let (next, timeout) = shared
            .work
            .wait_timeout(state, IDLE_EXIT)
            .unwrap_or_else(|p| p.into_inner());
        state = next;
        state.idle -= 1;
        if timeout.timed_out() && state.queue.is_empty() {
            break;
        }
    }
    state.threads -= 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_path_answers() {
        let pool = ProbePool::new(2);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            pool.statfs(dir.path(), Duration::from_secs(30)).await,
            Probe::Answered
        );
        assert_eq!(
            pool.statfs(&dir.path().join("missing"), Duration::from_secs(30))
                .await,
            Probe::Failed(nix::errno::Errno::ENOENT)
        );
        assert!(pool.threads() <= 2);
        assert_eq!(pool.in_flight(), 0);
    }

    #[tokio::test]
    async fn many_paths_share_few_threads() {
        let pool = ProbePool::new(3);
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..40).map(|_| dir.path().to_path_buf()).collect();
        let answers = futures_join(&pool, &paths).await;
        assert!(answers.iter().all(|a| *a == Probe::Answered), "{answers:?}");
        assert!(pool.threads() <= 3);
    }

    async fn futures_join(pool: &ProbePool, paths: &[PathBuf]) -> Vec<Probe> {
        let mut set = tokio::task::JoinSet::new();
        for (i, p) in paths.iter().enumerate() {
            let pool = pool.clone();
            let p = p.clone();
            set.spawn(async move { (i, pool.statfs(&p, Duration::from_secs(30)).await) });
        }
        let mut out = vec![Probe::NoCapacity; paths.len()];
        while let Some(Ok((i, probe))) = set.join_next().await {
            out[i] = probe;
        }
        out
    }
}

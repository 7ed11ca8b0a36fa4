use super::*;
use serde_json::json;

#[test]
fn concurrent_writers_share_commits_in_order_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), 100_000).unwrap());
    let mut live = store.subscribe();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut rvs = Vec::new();
                for i in 0..40 {
                    // Half of the writes go to one shared object, so batches see each other's
                    // uncommitted state.
                    let name = if i % 2 == 0 {
                        "shared".to_string()
                    } else {
                        format!("t{t}-{i}")
                    };
                    let w = store
                        .mutate("pods", "default", &name, |old| {
                            let n = old.and_then(|o| o["n"].as_i64()).unwrap_or(0);
                            Ok(Outcome::Put(
                                json!({"metadata": {"name": name}, "n": n + 1}),
                            ))
                        })
                        .unwrap();
                    let rv: u64 = w.new.unwrap()["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap();
                    rvs.push(rv);
                }
                rvs
            })
        })
        .collect();
    let mut all: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 320, "every write got its own resourceVersion");
    assert_eq!(store.current_rv(), 320);
    let mut seen = Vec::new();
    while let Ok(c) = live.try_recv() {
        seen.push(c.rv);
    }
    assert_eq!(seen, (1..=320).collect::<Vec<_>>(), "live events in order");
    assert_eq!(
        store.get("pods", "default", "shared").unwrap()["n"],
        160,
        "no lost update"
    );
    drop(store);
    let reopened = Store::open(dir.path(), 100_000).unwrap();
    assert_eq!(reopened.current_rv(), 320);
    assert_eq!(reopened.list("pods", Some("default")).1.len(), 1 + 8 * 20);
    assert_eq!(
        reopened.changes_since("pods", 0).unwrap().unwrap().len(),
        320
    );
}

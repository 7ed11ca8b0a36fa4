//! ControllerListVolumeHealth: tokens, `max_entries`, and reaching every condition across pages.

use std::collections::HashSet;
use std::time::Duration;

use tonic::{Code, Status};
use volhealth_csi::v1;

use super::controller::shared_volume;
use super::{Runner, describe, expect_code, plain};
use crate::report::{Case, Outcome};
use crate::session::Session;
use crate::volumes;

const BAD_TOKEN: Case = Case {
    name: "controller.list.bad_token_aborted",
    spec: "CSI v1.13.0 ControllerListVolumeHealth errors: invalid starting_token -> ABORTED",
    description: "A starting_token the driver never returned fails with ABORTED.",
};
const MAX_ENTRIES: Case = Case {
    name: "controller.list.max_entries_respected",
    spec: "CSI v1.13.0 ControllerListVolumeHealthRequest.max_entries: the response MUST NOT hold more entries; 0 lets the plugin choose",
    description: "With max_entries=1 no page holds more than one entry, and max_entries=0 lists at the plugin's choice.",
};
const TERMINATE: Case = Case {
    name: "controller.list.tokens_terminate",
    spec: "CSI v1.13.0 ControllerListVolumeHealthResponse.next_token: empty when there are no more entries",
    description: "Paging with max_entries=1 ends with an empty next_token, and no token repeats the page it started.",
};
const REACHABLE: Case = Case {
    name: "controller.list.conditions_reachable",
    spec: "KEP-1432 ControllerListVolumeHealth: every volume with a condition is listed (healthy ones SHOULD be omitted; a plugin that lists them lists all)",
    description: "Every volume of this run that has a condition, or every one when the driver lists healthy volumes too, is reached across pages.",
};
const CONCURRENT: Case = Case {
    name: "controller.list.concurrent_create_tolerated",
    spec: "CSI v1.13.0 paging: volumes created between pages may cause duplicates or omissions, which the CO tolerates; the listing still ends",
    description: "A volume created in the middle of a paged listing does not break paging: it ends, or its token is refused with ABORTED and a restart ends.",
};

/// The cases of this module.
pub const CASES: &[Case] = &[BAD_TOKEN, MAX_ENTRIES, TERMINATE, REACHABLE, CONCURRENT];

/// What a paged listing returned.
#[derive(Debug, Default)]
struct Listing {
    entries: Vec<v1::VolumeHealth>,
    sizes: Vec<usize>,
    /// Why it stopped early, when it did.
    stopped: Option<Stop>,
}

#[derive(Debug)]
enum Stop {
    Failed(Status),
    Endless { pages: usize },
    Stuck { token: String },
}

impl Listing {
    fn ids(&self) -> HashSet<String> {
        self.entries.iter().map(|e| e.volume_id.clone()).collect()
    }
}

async fn list_all(s: &Session, max_entries: i32, max_pages: usize, mut token: String) -> Listing {
    let mut l = Listing::default();
    loop {
        match s.list_page(max_entries, &token).await {
            Err(e) => {
                l.stopped = Some(Stop::Failed(e));
                return l;
            }
            Ok(page) => {
                l.sizes.push(page.entries.len());
                l.entries.extend(page.entries);
                if page.next_token.is_empty() {
                    return l;
                }
                if !token.is_empty() && page.next_token == token {
                    l.stopped = Some(Stop::Stuck { token });
                    return l;
                }
                if l.sizes.len() >= max_pages {
                    l.stopped = Some(Stop::Endless {
                        pages: l.sizes.len(),
                    });
                    return l;
                }
                token = page.next_token;
            }
        }
    }
}

fn stop_problem(s: &Session, stop: &Stop, what: &str) -> String {
    match stop {
        Stop::Failed(e) => format!("{what} failed: {}", describe(s, e)),
        Stop::Endless { pages } => {
            format!("tokens must terminate: {what} still returned a next_token after {pages} pages")
        }
        Stop::Stuck { token } => format!(
            "tokens must terminate: {what} returned next_token {:?} for the page that started at it",
            crate::rules::shorten(token)
        ),
    }
}

/// Runs this module's cases.
pub async fn run(r: &mut Runner<'_>) {
    let s = r.s;
    if !s.caps.list {
        for case in CASES {
            r.case(*case, async {
                plain(Outcome::Skip("LIST_VOLUME_HEALTH is not advertised".into()))
            })
            .await;
        }
        return;
    }
    // Three volumes of our own make paging observable on drivers that list healthy volumes.
    let mut created = Vec::new();
    for n in 0..3 {
        if let Ok(id) = shared_volume(s, n).await {
            created.push(id);
        }
    }
    r.case(BAD_TOKEN, async {
        let token = format!("!volhealth-conformance {} not a token!", s.fixture.run_id());
        plain(expect_code(
            s,
            s.list_page(0, &token).await,
            Code::Aborted,
            "a starting_token the plugin did not return must be ABORTED",
        ))
    })
    .await;
    let seeded = seed_conditions(r, &created).await;
    let full = list_all(s, 0, super::MAX_PAGES, String::new()).await;
    let bound = full.entries.len() * 2 + 20;
    let paged = list_all(s, 1, bound, String::new()).await;
    r.case(MAX_ENTRIES, async {
        if let Some(stop @ Stop::Failed(_)) = &full.stopped {
            return plain(Outcome::Fail(stop_problem(s, stop, "listing with max_entries=0")));
        }
        if full.entries.len() < 2 {
            return plain(Outcome::Skip(format!(
                "the driver listed {} entr(ies); max_entries=1 needs at least 2 to be observable (drivers that omit healthy volumes need --inject-cmd)",
                full.entries.len()
            )));
        }
        plain(match paged.sizes.iter().max() {
            Some(&n) if n > 1 => Outcome::Fail(format!(
                "max_entries must be respected: a page for max_entries=1 held {n} entries"
            )),
            _ => Outcome::Pass,
        })
    })
    .await;
    r.case(TERMINATE, async {
        plain(match (&full.stopped, &paged.stopped) {
            (Some(stop), _) => Outcome::Fail(stop_problem(s, stop, "listing with max_entries=0")),
            (None, Some(stop)) => {
                Outcome::Fail(stop_problem(s, stop, "listing with max_entries=1"))
            }
            (None, None) => Outcome::Pass,
        })
    })
    .await;
    r.case(REACHABLE, reachable(s, &created, &full, &paged))
        .await;
    if let (Some(inj), true) = (r.injector, seeded) {
        for id in &created {
            if inj.clear("controller", id).await.is_ok() {
                s.fixture.cleared("controller", id);
            }
        }
    }
    r.case(CONCURRENT, concurrent(s, bound)).await;
}

/// With `--inject-cmd`, gives this run's volumes a condition when the driver lists too few
/// entries to page over. Returns whether it did.
async fn seed_conditions(r: &mut Runner<'_>, created: &[String]) -> bool {
    let (s, Some(inj)) = (r.s, r.injector) else {
        return false;
    };
    match s.list_page(0, "").await {
        Ok(p) if p.entries.len() < 2 && p.next_token.is_empty() => {}
        _ => return false,
    }
    for id in created {
        s.fixture.injected("controller", id);
        if inj
            .set("controller", id, "Degraded", "ConformancePaging")
            .await
            .is_err()
        {
            return false;
        }
    }
    let deadline = tokio::time::Instant::now() + s.inject_timeout;
    while tokio::time::Instant::now() < deadline {
        let listed = list_all(s, 0, super::MAX_PAGES, String::new()).await;
        if created.iter().all(|id| listed.ids().contains(id)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    true
}

async fn reachable(
    s: &Session,
    created: &[String],
    full: &Listing,
    paged: &Listing,
) -> (Outcome, Vec<String>) {
    if full.stopped.is_some() || paged.stopped.is_some() {
        return plain(Outcome::Skip(
            "the listing did not complete (see controller.list.tokens_terminate)".into(),
        ));
    }
    let lists_healthy = full.entries.iter().any(|e| e.health_statuses.is_empty());
    let mut must = Vec::new();
    for id in created {
        let has_condition = if s.caps.get {
            s.get(id)
                .await
                .map(|vh| !vh.health_statuses.is_empty())
                .unwrap_or(false)
        } else {
            false
        };
        if lists_healthy || has_condition {
            must.push(id.clone());
        }
    }
    // Conditions seen on any page must be reachable in the other listing too.
    must.extend(
        full.entries
            .iter()
            .filter(|e| !e.health_statuses.is_empty())
            .map(|e| e.volume_id.clone()),
    );
    must.sort();
    must.dedup();
    if must.is_empty() {
        return plain(Outcome::Skip(
            "no volume has a condition and the driver does not list healthy volumes (use --inject-cmd)".into(),
        ));
    }
    let (all, pages) = (full.ids(), paged.ids());
    let missing: Vec<String> = must
        .iter()
        .filter_map(|id| match (all.contains(id), pages.contains(id)) {
            (true, true) => None,
            (false, _) => Some(format!("{id:?} is missing from the max_entries=0 listing")),
            (true, false) => Some(format!("{id:?} is missing from the max_entries=1 pages")),
        })
        .collect();
    plain(super::from_problems(
        "every volume with a condition must be reachable across pages",
        missing,
    ))
}

async fn concurrent(s: &Session, bound: usize) -> (Outcome, Vec<String>) {
    if !s.caps.create_delete {
        return plain(Outcome::Skip(
            "CREATE_DELETE_VOLUME is not advertised".into(),
        ));
    }
    let first = match s.list_page(1, "").await {
        Ok(p) => p,
        Err(e) => {
            return plain(Outcome::Fail(format!(
                "listing failed: {}",
                describe(s, &e)
            )));
        }
    };
    if first.next_token.is_empty() {
        return plain(Outcome::Skip(
            "the first max_entries=1 page was the last; nothing to page across".into(),
        ));
    }
    if let Err(e) = volumes::create_volume(s, "concurrent").await {
        return plain(Outcome::Fail(format!(
            "CreateVolume between pages failed: {}",
            describe(s, &e)
        )));
    }
    let rest = list_all(s, 1, bound + 2, first.next_token).await;
    plain(match rest.stopped {
        None => Outcome::Pass,
        Some(Stop::Failed(e)) if e.code() == Code::Aborted => {
            let again = list_all(s, 1, bound + 2, String::new()).await;
            match again.stopped {
                None => Outcome::Pass,
                Some(stop) => {
                    Outcome::Fail(stop_problem(s, &stop, "a restarted listing after ABORTED"))
                }
            }
        }
        Some(stop) => Outcome::Fail(stop_problem(
            s,
            &stop,
            "continuing a listing across a CreateVolume",
        )),
    })
}

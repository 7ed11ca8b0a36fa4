//! Page tokens for ListVolumes and ControllerListVolumeHealth, and the spec-permitted paging
//! inconsistencies that `inject list-chaos` turns on.
//!
//! A token names the last volume id returned, so paging survives volumes being created or deleted
//! between pages. `a/<id>`: continue after `<id>` (with duplicates on, repeat `<id>` first);
//! `n/<id>`: continue after `<id>` without repeating (used after a page that was only a repeat, so
//! paging with `max_entries=1` still progresses).

use crate::injection::ListChaos;
use crate::volume_view::{Entry, VolumeView};
use tonic::Status;

/// A parsed page token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// From the first volume.
    Start,
    /// After this id, the previous entry may be repeated.
    After(String),
    /// After this id, without repeating.
    AfterNoRepeat(String),
}

/// Parses a token; anything this driver did not hand out is ABORTED, as the spec asks.
pub fn parse(token: &str) -> Result<Token, Status> {
    if token.is_empty() {
        return Ok(Token::Start);
    }
    let bad = || {
        Status::aborted(format!(
            "invalid starting_token {token:?}: not a token this plugin returned"
        ))
    };
    let (kind, id) = token.split_once('/').ok_or_else(bad)?;
    if !crate::records::is_valid_volume_id(id) {
        return Err(bad());
    }
    match kind {
        "a" => Ok(Token::After(id.to_string())),
        "n" => Ok(Token::AfterNoRepeat(id.to_string())),
        _ => Err(bad()),
    }
}

/// Validates `max_entries` (0 means no limit).
pub fn limit(max_entries: i32) -> Result<usize, Status> {
    match max_entries {
        n if n < 0 => Err(Status::invalid_argument(format!(
            "max_entries must not be negative, got {n}"
        ))),
        0 => Ok(usize::MAX),
        n => Ok(n as usize),
    }
}

/// Stable per-volume number used to rotate omissions across cycles.
fn spread(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether `id` is left out of the listing in cycle `cycle` (each volume in one cycle of five).
pub fn omitted(id: &str, cycle: u64) -> bool {
    spread(id).wrapping_add(cycle).is_multiple_of(5)
}

/// One page: the entries and the next token (empty at the end).
pub fn page(
    view: &VolumeView,
    token: &Token,
    max: usize,
    chaos: ListChaos,
    cycle: u64,
) -> (Vec<Entry>, String) {
    let (after, may_repeat) = match token {
        Token::Start => (None, false),
        Token::After(id) => (Some(id.as_str()), chaos.duplicates),
        Token::AfterNoRepeat(id) => (Some(id.as_str()), false),
    };
    let mut entries = Vec::new();
    let mut room = max;
    if may_repeat && let Some(prev) = after.and_then(|id| view.get(id)) {
        entries.push(prev);
        room -= 1;
        if room == 0 {
            let next = if view.page_after(after, 1).0.is_empty() {
                String::new()
            } else {
                format!("n/{}", after.unwrap_or_default())
            };
            return (entries, next);
        }
    }
    let (fresh, more) = view.page_after(after, room);
    let last = fresh.last().map(|e| e.record.id.clone());
    entries.extend(fresh);
    if chaos.omissions {
        entries.retain(|e| !omitted(&e.record.id, cycle));
    }
    let next = match (more, last) {
        (true, Some(id)) => format!("a/{id}"),
        _ => String::new(),
    };
    (entries, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_or_abort() {
        assert_eq!(parse("").unwrap(), Token::Start);
        assert_eq!(parse("a/vh-1").unwrap(), Token::After("vh-1".into()));
        assert_eq!(parse("garbage").unwrap_err().code(), tonic::Code::Aborted);
        assert_eq!(parse("x/vh-1").unwrap_err().code(), tonic::Code::Aborted);
        assert_eq!(parse("a/../x").unwrap_err().code(), tonic::Code::Aborted);
    }

    #[test]
    fn every_volume_is_omitted_in_some_cycles_only() {
        for id in ["vh-a", "vh-b", "vh-c"] {
            let hits: Vec<u64> = (0..10).filter(|c| omitted(id, *c)).collect();
            assert_eq!(hits.len(), 2, "{id}");
            assert!(hits.windows(2).all(|w| w[1] - w[0] == 5));
        }
    }

    fn view(n: usize) -> VolumeView {
        use crate::config::BackendKind;
        use crate::detect_controller::SpaceThresholds;
        use crate::records::VolumeRecord;
        let entries = (0..n)
            .map(|i| {
                let id = format!("vh-{i:04}");
                let record = VolumeRecord {
                    id: id.clone(),
                    name: id.clone(),
                    backend: BackendKind::Dir,
                    capacity_bytes: 1,
                    created_at: String::new(),
                };
                (
                    id,
                    Entry {
                        record,
                        detected: Vec::new(),
                    },
                )
            })
            .collect();
        let limits = SpaceThresholds {
            low_fraction: 0.1,
            full_bytes: 0,
        };
        VolumeView::from_entries(crate::state::StateDir::new("/nonexistent"), limits, entries)
    }

    proptest::proptest! {
        #[test]
        fn paging_ends_respects_max_and_visits_everything(n in 0usize..40, max in 1usize..6, duplicates: bool) {
            let v = view(n);
            let chaos = ListChaos { duplicates, omissions: false };
            let mut token = Token::Start;
            let mut seen = std::collections::BTreeSet::new();
            let mut pages = 0;
            loop {
                let (entries, next) = page(&v, &token, max, chaos, 1);
                proptest::prop_assert!(entries.len() <= max);
                seen.extend(entries.into_iter().map(|e| e.record.id));
                pages += 1;
                proptest::prop_assert!(pages <= 2 * n + 2, "paging does not end");
                if next.is_empty() {
                    break;
                }
                token = parse(&next).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            }
            proptest::prop_assert_eq!(seen.len(), n);
        }
    }
}

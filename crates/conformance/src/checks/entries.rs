//! The rules for every entry seen during the run, and the latency figures.

use std::collections::BTreeSet;
use std::time::Instant;

use tonic::Code;
use volhealth_csi::v1;

use super::{Runner, describe, from_problems, plain};
use crate::report::{Case, Outcome, format_duration};
use crate::rules;
use crate::session::Session;

const IDS_KNOWN: Case = Case {
    name: "entries.volume_ids_known",
    spec: "CSI v1.13.0 VolumeHealth.volume_id: required; it identifies a volume the plugin knows",
    description: "Every listed entry has a volume id, and ControllerGetVolumeHealth knows it (no NOT_FOUND).",
};
const STATUS_KNOWN: Case = Case {
    name: "entries.status_known",
    spec: "CSI v1.13.0 VolumeHealthErrorType: DEGRADED=1, INACCESSIBLE=2, DATA_LOSS=3",
    description: "Every volume health entry has a known status value.",
};
const REASON: Case = Case {
    name: "entries.reason_format",
    spec: "KEP-1432 VolumeHealthEntry.reason: required, CamelCase, at most 256 bytes",
    description: "Every reason is a non-empty CamelCase word of at most 256 bytes.",
};
const MESSAGE: Case = Case {
    name: "entries.message_length",
    spec: "KEP-1432 VolumeHealthEntry.message: at most 1024 bytes",
    description: "Every message is at most 1024 bytes.",
};
const DUPLICATES: Case = Case {
    name: "entries.no_duplicate_status_reason",
    spec: "KEP-1432 VolumeHealth.health_statuses: at most one entry per (status, reason)",
    description: "No volume report holds the same (status, reason) twice.",
};
const STORAGE: Case = Case {
    name: "storage.entries_valid",
    spec: "CSI v1.13.0 StorageHealthErrorType STORAGE_DEGRADED=1, STORAGE_UNREACHABLE=2; KEP-1432: one entry per (status, reason, volume capability)",
    description: "Every storage entry has a known status, a valid reason and message, and no (status, reason, volume capability) repeats.",
};
const LATENCY: Case = Case {
    name: "latency.report",
    spec: "issue: latency figures are reported, not judged",
    description: "Times a full ControllerListVolumeHealth pass; p50/p99 per RPC are in the summary.",
};

/// The cases of this module.
pub const CASES: &[Case] = &[
    IDS_KNOWN,
    STATUS_KNOWN,
    REASON,
    MESSAGE,
    DUPLICATES,
    STORAGE,
    LATENCY,
];

const NO_ENTRIES: &str = "no volume health entry was reported during the run (use --inject-cmd)";

/// Runs this module's cases over everything observed so far.
pub async fn run(r: &mut Runner<'_>) {
    let s = r.s;
    let observed = s.observed_volumes();
    let with_entries: Vec<&v1::VolumeHealth> = observed
        .iter()
        .map(|(_, vh)| vh)
        .filter(|vh| !vh.health_statuses.is_empty())
        .collect();
    r.case(IDS_KNOWN, ids_known(s, &observed)).await;
    for (case, rule, f) in [
        (
            STATUS_KNOWN,
            "statuses must be known VolumeHealthErrorType values",
            rules::unknown_volume_statuses as fn(&v1::VolumeHealth) -> Vec<String>,
        ),
        (
            REASON,
            "reasons must be non-empty CamelCase of at most 256 bytes",
            rules::bad_volume_reasons,
        ),
        (
            MESSAGE,
            "messages must be at most 1024 bytes",
            rules::bad_volume_messages,
        ),
        (
            DUPLICATES,
            "no duplicate (status, reason) per volume",
            rules::duplicate_volume_entries,
        ),
    ] {
        r.case(case, async {
            if with_entries.is_empty() {
                return plain(Outcome::Skip(NO_ENTRIES.into()));
            }
            let mut problems: Vec<String> = with_entries.iter().flat_map(|vh| f(vh)).collect();
            problems.sort();
            problems.dedup();
            plain(from_problems(rule, problems))
        })
        .await;
    }
    r.case(STORAGE, async {
        if !s.caps.node_storage {
            return plain(Outcome::Skip(
                "node GET_STORAGE_HEALTH is not advertised".into(),
            ));
        }
        let reports = s.observed_storage();
        if reports.iter().all(Vec::is_empty) {
            return plain(Outcome::Skip(
                "no storage health entry was reported during the run (use --inject-cmd)".into(),
            ));
        }
        let mut problems: Vec<String> = reports
            .iter()
            .flat_map(|b| rules::storage_problems(b))
            .collect();
        problems.sort();
        problems.dedup();
        plain(from_problems(
            "storage entries must follow the rules",
            problems,
        ))
    })
    .await;
    r.case(LATENCY, latency(s)).await;
}

async fn ids_known(
    s: &Session,
    observed: &[(&'static str, v1::VolumeHealth)],
) -> (Outcome, Vec<String>) {
    let listed: BTreeSet<&str> = observed
        .iter()
        .filter(|(rpc, _)| *rpc == "ControllerListVolumeHealth")
        .map(|(_, vh)| vh.volume_id.as_str())
        .collect();
    if listed.is_empty() {
        return plain(Outcome::Skip(
            "no ControllerListVolumeHealth entry was seen".into(),
        ));
    }
    let mut problems = Vec::new();
    if listed.contains("") {
        problems.push("a listed entry has an empty volume_id".to_string());
    }
    if s.caps.get {
        // Volumes of this run that were deleted in the meantime are not expected any more.
        for id in listed.iter().filter(|id| !id.is_empty()).take(50) {
            if let Err(e) = s.get(id).await
                && e.code() == Code::NotFound
            {
                problems.push(format!(
                    "listed volume {id:?} is unknown to ControllerGetVolumeHealth ({})",
                    describe(s, &e)
                ));
            }
        }
    }
    plain(from_problems(
        "listed volume ids must be present and known",
        problems,
    ))
}

async fn latency(s: &Session) -> (Outcome, Vec<String>) {
    if !s.caps.list {
        return plain(Outcome::Skip(
            "LIST_VOLUME_HEALTH is not advertised; per-RPC latency is in the summary".into(),
        ));
    }
    let started = Instant::now();
    let (mut entries, mut pages, mut token) = (0usize, 0usize, String::new());
    loop {
        match s.list_page(0, &token).await {
            Ok(p) => {
                entries += p.entries.len();
                pages += 1;
                if p.next_token.is_empty() || p.next_token == token || pages >= super::MAX_PAGES {
                    break;
                }
                token = p.next_token;
            }
            Err(e) => {
                return plain(Outcome::Fail(format!(
                    "a full list pass failed: {}",
                    describe(s, &e)
                )));
            }
        }
    }
    let note = format!(
        "full list pass: {entries} entr(ies) in {pages} page(s), {}",
        format_duration(started.elapsed())
    );
    (Outcome::Pass, vec![note])
}

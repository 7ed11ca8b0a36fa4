//! Each deliberately broken driver (see `broken/mod.rs`) fails the case for the rule it breaks,
//! with a message naming that rule, and nothing unrelated; the unbroken one fails nothing.
//! Real gRPC over unix sockets, the suite run in-process through `volhealth_conformance::run`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod broken;

use broken::Break;
use volhealth_conformance::{Options, Outcome, Report};

async fn run(brk: Break) -> Report {
    run_on(broken::start(brk), brk, false).await
}

/// Runs the suite against `driver`, with its injection command when `inject`.
async fn run_on(driver: broken::Running, brk: Break, inject: bool) -> Report {
    let mut progress = Vec::new();
    let mut options = Options::new(driver.endpoint.clone());
    if inject {
        options.inject_cmd = Some(driver.inject_cmd.clone());
        options.inject_timeout = std::time::Duration::from_secs(3);
    }
    let report = volhealth_conformance::run(options, &mut progress, std::future::pending::<()>())
        .await
        .unwrap_or_else(|e| panic!("{brk:?}: the suite did not run: {e}"));
    assert!(
        report.cleanup_problems.is_empty(),
        "{brk:?}: cleanup: {:?}",
        report.cleanup_problems
    );
    report
}

fn failures(report: &Report) -> Vec<(&'static str, String)> {
    report
        .results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Fail(why) => Some((r.case.name, why.clone())),
            _ => None,
        })
        .collect()
}

/// The outcome of case `name`, which must have run.
fn outcome<'a>(report: &'a Report, name: &str) -> &'a Outcome {
    let result = report.results.iter().find(|r| r.case.name == name);
    &result.expect(name).outcome
}

/// `brk` fails `case` with a message containing every word of `words`, and no other case fails
/// except those in `also` (consequences of the same broken rule).
async fn breaks(brk: Break, case: &str, words: &[&str], also: &[&str]) {
    let report = run(brk).await;
    let failed = failures(&report);
    let Some((_, why)) = failed.iter().find(|(name, _)| *name == case) else {
        panic!(
            "{brk:?}: {case} did not fail; failures: {failed:?}\n{}",
            report.summary()
        );
    };
    for w in words {
        assert!(
            why.contains(w),
            "{brk:?}: {case} message lacks {w:?}: {why}"
        );
    }
    let unrelated: Vec<_> = failed
        .iter()
        .filter(|(name, _)| *name != case && !also.contains(name))
        .collect();
    assert!(
        unrelated.is_empty(),
        "{brk:?}: unrelated failures {unrelated:?}"
    );
    assert!(!report.success());
}

#[tokio::test]
async fn the_unbroken_driver_fails_nothing() {
    let report = run(Break::Nothing).await;
    assert!(failures(&report).is_empty(), "{}", report.summary());
    assert!(report.success());
    // Its own unhealthy volumes give the entry rules something to check: they ran, not skipped.
    for name in [
        "entries.status_known",
        "entries.reason_format",
        "entries.no_duplicate_status_reason",
        "storage.entries_valid",
        "controller.list.max_entries_respected",
        "controller.list.conditions_reachable",
        "node.get.stage_attempted",
    ] {
        assert_eq!(outcome(&report, name), &Outcome::Pass, "{name}");
    }
}

#[tokio::test]
async fn list_without_get() {
    breaks(
        Break::ListWithoutGet,
        "capabilities.list_implies_get",
        &["LIST_VOLUME_HEALTH MUST also support GET_VOLUME_HEALTH"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn unknown_volume_answered_with_internal() {
    breaks(
        Break::UnknownVolumeInternal,
        "controller.get.unknown_volume_not_found",
        &["NOT_FOUND", "Internal"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn node_unknown_volume_answered_ok() {
    breaks(
        Break::NodeUnknownVolumeOk,
        "node.get.unknown_volume_not_found",
        &["NOT_FOUND", "succeeded"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn empty_volume_id_accepted() {
    breaks(
        Break::EmptyIdAccepted,
        "controller.get.empty_volume_id_invalid_argument",
        &["INVALID_ARGUMENT", "succeeded"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn bad_token_not_aborted() {
    breaks(
        Break::BadTokenInvalidArgument,
        "controller.list.bad_token_aborted",
        &["ABORTED", "InvalidArgument"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn max_entries_ignored() {
    breaks(
        Break::MaxEntriesIgnored,
        "controller.list.max_entries_respected",
        &["max_entries must be respected"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn never_ending_tokens() {
    breaks(
        Break::EndlessTokens,
        "controller.list.tokens_terminate",
        &["tokens must terminate"],
        &["controller.list.concurrent_create_tolerated"],
    )
    .await;
}

#[tokio::test]
async fn unknown_status_value() {
    breaks(
        Break::UnknownStatus,
        "entries.status_known",
        &["status 7", "VolumeHealthErrorType"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn lowercase_reason() {
    breaks(
        Break::LowercaseReason,
        "entries.reason_format",
        &["CamelCase", "volumeGone"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn too_long_reason() {
    breaks(
        Break::TooLongReason,
        "entries.reason_format",
        &["256-byte"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn too_long_message() {
    breaks(
        Break::TooLongMessage,
        "entries.message_length",
        &["1025 bytes", "1024-byte"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn duplicate_status_reason() {
    breaks(
        Break::DuplicateStatusReason,
        "entries.no_duplicate_status_reason",
        &["duplicate (status, reason)", "SlowIo"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn duplicate_storage_entry() {
    breaks(
        Break::DuplicateStorageEntry,
        "storage.entries_valid",
        &["appears more than once"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn secrets_echoed_in_errors() {
    breaks(
        Break::SecretsEchoed,
        "secrets.not_echoed",
        &["must never be echoed", "volhealth-conformance-canary"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn stage_attempted_volume_refused() {
    breaks(
        Break::RefuseStageAttempted,
        "node.get.stage_attempted",
        &["stage was attempted", "FailedPrecondition"],
        &[],
    )
    .await;
}

#[tokio::test]
async fn the_report_never_shows_a_secret_value() {
    let report = run(Break::SecretsEchoed).await;
    let text = report.summary() + &volhealth_conformance::junit::render(&report);
    assert!(
        !text.contains("canary-"),
        "a canary value leaked into the report"
    );
}

/// The first of `nodes` tagged `tag`.
fn tagged<'a, 'input>(
    mut nodes: impl Iterator<Item = roxmltree::Node<'a, 'input>>,
    tag: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    nodes.find(|n| n.has_tag_name(tag))
}

#[tokio::test]
async fn junit_of_a_failing_run_has_one_failure_per_failed_case() {
    let report = run(Break::BadTokenInvalidArgument).await;
    let xml = volhealth_conformance::junit::render(&report);
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    let suite = tagged(doc.descendants(), "testsuite").expect("testsuite");
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), volhealth_conformance::all_cases().len());
    let failed: Vec<_> = cases
        .iter()
        .filter(|c| tagged(c.children(), "failure").is_some())
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(suite.attribute("failures"), Some("1"));
    assert_eq!(
        failed[0].attribute("name"),
        Some("controller.list.bad_token_aborted")
    );
    let failure = tagged(failed[0].children(), "failure").expect("failure");
    assert!(
        failure
            .attribute("message")
            .is_some_and(|m| m.contains("ABORTED"))
    );
    let skipped = cases
        .iter()
        .filter(|c| tagged(c.children(), "skipped").is_some())
        .count();
    assert_eq!(
        suite.attribute("skipped"),
        Some(skipped.to_string().as_str())
    );
    assert_eq!(skipped, report.count("SKIP"));
}

#[tokio::test]
async fn a_driver_that_omits_healthy_volumes_gets_paging_checked_through_injection() {
    let report = run_on(
        broken::start_with(Break::Nothing, true),
        Break::Nothing,
        true,
    )
    .await;
    assert!(failures(&report).is_empty(), "{}", report.summary());
    for name in [
        "controller.list.max_entries_respected",
        "controller.list.conditions_reachable",
        "inject.controller.inaccessible",
        "inject.node.degraded",
        "inject.storage.storage_unreachable",
        "entries.reason_format",
    ] {
        let summary = report.summary();
        assert_eq!(outcome(&report, name), &Outcome::Pass, "{name}: {summary}");
    }
}

#[tokio::test]
async fn conditions_that_never_clear() {
    let report = run_on(broken::start(Break::NeverClears), Break::NeverClears, true).await;
    let failed = failures(&report);
    let inject: Vec<_> = failed
        .iter()
        .filter(|(name, _)| name.starts_with("inject."))
        .collect();
    assert_eq!(inject.len(), 8, "{}", report.summary());
    for (name, why) in &inject {
        assert!(why.contains("must disappear"), "{name}: {why}");
    }
}

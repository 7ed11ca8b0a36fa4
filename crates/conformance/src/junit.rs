//! JUnit XML for CI systems: one `testsuite`, one `testcase` per case, `failure` / `skipped`,
//! written by quick-junit (which escapes markup and drops what XML cannot carry).

use crate::report::{Outcome, Report, format_duration};
use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

/// Name of the test suite in the XML.
pub const SUITE: &str = "volhealth-conformance";

/// Renders `report` as a JUnit XML document.
pub fn render(report: &Report) -> String {
    let mut suite = TestSuite::new(SUITE);
    suite.set_time(report.duration);
    suite.add_property(Property::new("driver", report.driver.as_str()));
    for l in &report.latency {
        suite.add_property(Property::new(
            format!("latency.{}", l.rpc),
            format!(
                "calls={} p50={} p99={}",
                l.calls,
                format_duration(l.p50),
                format_duration(l.p99)
            ),
        ));
    }
    for r in &report.results {
        let reason = r.outcome.reason();
        let status = match &r.outcome {
            Outcome::Pass => TestCaseStatus::success(),
            Outcome::Fail(_) => {
                let mut failed = TestCaseStatus::non_success(NonSuccessKind::Failure);
                failed
                    .set_message(reason)
                    .set_type(r.case.spec)
                    .set_description(format!("{}\n{}\n{reason}", r.case.description, r.case.spec));
                failed
            }
            Outcome::Skip(_) => {
                let mut skipped = TestCaseStatus::skipped();
                skipped.set_message(reason);
                skipped
            }
        };
        let (group, _) = r.case.name.split_once('.').unwrap_or((r.case.name, ""));
        let mut case = TestCase::new(r.case.name, status);
        let mut out = format!("{}\nspec: {}", r.case.description, r.case.spec);
        for n in &r.notes {
            out.push('\n');
            out.push_str(n);
        }
        case.set_classname(format!("{SUITE}.{group}"))
            .set_time(r.duration)
            .set_system_out(out);
        suite.add_test_case(case);
    }
    // CI systems read the skipped count from the suite; quick-junit counts only disabled ones.
    suite
        .extra
        .insert("skipped".into(), report.count("SKIP").to_string().into());
    let mut document = quick_junit::Report::new(SUITE);
    document.set_time(report.duration).add_test_suite(suite);
    document.to_string().unwrap_or_else(|e| {
        // Only a failing writer can make serialising fail, and a String never does.
        format!("<!-- the JUnit report could not be written: {e} -->\n")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Case, CaseResult};
    use std::time::Duration;

    fn report(reason: &str) -> Report {
        Report {
            driver: "d<&>\"river".into(),
            results: vec![CaseResult {
                case: Case {
                    name: "controller.list.case",
                    spec: "spec <ref>",
                    description: "what it checks",
                },
                outcome: Outcome::Fail(reason.into()),
                duration: Duration::from_millis(12),
                notes: vec!["a note & more".into()],
            }],
            latency: Vec::new(),
            interrupted: false,
            cleanup_problems: Vec::new(),
            duration: Duration::from_secs(1),
        }
    }

    #[test]
    fn markup_and_control_characters_stay_well_formed() {
        let xml = render(&report("a<b>&\"'\u{1}done"));
        assert!(!xml.contains('\u{1}'), "{xml}");
        assert!(xml.contains("a&lt;b&gt;&amp;"), "{xml}");
        assert!(xml.contains("d&lt;&amp;&gt;"), "{xml}");
        assert!(xml.contains(r#"classname="volhealth-conformance.controller""#));
        assert!(xml.contains(r#"skipped="0""#));
        assert!(xml.contains(r#"failures="1""#));
    }
}

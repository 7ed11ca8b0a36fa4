//! JUnit XML for CI systems: one `testsuite`, one `testcase` per case, `failure` / `skipped`.

use std::fmt::Write as _;

use crate::report::{Outcome, Report, format_duration};

/// Name of the test suite in the XML.
pub const SUITE: &str = "volhealth-conformance";

/// Renders `report` as a JUnit XML document.
pub fn render(report: &Report) -> String {
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let tests = report.results.len();
    let _ = writeln!(
        s,
        "<testsuites name=\"{SUITE}\" tests=\"{tests}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">",
        report.count("FAIL"),
        report.count("SKIP"),
        report.duration.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "  <testsuite name=\"{SUITE}\" tests=\"{tests}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">",
        report.count("FAIL"),
        report.count("SKIP"),
        report.duration.as_secs_f64()
    );
    let _ = writeln!(s, "    <properties>");
    let _ = writeln!(
        s,
        "      <property name=\"driver\" value=\"{}\"/>",
        escape(&report.driver)
    );
    for l in &report.latency {
        let _ = writeln!(
            s,
            "      <property name=\"latency.{}\" value=\"calls={} p50={} p99={}\"/>",
            escape(&l.rpc),
            l.calls,
            format_duration(l.p50),
            format_duration(l.p99)
        );
    }
    let _ = writeln!(s, "    </properties>");
    for r in &report.results {
        let (group, _) = r.case.name.split_once('.').unwrap_or((r.case.name, ""));
        let _ = write!(
            s,
            "    <testcase name=\"{}\" classname=\"{SUITE}.{}\" time=\"{:.3}\">",
            escape(r.case.name),
            escape(group),
            r.duration.as_secs_f64()
        );
        match &r.outcome {
            Outcome::Pass => {}
            Outcome::Fail(reason) => {
                let _ = write!(
                    s,
                    "\n      <failure message=\"{}\" type=\"{}\">{}</failure>",
                    escape(reason),
                    escape(r.case.spec),
                    escape(&format!(
                        "{}\n{}\n{reason}",
                        r.case.description, r.case.spec
                    ))
                );
            }
            Outcome::Skip(reason) => {
                let _ = write!(s, "\n      <skipped message=\"{}\"/>", escape(reason));
            }
        }
        let mut out = format!("{}\nspec: {}", r.case.description, r.case.spec);
        for n in &r.notes {
            out.push('\n');
            out.push_str(n);
        }
        let _ = writeln!(
            s,
            "\n      <system-out>{}</system-out>\n    </testcase>",
            escape(&out)
        );
    }
    let _ = writeln!(s, "  </testsuite>\n</testsuites>");
    s
}

/// Escapes text for XML attributes and content; drops characters XML 1.0 cannot carry.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => {
                let _ = write!(out, "&#{};", c as u32);
            }
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(
            escape("a<b>&\"'\u{1}"),
            "a&lt;b&gt;&amp;&quot;&apos;\u{FFFD}"
        );
        assert_eq!(escape("x\ny"), "x&#10;y");
    }
}

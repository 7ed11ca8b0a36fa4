//! Durations as Kubernetes components spell them on the command line: `90s`, `1m`, `1m30s`, `500ms`, `1h`.

use crate::error::{Error, Result};
use std::time::Duration;

/// Longer durations are refused: deadlines computed from them must stay representable.
const MAX_SECONDS: f64 = 10.0 * 365.0 * 24.0 * 3600.0;

/// Parses a Go-style duration made of `<number><unit>` parts (`h`, `m`, `s`, `ms`, `us`, `ns`).
///
/// A plain `0` is accepted; any other number needs a unit, so `15` is refused rather than guessed.
pub fn parse(input: &str) -> Result<Duration> {
    let fail = |reason: String| Error::Duration {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(fail("empty".into()));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(fail(format!("expected a number at {rest:?}")));
        }
        let number: f64 = rest[..num_len]
            .parse()
            .map_err(|_| fail(format!("{:?} is not a number", &rest[..num_len])))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            "" => return Err(fail("missing unit (use h, m, s or ms)".into())),
            other => return Err(fail(format!("unknown unit {other:?} (use h, m, s or ms)"))),
        };
        rest = &rest[unit_len..];
        let part = number * seconds_per_unit;
        if !part.is_finite() || part + total.as_secs_f64() > MAX_SECONDS {
            return Err(fail("longer than ten years".into()));
        }
        total += Duration::from_secs_f64(part);
    }
    Ok(total)
}

/// Formats a duration the way [`parse`] reads it (`1m30s`, `500ms`), to the millisecond.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    let (h, rem) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rem) = (rem / 60_000, rem % 60_000);
    let (s, ms) = (rem / 1000, rem % 1000);
    let mut out = String::new();
    for (v, u) in [(h, "h"), (m, "m"), (s, "s"), (ms, "ms")] {
        if v > 0 {
            out.push_str(&format!("{v}{u}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_usual_spellings() {
        assert_eq!(parse("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("1h2m3s").unwrap(), Duration::from_secs(3723));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn refuses_ambiguous_or_broken_input() {
        for bad in [
            "",
            "15",
            "s",
            "1x",
            "m1",
            "1m30",
            "-1s",
            "1m-2s",
            "1e400s",
            "1..2s",
            "100000h",
            "87600h1s",
            "99999999999999999999h",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn errors_name_the_input() {
        let e = parse("1x").unwrap_err().to_string();
        assert!(e.contains("\"1x\"") && e.contains("unknown unit"), "{e}");
    }

    #[test]
    fn format_round_trips() {
        for d in [
            Duration::from_secs(90),
            Duration::from_millis(1500),
            Duration::from_secs(3600),
        ] {
            assert_eq!(parse(&format(d)).unwrap(), d);
        }
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::ZERO), "0s");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".{0,24}") {
            let _ = parse(&s);
        }

        #[test]
        fn minutes_and_seconds_add_up(m in 0u64..1000, s in 0u64..60) {
            proptest::prop_assert_eq!(parse(&format!("{m}m{s}s")).unwrap(), Duration::from_secs(m * 60 + s));
        }
    }
}

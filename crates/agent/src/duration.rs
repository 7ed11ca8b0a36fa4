//! Durations as Kubernetes components spell them on the command line: `90s`, `1m`, `1m30s`, `500ms`, `1h`.

use crate::error::{Error, Result};
use std::time::Duration;

/// Longer durations are refused: deadlines computed from them must stay representable.
const MAX_SECONDS: f64 = 10.0 * 365.0 * 24.0 * 3600.0;

/// Parses a Go-style duration made of `<number><unit>` parts (`h`, `m`, `s`, `ms`, `us`, `ns`).
///
/// A plain `0` is accepted; any other number needs a unit, so `15` is refused rather than guessed.
pub fn parse(input: &str) -> Result<Duration> {
    let fail = |reason: &str| Error::Duration {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(fail("empty"));
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
            return Err(fail("expected a number"));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| fail("bad number"))?;
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
            "" => return Err(fail("missing unit")),
            _ => return Err(fail("unknown unit")),
        };
        rest = &rest[unit_len..];
        let part = number * seconds_per_unit;
        if !part.is_finite() || part + total.as_secs_f64() > MAX_SECONDS {
            return Err(fail("longer than ten years"));
        }
        total += Duration::from_secs_f64(part);
    }
    Ok(total)
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
    fn refuses_garbage() {
        for bad in [
            "", "15", "s", "1x", "m1", "1m-2s", "1e400s", "1..2s", "100000h", "87600h1s",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".{0,20}") {
            let _ = parse(&s);
        }

        #[test]
        fn minutes_and_seconds_add_up(m in 0u64..1000, s in 0u64..60) {
            proptest::prop_assert_eq!(parse(&format!("{m}m{s}s")).unwrap(), Duration::from_secs(m * 60 + s));
        }
    }
}

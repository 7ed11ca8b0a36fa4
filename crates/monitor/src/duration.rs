//! Go-style duration flags (`90s`, `1m`, `1m30s`, `500ms`, `1h`), as the upstream sidecar takes them.

use std::time::Duration;

/// Parses a duration made of one or more `<number><unit>` parts, units `h`, `m`, `s`, `ms`.
///
/// A bare `0` is accepted (zero); any other bare number is refused because its unit would be a guess.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("{text:?}: expected a number at {rest:?}"));
        }
        let number: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{text:?}: {:?} is not a number", &rest[..digits]))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let seconds_per_unit = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "" => return Err(format!("{text:?}: missing unit (use h, m, s or ms)")),
            other => {
                return Err(format!(
                    "{text:?}: unknown unit {other:?} (use h, m, s or ms)"
                ));
            }
        };
        let part = Duration::try_from_secs_f64(number * seconds_per_unit)
            .map_err(|_| format!("{text:?}: out of range"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("{text:?}: out of range"))?;
    }
    Ok(total)
}

/// Formats a duration the way [`parse`] reads it (`1m30s`, `500ms`).
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
    fn parses_the_upstream_forms() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1h2m3s"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_ambiguous_or_broken_input() {
        for bad in [
            "",
            "15",
            "1x",
            "s",
            "1m30",
            "-1s",
            "1..2s",
            "99999999999999999999h",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn format_round_trips() {
        for d in [
            Duration::from_secs(90),
            Duration::from_millis(1500),
            Duration::from_secs(3600),
        ] {
            assert_eq!(parse(&format(d)), Ok(d));
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in ".{0,24}") {
            let _ = parse(&s);
        }
    }
}

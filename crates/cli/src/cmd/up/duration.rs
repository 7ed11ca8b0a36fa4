//! Duration flags the way Kubernetes components spell them: `5s`, `1m30s`, `500ms`, `2h`.

use std::time::Duration;

/// Parses `<number><unit>` parts (units `h`, `m`, `s`, `ms`); a bare `0` is zero, any other bare
/// number is refused because its unit would be a guess.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration; expected e.g. 5s, 500ms, 1m30s".into());
    }
    let mut total = 0.0_f64;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{text:?} is not a duration; expected e.g. 5s, 500ms, 1m30s"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "" => return Err(format!("{text:?} lacks a unit; write e.g. {number}s")),
            other => {
                return Err(format!(
                    "{text:?}: unknown unit {other:?}; use h, m, s or ms"
                ));
            }
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("{text:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::parse;
    use std::time::Duration;

    #[test]
    fn kubernetes_spellings() {
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        for bad in ["", "5", "5x", "s", "-1s"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}

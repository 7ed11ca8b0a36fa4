//! How a legacy condition's message becomes a v1.13 health entry: rules matched in order, each
//! a driver (or any), a message pattern, the status and reason to report and how to normalise
//! the message. A message no rule matches is `Degraded` / `VolumeConditionAbnormal` with the
//! driver's words.
//!
//! Patterns are [`glob`]s (`*` matches any run of characters, `?` any one, everything else only
//! itself), so a rules file cannot make matching cost more than the message's length times the
//! pattern's.

use serde::Deserialize;
use volhealth_csi::v1::VolumeHealthErrorType;
use volhealth_model::pattern::glob;

/// The rules volhealth ships, from the messages the drivers' public sources write.
pub const SHIPPED: &str = include_str!("../legacy-rules.yaml");

/// The reason of an abnormal condition that no rule matches.
pub const DEFAULT_REASON: &str = "VolumeConditionAbnormal";

/// Most rules a file may hold.
const MAX_RULES: usize = 512;
/// Longest pattern, in bytes.
const MAX_PATTERN: usize = 1024;
/// Longest reason, in bytes (the API's limit).
const MAX_REASON: usize = 256;

/// A rules file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Not YAML of the expected shape.
    #[error("the legacy rules are not valid: {0}")]
    Parse(String),
    /// A rule that breaks a limit or names an unknown value.
    #[error("legacy rule {index} ({pattern:?}): {problem}")]
    Rule {
        /// Position in the file, from 1.
        index: usize,
        /// Its pattern.
        pattern: String,
        /// What is wrong.
        problem: String,
    },
}

/// One way of making a message stable across polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Normalize {
    /// Removes dates and times (`2006-01-02 15:04:05`, RFC 3339, with fractions and zones), so a
    /// message that stamps when it was made does not rewrite the status every poll.
    StripTimestamps,
    /// Replaces every run of digits with `N` (a counter such as "for 42 seconds").
    ReplaceNumbers,
    /// Sorts every comma-separated list of single words (`n3, n1, n2` → `n1, n2, n3`).
    SortLists,
}

/// The status a rule reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Status {
    /// `Degraded`.
    Degraded,
    /// `Inaccessible`.
    Inaccessible,
    /// `DataLoss`.
    DataLoss,
}

impl Status {
    /// The CSI error type.
    pub fn error_type(self) -> VolumeHealthErrorType {
        match self {
            Status::Degraded => VolumeHealthErrorType::Degraded,
            Status::Inaccessible => VolumeHealthErrorType::Inaccessible,
            Status::DataLoss => VolumeHealthErrorType::DataLoss,
        }
    }
}

/// One rule, as written in a rules file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rule {
    /// The CSI driver name it applies to; every driver when absent.
    #[serde(default)]
    pub driver: Option<String>,
    /// Glob over the driver's message.
    #[serde(rename = "match")]
    pub pattern: String,
    /// The status to report.
    pub status: Status,
    /// The CamelCase reason to report.
    pub reason: String,
    /// How to normalise the message.
    #[serde(default)]
    pub normalize: Vec<Normalize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rules: Vec<Rule>,
}

/// What a rule (or the default) made of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    /// The status to report.
    pub status: Status,
    /// The reason to report.
    pub reason: String,
    /// The message, normalised.
    pub message: String,
}

/// Rules in the order they are tried.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    /// The shipped rules.
    pub fn shipped() -> Result<Rules, RulesError> {
        Rules::parse(SHIPPED)
    }

    /// Rules from `yaml` (a mapping with a `rules` list).
    pub fn parse(yaml: &str) -> Result<Rules, RulesError> {
        let file: File =
            serde_saphyr::from_str(yaml).map_err(|e| RulesError::Parse(e.to_string()))?;
        if file.rules.len() > MAX_RULES {
            return Err(RulesError::Parse(format!(
                "{} rules, at most {MAX_RULES} are allowed",
                file.rules.len()
            )));
        }
        for (i, rule) in file.rules.iter().enumerate() {
            let bad = |problem: String| RulesError::Rule {
                index: i + 1,
                pattern: rule.pattern.chars().take(80).collect(),
                problem,
            };
            if rule.pattern.is_empty() || rule.pattern.len() > MAX_PATTERN {
                return Err(bad(format!("the pattern must be 1 to {MAX_PATTERN} bytes")));
            }
            if !is_camel_case(&rule.reason) {
                return Err(bad(format!(
                    "the reason {:?} must be CamelCase ASCII letters and digits, 1 to {MAX_REASON} bytes",
                    rule.reason
                )));
            }
        }
        Ok(Rules { rules: file.rules })
    }

    /// These rules first, then `other`'s.
    pub fn then(mut self, other: Rules) -> Rules {
        self.rules.extend(other.rules);
        self
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// What an abnormal condition with `message` from `driver` reports.
    pub fn map(&self, driver: &str, message: &str) -> Mapped {
        for rule in &self.rules {
            if rule.driver.as_deref().is_some_and(|d| d != driver) {
                continue;
            }
            if glob(&rule.pattern, message) {
                let mut text = message.to_string();
                for n in &rule.normalize {
                    text = match n {
                        Normalize::StripTimestamps => strip_timestamps(&text),
                        Normalize::ReplaceNumbers => replace_numbers(&text),
                        Normalize::SortLists => sort_lists(&text),
                    };
                }
                return Mapped {
                    status: rule.status,
                    reason: rule.reason.clone(),
                    message: text,
                };
            }
        }
        Mapped {
            status: Status::Degraded,
            reason: DEFAULT_REASON.to_string(),
            message: message.to_string(),
        }
    }
}

fn is_camel_case(reason: &str) -> bool {
    !reason.is_empty()
        && reason.len() <= MAX_REASON
        && reason.starts_with(|c: char| c.is_ascii_uppercase())
        && reason.chars().all(|c| c.is_ascii_alphanumeric())
}

/// `text` without dates and times, with the spaces around what was removed collapsed.
pub fn strip_timestamps(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match timestamp_len(&b[i..]) {
            Some(n) if i == 0 || !b[i - 1].is_ascii_alphanumeric() => i += n,
            _ => {
                let ch = text[i..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&text[i..i + ch]);
                i += ch;
            }
        }
    }
    let collapsed: Vec<&str> = out.split_whitespace().collect();
    let mut joined = collapsed.join(" ");
    for p in [" ,", " .", " ;", " )"] {
        joined = joined.replace(p, &p[1..]);
    }
    joined.trim_end_matches([' ', ',']).to_string()
}

/// The length of a date-time at the start of `b`: `YYYY-MM-DD`, then `T` or a space and
/// `HH:MM:SS`, optional fraction, optional zone (`Z`, `±HH:MM`, ` -0700`, ` UTC`, ` MST`).
fn timestamp_len(b: &[u8]) -> Option<usize> {
    let digits =
        |at: usize, n: usize| b.len() >= at + n && b[at..at + n].iter().all(u8::is_ascii_digit);
    if !(digits(0, 4)
        && b.get(4) == Some(&b'-')
        && digits(5, 2)
        && b.get(7) == Some(&b'-')
        && digits(8, 2))
    {
        return None;
    }
    let mut n = 10;
    if matches!(b.get(n), Some(b'T' | b' '))
        && digits(n + 1, 2)
        && b.get(n + 3) == Some(&b':')
        && digits(n + 4, 2)
        && b.get(n + 6) == Some(&b':')
        && digits(n + 7, 2)
    {
        n += 9;
        if b.get(n) == Some(&b'.') {
            let frac = b[n + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if frac > 0 {
                n += 1 + frac;
            }
        }
        if b.get(n) == Some(&b'Z') {
            n += 1;
        } else if matches!(b.get(n), Some(b'+' | b'-')) && digits(n + 1, 2) {
            n += 3;
            if b.get(n) == Some(&b':') && digits(n + 1, 2) {
                n += 3;
            } else if digits(n, 2) {
                n += 2;
            }
        }
        // Go's default format: ` -0700 MST`.
        if b.get(n) == Some(&b' ') && matches!(b.get(n + 1), Some(b'+' | b'-')) && digits(n + 2, 4)
        {
            n += 6;
        }
        let zone = b[n..]
            .iter()
            .skip(1)
            .take_while(|c| c.is_ascii_uppercase())
            .count();
        if b.get(n) == Some(&b' ')
            && (3..=5).contains(&zone)
            && !b.get(n + 1 + zone).is_some_and(u8::is_ascii_alphanumeric)
        {
            n += 1 + zone;
        }
    }
    Some(n)
}

/// `text` with every run of ASCII digits replaced by `N`.
pub fn replace_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

/// `text` with every comma-separated list of two or more single words sorted.
pub fn sort_lists(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        // A list: words ending in ',' followed by one that does not.
        let mut j = i;
        while j < words.len()
            && words[j].len() > 1
            && words[j].ends_with(',')
            && !words[j][..words[j].len() - 1].contains(',')
        {
            j += 1;
        }
        if j > i && j < words.len() && !words[j].is_empty() {
            let last = words[j];
            let (tail, rest) = match last.find(['.', ';', ')']) {
                Some(k) if k > 0 => (&last[..k], &last[k..]),
                _ => (last, ""),
            };
            let mut items: Vec<&str> = words[i..j].iter().map(|w| &w[..w.len() - 1]).collect();
            items.push(tail);
            items.sort_unstable();
            let n = items.len();
            for (k, item) in items.into_iter().enumerate() {
                if k + 1 < n {
                    out.push(format!("{item},"));
                } else {
                    out.push(format!("{item}{rest}"));
                }
            }
            i = j + 1;
        } else {
            out.push(words[i].to_string());
            i += 1;
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests;

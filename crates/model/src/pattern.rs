//! The patterns that settings match condition text with: the legacy bridge's message rules and
//! the remediation policy's reasons and drivers. `*` matches any run of characters, `?` any one
//! character, and everything else only itself; there is no escape, class or alternation, so
//! text such as `[errno 5]` or `{a,b}` in a pattern means just that.

/// Whether `text` matches `pattern`. Linear in the text per star at most (the classic
/// backtrack-to-last-star walk), never exponential.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn stars_and_question_marks_match_and_the_rest_is_literal() {
        assert!(glob("*", ""));
        assert!(glob("a*c", "abbbc"));
        assert!(glob("D?sk*e", "DiskFailure"));
        assert!(!glob("Disk?", "Disk"));
        assert!(glob("failed [errno 5]*", "failed [errno 5] on sda"));
        assert!(!glob("failed [errno 5]", "failed e"));
        assert!(glob("{a,b}", "{a,b}"));
        assert!(!glob("{a,b}", "a"));
    }

    #[test]
    fn a_literal_star_or_question_mark_in_the_text_is_matched_too() {
        assert!(glob("is it attached?", "is it attached?"));
        assert!(glob("100*", "100*"));
    }
}

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
    fn brackets_and_braces_are_only_themselves() {
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

    #[test]
    fn message_patterns_as_the_legacy_bridge_s_rules_use_them() {
        assert!(glob("*", ""));
        assert!(glob("a*c", "abbbc"));
        assert!(glob("*b*", "abc"));
        assert!(!glob("a*c", "abcd"));
        assert!(glob("The *", "The volume"));
        assert!(!glob("x", "xx"));
        // Many stars over a long non-matching text stay cheap (no exponential backtracking).
        let text = "a".repeat(2000);
        assert!(!glob(
            &"*a".repeat(50).to_string().replace("*a*a", "*a*b"),
            &text
        ));
    }

    #[test]
    fn reason_and_driver_patterns_as_the_remediation_policy_uses_them() {
        assert!(glob("*", ""));
        assert!(glob("*", "DiskFailure"));
        assert!(glob("Disk*", "DiskFailure"));
        assert!(glob("*Failure", "DiskFailure"));
        assert!(glob("D?sk*e", "DiskFailure"));
        assert!(glob("DiskFailure", "DiskFailure"));
        assert!(!glob("DiskFailure", "DiskFailures"));
        assert!(!glob("Disk?", "Disk"));
        assert!(glob("*.csi.*", "local.csi.example.com"));
        assert!(!glob("*.csi", "local.csi.example.com"));
    }
}

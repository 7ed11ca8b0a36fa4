//! The open-files limit. Every component raises its soft limit to the hard limit as it starts,
//! as Go programs (kube-apiserver and the kubelet among them) do since Go 1.19: a server with
//! many clients holds a descriptor per connection, and a soft limit of 1,024 is a default of
//! the shell, not a choice of the operator, who sets the hard limit.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// The soft limit on open files; `None` when unlimited or unreadable.
pub fn soft() -> Option<u64> {
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    limited(soft)
}

/// Raises the soft limit on open files to the hard limit. Returns the soft limit in force
/// afterwards (`None` when unlimited or unreadable); a refusal keeps the old limit.
pub fn raise_to_hard() -> Option<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return limited(hard);
    }
    limited(soft)
}

fn limited(n: u64) -> Option<u64> {
    (n != nix::libc::RLIM_INFINITY).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_reaches_the_hard_limit_and_never_lowers() {
        let (before, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        let after = raise_to_hard();
        let (now, hard_now) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(hard_now, hard, "the hard limit is left alone");
        assert!(now >= before, "the soft limit never falls");
        assert_eq!(now, hard, "the soft limit is the hard limit");
        assert_eq!(after, limited(now));
        assert_eq!(soft(), limited(now));
    }
}

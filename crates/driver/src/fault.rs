//! Injected RPC faults: fail a method with a gRPC code at a rate, and/or answer late.

use crate::injection_watch::InjectionWatch;
use std::time::Duration;

/// A fault decided for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Wait this long before answering.
    pub delay: Duration,
    /// Then fail with this gRPC code number (None: answer normally).
    pub fail_code: Option<i32>,
    /// The failure's message, when the injection gave one.
    pub message: Option<String>,
}

/// Decides what happens to one call of `method`; `roll` is a uniform number in [0, 1).
pub fn decide(watch: &InjectionWatch, method: &str, roll: f64) -> Option<Decision> {
    let inj = watch.current();
    let fault = inj.fault(method)?;
    let fail_code = (fault.code != 0 && roll < fault.rate).then_some(fault.code);
    Some(Decision {
        delay: Duration::from_millis(fault.delay_ms),
        fail_code,
        message: fault.message.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::injection::{self, RpcFault};
    use crate::state::StateDir;

    #[test]
    fn rate_decides_failure_and_delay_always_applies() {
        let (_dir, state) = StateDir::temp();
        let fault = RpcFault {
            method: "Probe".into(),
            code: 14,
            rate: 0.25,
            delay_ms: 30,
            message: None,
        };
        injection::update(&state, |i| i.set_fault(fault)).unwrap();
        let watch = InjectionWatch::new(state);
        let fail = decide(&watch, "Probe", 0.1).unwrap();
        assert_eq!(fail.fail_code, Some(14));
        assert_eq!(fail.delay, Duration::from_millis(30));
        let pass = decide(&watch, "Probe", 0.9).unwrap();
        assert_eq!(pass.fail_code, None);
        assert_eq!(pass.delay, Duration::from_millis(30));
        assert!(decide(&watch, "NodeGetInfo", 0.0).is_none());
    }
}

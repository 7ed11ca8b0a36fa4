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
}

/// Decides what happens to one call of `method`; `roll` is a uniform number in [0, 1).
pub fn decide(watch: &InjectionWatch, method: &str, roll: f64) -> Option<Decision> {
    let inj = watch.current();
    let fault = inj.fault(method)?;
    let fail_code = (fault.code != 0 && roll < fault.rate).then_some(fault.code);
    Some(Decision {
        delay: Duration::from_millis(fault.delay_ms),
        fail_code,
    })
}

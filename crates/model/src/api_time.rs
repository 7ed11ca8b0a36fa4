//! The precision the API stores: `lastTransitionTime` is a `metav1.Time`, serialised in whole
//! seconds, so a writer that keeps sub-second values would see its own write come back different.

use crate::Timestamp;

/// `t` cut to whole seconds (towards the past), as the API server stores it.
pub fn api_time(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_to_whole_seconds() {
        let t = Timestamp::from_millisecond(1_700_000_000_999).unwrap();
        assert_eq!(api_time(t), Timestamp::from_second(1_700_000_000).unwrap());
        let whole = Timestamp::from_second(5).unwrap();
        assert_eq!(api_time(whole), whole);
    }
}

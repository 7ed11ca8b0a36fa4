//! events.k8s.io/v1: Event.

use super::prelude::{Int, MicroTime, Str, Time, m, msg, one};

msg! { EVENT "Event"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "eventTime", MicroTime),
    one(3, "series", m(&EVENT_SERIES)), one(4, "reportingController", Str),
    one(5, "reportingInstance", Str), one(6, "action", Str), one(7, "reason", Str),
    one(8, "regarding", m(&super::core::OBJECT_REFERENCE)),
    one(9, "related", m(&super::core::OBJECT_REFERENCE)), one(10, "note", Str),
    one(11, "type", Str), one(12, "deprecatedSource", m(&super::core::EVENT_SOURCE)),
    one(13, "deprecatedFirstTimestamp", Time), one(14, "deprecatedLastTimestamp", Time),
    one(15, "deprecatedCount", Int),
}

msg! { EVENT_SERIES "EventSeries"
    one(1, "count", Int), one(2, "lastObservedTime", MicroTime),
}

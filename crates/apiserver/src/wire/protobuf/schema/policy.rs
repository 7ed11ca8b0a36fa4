//! policy/v1: PodDisruptionBudget and the Eviction of `pods/eviction`.

use super::prelude::{Int, IntOrString, Str, Time, m, many, map, msg, one};

msg! { EVICTION "Eviction"
    one(1, "metadata", m(&super::meta::OBJECT_META)),
    one(2, "deleteOptions", m(&super::meta::DELETE_OPTIONS)),
}

msg! { POD_DISRUPTION_BUDGET "PodDisruptionBudget"
    one(1, "metadata", m(&super::meta::OBJECT_META)),
    one(2, "spec", m(&POD_DISRUPTION_BUDGET_SPEC)),
    one(3, "status", m(&POD_DISRUPTION_BUDGET_STATUS)),
}

msg! { POD_DISRUPTION_BUDGET_SPEC "PodDisruptionBudgetSpec"
    one(1, "minAvailable", IntOrString), one(2, "selector", m(&super::meta::LABEL_SELECTOR)),
    one(3, "maxUnavailable", IntOrString), one(4, "unhealthyPodEvictionPolicy", Str),
}

msg! { POD_DISRUPTION_BUDGET_STATUS "PodDisruptionBudgetStatus"
    one(1, "observedGeneration", Int), map(2, "disruptedPods", &Time),
    one(3, "disruptionsAllowed", Int), one(4, "currentHealthy", Int),
    one(5, "desiredHealthy", Int), one(6, "expectedPods", Int),
    many(7, "conditions", m(&super::meta::CONDITION)),
}

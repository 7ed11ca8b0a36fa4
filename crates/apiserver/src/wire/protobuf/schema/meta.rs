//! The apimachinery `meta/v1` messages every kind embeds: ObjectMeta, owner references, managed
//! fields, label selectors, and the DeleteOptions of an Eviction.

use super::prelude::{Bool, Int, IntOmitZero, RawJson, Str, Time, m, many, map, msg, one};

msg! { OBJECT_META "ObjectMeta"
    one(1, "name", Str), one(2, "generateName", Str), one(3, "namespace", Str),
    one(4, "selfLink", Str), one(5, "uid", Str), one(6, "resourceVersion", Str),
    one(7, "generation", IntOmitZero), one(8, "creationTimestamp", Time),
    one(9, "deletionTimestamp", Time), one(10, "deletionGracePeriodSeconds", Int),
    map(11, "labels", &Str), map(12, "annotations", &Str),
    many(13, "ownerReferences", m(&OWNER_REFERENCE)), many(14, "finalizers", Str),
    many(17, "managedFields", m(&MANAGED_FIELDS_ENTRY)),
}

msg! { OWNER_REFERENCE "OwnerReference"
    one(1, "kind", Str), one(3, "name", Str), one(4, "uid", Str), one(5, "apiVersion", Str),
    one(6, "controller", Bool), one(7, "blockOwnerDeletion", Bool),
}

msg! { MANAGED_FIELDS_ENTRY "ManagedFieldsEntry"
    one(1, "manager", Str), one(2, "operation", Str), one(3, "apiVersion", Str),
    one(4, "time", Time), one(6, "fieldsType", Str), one(7, "fieldsV1", RawJson),
    one(8, "subresource", Str),
}

msg! { LABEL_SELECTOR "LabelSelector"
    map(1, "matchLabels", &Str), many(2, "matchExpressions", m(&LABEL_SELECTOR_REQUIREMENT)),
}

msg! { LABEL_SELECTOR_REQUIREMENT "LabelSelectorRequirement"
    one(1, "key", Str), one(2, "operator", Str), many(3, "values", Str),
}

msg! { DELETE_OPTIONS "DeleteOptions"
    one(1, "gracePeriodSeconds", Int), one(2, "preconditions", m(&PRECONDITIONS)),
    one(3, "orphanDependents", Bool), one(4, "propagationPolicy", Str), many(5, "dryRun", Str),
    one(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool),
}

msg! { PRECONDITIONS "Preconditions"
    one(1, "uid", Str), one(2, "resourceVersion", Str),
}

msg! { CONDITION "Condition"
    one(1, "type", Str), one(2, "status", Str), one(3, "observedGeneration", Int),
    one(4, "lastTransitionTime", Time), one(5, "reason", Str), one(6, "message", Str),
}

//! rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding and ClusterRoleBinding.

use super::prelude::{Str, m, many, msg, one};

msg! { ROLE "Role"
    one(1, "metadata", m(&super::meta::OBJECT_META)), many(2, "rules", m(&POLICY_RULE)),
}

msg! { POLICY_RULE "PolicyRule"
    many(1, "verbs", Str), many(2, "apiGroups", Str), many(3, "resources", Str),
    many(4, "resourceNames", Str), many(5, "nonResourceURLs", Str),
}

msg! { CLUSTER_ROLE "ClusterRole"
    one(1, "metadata", m(&super::meta::OBJECT_META)), many(2, "rules", m(&POLICY_RULE)),
    one(3, "aggregationRule", m(&AGGREGATION_RULE)),
}

msg! { AGGREGATION_RULE "AggregationRule"
    many(1, "clusterRoleSelectors", m(&super::meta::LABEL_SELECTOR)),
}

msg! { ROLE_BINDING "RoleBinding"
    one(1, "metadata", m(&super::meta::OBJECT_META)), many(2, "subjects", m(&SUBJECT)),
    one(3, "roleRef", m(&ROLE_REF)),
}

msg! { SUBJECT "Subject"
    one(1, "kind", Str), one(2, "apiGroup", Str), one(3, "name", Str), one(4, "namespace", Str),
}

msg! { ROLE_REF "RoleRef"
    one(1, "apiGroup", Str), one(2, "kind", Str), one(3, "name", Str),
}

msg! { CLUSTER_ROLE_BINDING "ClusterRoleBinding"
    one(1, "metadata", m(&super::meta::OBJECT_META)), many(2, "subjects", m(&SUBJECT)),
    one(3, "roleRef", m(&ROLE_REF)),
}

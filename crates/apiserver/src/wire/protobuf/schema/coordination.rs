//! coordination.k8s.io/v1: Lease.

use super::prelude::{Int, MicroTime, Str, m, msg, one};

msg! { LEASE "Lease"
    one(1, "metadata", m(&super::meta::OBJECT_META)), one(2, "spec", m(&LEASE_SPEC)),
}

msg! { LEASE_SPEC "LeaseSpec"
    one(1, "holderIdentity", Str), one(2, "leaseDurationSeconds", Int),
    one(3, "acquireTime", MicroTime), one(4, "renewTime", MicroTime),
    one(5, "leaseTransitions", Int), one(6, "strategy", Str), one(7, "preferredHolder", Str),
}

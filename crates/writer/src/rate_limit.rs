//! The token bucket for `--kube-api-qps` / `--kube-api-burst` and the Events' own budget, from
//! `volhealth-kube-access` (the Event recorder there spends it).

pub use volhealth_kube_access::rate_limit::RateLimiter;

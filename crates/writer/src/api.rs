//! What the API server answered to a write, classified once for both writers: the classification
//! is Kubernetes plumbing (the Event sink returns it too), so it lives in `volhealth-kube-access`.

pub use volhealth_kube_access::api_failure::{ApiFailure, FailureKind};

//! What the API server answered to a request that failed, classified once: for the writers'
//! status writes (each kind has one behaviour in both) and for the Event sink.

/// A failed API request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    /// HTTP status, when the server answered.
    pub code: Option<u16>,
    /// What the server or the transport said.
    pub message: String,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(code) => write!(f, "HTTP {code}: {}", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for ApiFailure {}

impl From<kube::Error> for ApiFailure {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => ApiFailure {
                code: Some(status.code),
                message: status.message.clone(),
            },
            other => ApiFailure {
                code: None,
                message: other.to_string(),
            },
        }
    }
}

/// How a failed write is handled. Each kind has one behaviour in both writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// 404: the object is gone; nothing to retry.
    Gone,
    /// 403: the credentials may not write this object (the agent stops on it: wrong node).
    Forbidden,
    /// 409: someone else changed the object first; retried at the normal rate with fresh state.
    Conflict,
    /// Any other 4xx (400, 422, ...): the content is refused; retried slowly, logged once.
    Refused,
    /// No answer, 429 or 5xx: the server is unreachable or overloaded; retried with backoff.
    Unavailable,
}

impl FailureKind {
    /// The `result` label of `csi_volume_health_status_writes_total` for this failure.
    pub fn result_label(self) -> &'static str {
        match self {
            FailureKind::Forbidden | FailureKind::Refused => "rejected",
            FailureKind::Gone | FailureKind::Conflict | FailureKind::Unavailable => "error",
        }
    }
}

impl ApiFailure {
    /// The failure's kind.
    pub fn kind(&self) -> FailureKind {
        match self.code {
            Some(404) => FailureKind::Gone,
            Some(403) => FailureKind::Forbidden,
            Some(409) => FailureKind::Conflict,
            Some(429) => FailureKind::Unavailable,
            Some(c) if (400..500).contains(&c) => FailureKind::Refused,
            _ => FailureKind::Unavailable,
        }
    }

    /// 403.
    pub fn is_forbidden(&self) -> bool {
        self.kind() == FailureKind::Forbidden
    }

    /// 404.
    pub fn is_not_found(&self) -> bool {
        self.kind() == FailureKind::Gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(code: Option<u16>) -> FailureKind {
        ApiFailure {
            code,
            message: String::new(),
        }
        .kind()
    }

    #[test]
    fn every_answer_has_one_kind() {
        assert_eq!(f(Some(404)), FailureKind::Gone);
        assert_eq!(f(Some(403)), FailureKind::Forbidden);
        assert_eq!(f(Some(409)), FailureKind::Conflict);
        assert_eq!(f(Some(422)), FailureKind::Refused);
        assert_eq!(f(Some(400)), FailureKind::Refused);
        assert_eq!(f(Some(429)), FailureKind::Unavailable);
        assert_eq!(f(Some(503)), FailureKind::Unavailable);
        assert_eq!(f(None), FailureKind::Unavailable);
        assert_eq!(FailureKind::Conflict.result_label(), "error");
        assert_eq!(FailureKind::Refused.result_label(), "rejected");
    }
}

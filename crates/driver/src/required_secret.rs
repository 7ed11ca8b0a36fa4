//! `--require-secret-file` (a file holding `KEY=VALUE`): the controller health RPCs refuse callers whose `secrets` lack
//! the pair, so a consumer's secret plumbing can be tested end to end. The value never appears
//! in Debug output, errors or logs; refusals name the key only.

use std::collections::HashMap;
use tonic::Status;

/// One `secrets` entry the controller health RPCs demand.
#[derive(Clone, PartialEq, Eq)]
pub struct RequiredSecret {
    key: String,
    value: String,
}

/// Shows the key only: the value is a credential.
impl std::fmt::Debug for RequiredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequiredSecret")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl std::str::FromStr for RequiredSecret {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<Self> {
        match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok(RequiredSecret {
                key: k.to_string(),
                value: v.to_string(),
            }),
            // The input may hold the value, so the message does not repeat it.
            _ => Err(crate::Error::Invalid(
                "a required secret must be KEY=VALUE with a non-empty KEY".into(),
            )),
        }
    }
}

impl RequiredSecret {
    /// The key the caller must send.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// UNAUTHENTICATED unless `secrets` holds the key with the value.
    pub fn check(&self, rpc: &str, secrets: &HashMap<String, String>) -> Result<(), Status> {
        match secrets.get(&self.key) {
            Some(v) if *v == self.value => Ok(()),
            Some(_) => Err(Status::unauthenticated(format!(
                "{rpc}: secrets key {:?} does not hold the expected value",
                self.key
            ))),
            None => Err(Status::unauthenticated(format!(
                "{rpc}: secrets lack the key {:?}",
                self.key
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_the_pair_and_never_shows_the_value() {
        let r: RequiredSecret = "token=s3cr3t-v4lue".parse().unwrap();
        assert_eq!(r.key(), "token");
        assert!(!format!("{r:?}").contains("s3cr3t"));
        let ok = HashMap::from([("token".to_string(), "s3cr3t-v4lue".to_string())]);
        assert!(r.check("ControllerGetVolumeHealth", &ok).is_ok());
        let wrong = HashMap::from([("token".to_string(), "nope".to_string())]);
        for secrets in [wrong, HashMap::new()] {
            let e = r.check("ControllerGetVolumeHealth", &secrets).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated);
            assert!(e.message().contains("\"token\""), "{}", e.message());
            assert!(!e.message().contains("s3cr3t"), "{}", e.message());
            assert!(!e.message().contains("nope"), "{}", e.message());
        }
        assert!("=x".parse::<RequiredSecret>().is_err());
        assert!("novalue".parse::<RequiredSecret>().is_err());
        let e = "s3cr3t".parse::<RequiredSecret>().unwrap_err().to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
    }
}

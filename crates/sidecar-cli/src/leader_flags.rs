//! The leader-election flags of the daemons that run as several replicas (the monitor and the
//! remediation controller), named and defaulted as client-go's leader election takes them. Each
//! daemon adds its own `--leader-election-namespace`, whose default differs.

use anyhow::Context;
use volhealth_daemon::duration;
use volhealth_monitor::LeaderElection;

use crate::go_flags;

/// `--leader-election` and its timings.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderFlags {
    /// Elect a leader on a Lease so only one replica acts (--leader-election=false: off).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", action = clap::ArgAction::Set, value_parser = go_flags::parse_bool)]
    pub leader_election: bool,
    /// How long a leader's claim lasts without renewal.
    #[arg(long, default_value = "15s")]
    pub leader_election_lease_duration: String,
    /// The leader stops acting once its last confirmed renewal is this old (it renews every
    /// lease duration minus this).
    #[arg(long, default_value = "10s")]
    pub leader_election_renew_deadline: String,
    /// How often the leader re-reads the Lease to confirm it still holds it.
    #[arg(long, default_value = "5s")]
    pub leader_election_retry_period: String,
}

impl LeaderFlags {
    /// The election these flags ask for, in `namespace` (`None`: the in-cluster namespace, else
    /// "default"), with its timings checked as client-go checks them; `None` when it is off.
    pub fn election(&self, namespace: Option<String>) -> anyhow::Result<Option<LeaderElection>> {
        if !self.leader_election {
            return Ok(None);
        }
        let d = |flag: &str, v: &str| duration::parse(v).with_context(|| format!("--{flag}"));
        let le = LeaderElection {
            namespace,
            lease_duration: d(
                "leader-election-lease-duration",
                &self.leader_election_lease_duration,
            )?,
            renew_deadline: d(
                "leader-election-renew-deadline",
                &self.leader_election_renew_deadline,
            )?,
            retry_period: d(
                "leader-election-retry-period",
                &self.leader_election_retry_period,
            )?,
            ..LeaderElection::default()
        };
        le.validate().map_err(|e| anyhow::anyhow!(e))?;
        Ok(Some(le))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        leader: LeaderFlags,
    }

    fn election(args: &[&str]) -> anyhow::Result<Option<LeaderElection>> {
        let cli = Cli::try_parse_from(std::iter::once("test").chain(args.iter().copied()))?;
        cli.leader.election(Some("ns".into()))
    }

    #[test]
    fn off_unless_asked_for_and_client_go_defaults() {
        assert!(election(&[]).unwrap().is_none());
        assert!(election(&["--leader-election=false"]).unwrap().is_none());
        let le = election(&["--leader-election"]).unwrap().unwrap();
        assert_eq!(le.namespace.as_deref(), Some("ns"));
        assert_eq!(le.lease_duration.as_secs(), 15);
        assert_eq!(le.renew_deadline.as_secs(), 10);
        assert_eq!(le.retry_period.as_secs(), 5);
    }

    #[test]
    fn bad_timings_name_their_flag() {
        let err =
            election(&["--leader-election", "--leader-election-retry-period=soon"]).unwrap_err();
        assert!(
            format!("{err:#}").contains("--leader-election-retry-period"),
            "{err:#}"
        );
        let err = election(&[
            "--leader-election",
            "--leader-election-lease-duration=10s",
            "--leader-election-renew-deadline=10s",
        ])
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("--leader-election-lease-duration (10s) must be greater"),
            "{err}"
        );
    }
}

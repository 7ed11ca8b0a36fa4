//! `--upstream-event-reasons`, which both sidecars take.

/// The flag that makes abnormal volumes also raise the upstream Event.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct UpstreamEvents {
    /// Also raise the upstream Warning Event VolumeConditionAbnormal (the driver's message) when
    /// a volume becomes or stays abnormal, beside volhealth's own Events, for alerts built on the
    /// Go components' Events.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", action = clap::ArgAction::Set,
          value_parser = crate::go_flags::parse_bool)]
    pub upstream_event_reasons: bool,
}

impl UpstreamEvents {
    /// Turns the upstream Events on or off for this process (the first call wins).
    pub fn apply(self) {
        volhealth_writer::events::emit_upstream_reasons(self.upstream_event_reasons);
    }
}

//! The flags of the legacy VOLUME_CONDITION bridge, shared by `monitor` and `agent`.

use anyhow::Context as _;
use std::path::PathBuf;
use std::sync::Arc;
use volhealth_legacy_bridge::Rules;

/// Largest rules file read.
const MAX_RULES_FILE: u64 = 1 << 20;

/// Whether drivers that speak only the legacy shape are probed through the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LegacyMode {
    /// When a driver advertises the legacy VOLUME_CONDITION capability and not the new health
    /// capabilities.
    Auto,
    /// Never.
    Off,
}

/// `--legacy-volume-condition`, `--legacy-rules`, `--legacy-debounce`.
#[derive(Debug, Clone, clap::Args)]
pub struct LegacyArgs {
    /// Probe drivers that advertise only the legacy VOLUME_CONDITION capability (CSI v1.3 to
    /// v1.12) through the bridge.
    #[arg(long, value_enum, default_value = "auto", value_name = "auto|off")]
    pub legacy_volume_condition: LegacyMode,
    /// YAML file of rules that map legacy condition messages to a status and reason; tried
    /// before the shipped rules (see docs/legacy-drivers.md).
    #[arg(long, value_name = "FILE")]
    pub legacy_rules: Option<PathBuf>,
    /// Consecutive NOT_FOUND answers about a volume that make it Inaccessible/VolumeNotFound.
    #[arg(long, default_value_t = 2, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub legacy_debounce: u32,
}

impl LegacyArgs {
    /// Whether the bridge is on.
    pub fn enabled(&self) -> bool {
        self.legacy_volume_condition == LegacyMode::Auto
    }

    /// The user's rules (when given) followed by the shipped ones.
    pub fn rules(&self) -> anyhow::Result<Arc<Rules>> {
        let shipped = Rules::shipped().context("the shipped legacy rules")?;
        let Some(path) = &self.legacy_rules else {
            return Ok(Arc::new(shipped));
        };
        let what = || format!("--legacy-rules {}", path.display());
        let file = std::fs::File::open(path).with_context(what)?;
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut std::io::Read::take(file, MAX_RULES_FILE + 1),
            &mut text,
        )
        .with_context(what)?;
        if text.len() as u64 > MAX_RULES_FILE {
            anyhow::bail!("{}: larger than {MAX_RULES_FILE} bytes", what());
        }
        let mine = Rules::parse(&text).with_context(what)?;
        Ok(Arc::new(mine.then(shipped)))
    }
}

//! What one frame of `status` shows, and drawing it in the chosen format.

use crate::coverage;
use crate::error::Result;
use crate::findings::{self, Snapshot};
use crate::render::{self, Format};
use crate::scope::Scope;

/// How one frame is drawn.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Output format.
    pub format: Format,
    /// Colour the table.
    pub colour: bool,
}

/// What one frame shows: the conditions, and what watches each volume.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    /// Every unhealthy condition.
    pub findings: Vec<findings::Finding>,
    /// Every bound claim in scope and what watches it.
    pub volumes: Vec<coverage::VolumeCoverage>,
}

impl View {
    /// The view of one snapshot.
    pub fn of(snapshot: &Snapshot) -> View {
        let findings = findings::collect(snapshot);
        let volumes = coverage::collect(snapshot, &findings);
        View { findings, volumes }
    }
}

/// Renders one frame of output for `view` (`stream`: one JSON document per line).
pub fn frame(view: &View, scope: &Scope, style: Style, stream: bool) -> Result<String> {
    let now = jiff::Timestamp::now();
    let wide = style.format == Format::Wide;
    let conditions = match style.format {
        Format::Json | Format::Yaml => {
            return render::document(
                &view.findings,
                &view.volumes,
                scope.namespace.as_deref(),
                now,
                style.format,
                stream,
                &[],
            );
        }
        Format::Table | Format::Wide if view.findings.is_empty() => {
            render::all_healthy(scope.namespace.as_deref())
        }
        Format::Table | Format::Wide => render::table(&view.findings, now, wide, style.colour),
    };
    Ok(conditions + &render::coverage_table(&view.volumes, wide, style.colour))
}

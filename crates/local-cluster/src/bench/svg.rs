//! The bench's picture, drawn by hand: the detection-lag distributions (cumulative) and the
//! correlated failure reaching status, then clearing, over time.

use super::report::Report;
use std::fmt::Write as _;

const W: f64 = 760.0;
const PANEL_H: f64 = 260.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const GAP: f64 = 70.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One panel of step curves: `(label, colour, sorted x values)`, y = cumulative count or share.
struct Panel<'a> {
    title: String,
    x_label: &'a str,
    y_label: &'a str,
    top: f64,
    share: bool,
    series: Vec<(String, &'a str, &'a [f64], usize)>,
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|m| *m >= v)
        .unwrap_or(10.0 * mag)
}

fn draw(out: &mut String, p: &Panel) {
    let plot_w = W - LEFT - RIGHT;
    let x_max = nice_max(
        p.series
            .iter()
            .filter_map(|(_, _, v, _)| v.last().copied())
            .fold(0.0, f64::max),
    );
    let y_max = if p.share {
        1.0
    } else {
        nice_max(
            p.series
                .iter()
                .map(|(_, _, _, n)| *n as f64)
                .fold(0.0, f64::max),
        )
    };
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| p.top + PANEL_H - v / y_max * PANEL_H;
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        p.top - 12.0,
        escape(&p.title)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#888"/>"##,
        p.top
    );
    for i in 0..=4 {
        let f = f64::from(i) / 4.0;
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{:.2}</text><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
            x(f * x_max),
            p.top + PANEL_H + 14.0,
            f * x_max,
            LEFT - 4.0,
            y(f * y_max) + 3.0,
            if p.share {
                format!("{:.0}%", f * 100.0)
            } else {
                format!("{:.0}", f * y_max)
            }
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        p.top + PANEL_H + 30.0,
        escape(p.x_label)
    );
    let _ = writeln!(
        out,
        r#"<text x="14" y="{:.1}" font-size="11" transform="rotate(-90 14 {:.1})" text-anchor="middle">{}</text>"#,
        p.top + PANEL_H / 2.0,
        p.top + PANEL_H / 2.0,
        escape(p.y_label)
    );
    for (i, (label, colour, values, total)) in p.series.iter().enumerate() {
        let mut points = format!("{:.1},{:.1}", x(0.0), y(0.0));
        for (k, v) in values.iter().enumerate() {
            let before = if p.share {
                k as f64 / (*total).max(1) as f64
            } else {
                k as f64
            };
            let after = if p.share {
                (k + 1) as f64 / (*total).max(1) as f64
            } else {
                (k + 1) as f64
            };
            let _ = write!(
                points,
                " {:.1},{:.1} {:.1},{:.1}",
                x(*v),
                y(before),
                x(*v),
                y(after)
            );
        }
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>"#
        );
        let ly = p.top + 16.0 + 16.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            W - RIGHT - 230.0,
            W - RIGHT - 210.0,
            W - RIGHT - 205.0,
            ly + 4.0,
            escape(label)
        );
    }
}

/// The SVG document for `report`.
pub fn render(report: &Report) -> String {
    let setup = report.setup.as_ref();
    let caption = setup
        .map(|s| {
            format!(
                "{} PVCs, {} nodes, interval {:.1} s, {:?} mode",
                s.pvcs, s.nodes, s.interval_s, s.mode
            )
        })
        .unwrap_or_default();
    let lag = &report.lag;
    let lags = Panel {
        title: format!("Detection lag, cumulative ({caption})"),
        x_label: "seconds from injection to status",
        y_label: "share of samples",
        top: TOP,
        share: true,
        series: vec![
            (
                format!("pvc.status.healthStatus ({})", lag.controller.samples),
                "#1f77b4",
                &lag.controller.values_s,
                lag.controller.samples,
            ),
            (
                format!("pod.status.volumeHealth ({})", lag.node_volume.samples),
                "#2ca02c",
                &lag.node_volume.values_s,
                lag.node_volume.samples,
            ),
            (
                format!(
                    "csinode.status.storageHealth ({})",
                    lag.node_storage.samples
                ),
                "#d62728",
                &lag.node_storage.values_s,
                lag.node_storage.samples,
            ),
        ],
    };
    let burst = Panel {
        title: format!(
            "Correlated failure of {} volumes: on status, then cleared",
            report.failure.volumes
        ),
        x_label: "seconds from the change in the driver",
        y_label: "volumes",
        top: TOP + PANEL_H + GAP,
        share: false,
        series: vec![
            (
                "condition on pvc.status".into(),
                "#d62728",
                &report.failure.curve_s,
                report.failure.volumes,
            ),
            (
                "cleared from pvc.status".into(),
                "#1f77b4",
                &report.recovery.curve_s,
                report.recovery.volumes,
            ),
        ],
    };
    let height = TOP + 2.0 * PANEL_H + GAP + 50.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    draw(&mut out, &lags);
    draw(&mut out, &burst);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_picture_has_both_panels_and_every_curve() {
        let mut r = Report::default();
        r.lag.controller = super::super::report::Lag::of(vec![0.2, 0.4, 0.9], 3);
        r.failure = super::super::report::Burst::of(vec![0.5, 1.0], 2);
        let svg = render(&r);
        assert!(svg.starts_with("<svg "));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 5);
        assert!(svg.contains("Correlated failure of 2 volumes"));
    }

    #[test]
    fn scales_round_up_to_a_readable_number() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(3.2), 5.0);
        assert_eq!(nice_max(0.9), 1.0);
        assert_eq!(nice_max(12.0), 20.0);
    }
}

//! The replay's charts, written by hand as SVG text: context size per call over the window, and
//! cumulative cost per call, one line per strategy of none, stateless and session; and cost
//! against retention, one point per strategy (every strategy the replay ran). Every figure is
//! printed with a fixed number of decimals, so the same replay draws the same bytes.

use std::fmt::Write as _;

use cutctx::replay::Replay;
use cutctx::session::PriceTable;

const WIDTH: f64 = 720.0;
const PANEL: f64 = 200.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 130.0;
const COLOURS: [&str; 3] = ["#888888", "#d62728", "#1f77b4"];

/// The chart of `replay` as an SVG document.
#[must_use]
#[expect(
    clippy::cast_precision_loss,
    reason = "token counts and call counts are far below 2^52"
)]
pub(crate) fn chart(replay: &Replay, prices: &PriceTable) -> String {
    let calls = replay.strategies.first().map_or(0, |s| s.calls).max(2);
    let plot = WIDTH - LEFT - RIGHT;
    let x = |i: usize| LEFT + plot * i as f64 / (calls - 1) as f64;
    let mut svg = String::new();
    let height = 2.0 * PANEL + 110.0;
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(svg, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    // Top panel: tokens per call, with the window.
    let size_max = replay
        .strategies
        .iter()
        .flat_map(|s| s.sizes.iter().copied())
        .chain([replay.window])
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let top = 30.0;
    panel(&mut svg, top, "context sent per call (tokens)", size_max);
    let wy = top + PANEL - PANEL * replay.window as f64 / size_max;
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT:.1}\" y1=\"{wy:.1}\" x2=\"{:.1}\" y2=\"{wy:.1}\" stroke=\"black\" stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\">window</text>",
        LEFT + plot,
        LEFT + plot + 4.0,
        wy + 4.0
    );
    for (s, colour) in replay.strategies.iter().zip(COLOURS) {
        let points: Vec<(f64, f64)> = s
            .sizes
            .iter()
            .enumerate()
            .map(|(i, &v)| (x(i), top + PANEL - PANEL * v as f64 / size_max))
            .collect();
        line(&mut svg, &points, colour);
    }
    // Bottom panel: cumulative cost.
    let cost_max = replay
        .strategies
        .iter()
        .flat_map(|s| s.cumulative_units.last().copied())
        .fold(1.0_f64, f64::max);
    let bottom = top + PANEL + 50.0;
    panel(
        &mut svg,
        bottom,
        &format!(
            "cumulative cost (base input tokens; {} prices)",
            prices.name
        ),
        cost_max,
    );
    for (s, colour) in replay.strategies.iter().zip(COLOURS) {
        let points: Vec<(f64, f64)> = s
            .cumulative_units
            .iter()
            .enumerate()
            .map(|(i, &v)| (x(i), bottom + PANEL - PANEL * v / cost_max))
            .collect();
        line(&mut svg, &points, colour);
        if let Some(&(px, py)) = points.last() {
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{} {:.0}</text>",
                px + 6.0,
                py + 4.0,
                s.name,
                s.cost_units
            );
        }
    }
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT:.1}\" y=\"{:.1}\">call</text>",
        bottom + PANEL + 30.0
    );
    for (i, (s, colour)) in replay.strategies.iter().zip(COLOURS).enumerate() {
        let ly = 16.0 + 14.0 * i as f64;
        let _ = writeln!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"3\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            WIDTH - RIGHT + 20.0,
            ly + 40.0,
            WIDTH - RIGHT + 34.0,
            ly + 44.0,
            s.name
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// A panel's frame, title and top figure.
fn panel(svg: &mut String, top: f64, title: &str, max: f64) {
    let plot = WIDTH - LEFT - RIGHT;
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT:.1}\" y=\"{:.1}\" font-weight=\"bold\">{title}</text><rect x=\"{LEFT:.1}\" y=\"{top:.1}\" width=\"{plot:.1}\" height=\"{PANEL:.1}\" fill=\"none\" stroke=\"#cccccc\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{max:.0}</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">0</text>",
        top - 8.0,
        LEFT - 4.0,
        top + 4.0,
        LEFT - 4.0,
        top + PANEL
    );
}

/// A polyline through `points`.
fn line(svg: &mut String, points: &[(f64, f64)], colour: &str) {
    let mut p = String::new();
    for (x, y) in points {
        let _ = write!(p, "{x:.1},{y:.1} ");
    }
    let _ = writeln!(
        svg,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\"/>",
        p.trim_end()
    );
}

/// The colours of the frontier chart's points, by strategy position (cycled).
const POINT_COLOURS: [&str; 10] = [
    "#888888", "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22",
];

/// `text` with the characters XML gives a meaning escaped.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Cost against retention as an SVG document: per strategy, its cost in base-input-token
/// units (x, from 0) and the share of the identifiers the model used that its requests kept
/// (y, 0 to 1), labelled with its name and its task and recent-result retention.
#[must_use]
pub(crate) fn frontier(replay: &Replay, prices: &PriceTable) -> String {
    let plot = WIDTH - LEFT - RIGHT - 60.0;
    let height = PANEL * 2.0;
    let top = 40.0;
    let cost_max = replay
        .strategies
        .iter()
        .map(|s| s.cost_units)
        .fold(1.0_f64, f64::max);
    let mut svg = String::new();
    let full = height + 90.0;
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH:.0}\" height=\"{full:.0}\" viewBox=\"0 0 {WIDTH:.0} {full:.0}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(svg, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT:.1}\" y=\"{:.1}\" font-weight=\"bold\">cost (base input tokens; {} prices) against identifiers retained</text><rect x=\"{LEFT:.1}\" y=\"{top:.1}\" width=\"{plot:.1}\" height=\"{height:.1}\" fill=\"none\" stroke=\"#cccccc\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">1</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">0</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{cost_max:.0}</text>",
        top - 12.0,
        escaped(&prices.name),
        LEFT - 4.0,
        top + 4.0,
        LEFT - 4.0,
        top + height,
        LEFT + plot,
        top + height + 14.0
    );
    for (i, s) in replay.strategies.iter().enumerate() {
        let colour = POINT_COLOURS[i % POINT_COLOURS.len()];
        let px = LEFT + plot * s.cost_units / cost_max;
        let py = top + height - height * s.retention.identifiers;
        let _ = writeln!(
            svg,
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"4\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{} ({:.0}; task {:.2}, recent {:.2})</text>",
            px + 6.0,
            py + 4.0,
            escaped(&s.name),
            s.cost_units,
            s.retention.task_intact,
            s.retention.recent_results
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT:.1}\" y=\"{:.1}\">cost; up: a larger share of the identifiers the model used is still in its requests</text>",
        top + height + 30.0
    );
    svg.push_str("</svg>\n");
    svg
}

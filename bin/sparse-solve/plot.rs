//! The residual-history plot (plotters, SVG).

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

/// Draws `history` (relative residual per iteration) on a log scale, with the tolerance as a
/// horizontal line, into the SVG file `path`.
pub fn residuals(path: &Path, matrix: &str, method: &str, history: &[f64], tol: f64) -> Result<()> {
    let pts: Vec<(usize, f64)> = history
        .iter()
        .enumerate()
        .filter(|(_, &r)| r.is_finite() && r > 0.0)
        .map(|(i, &r)| (i, r))
        .collect();
    let iters = history.len().saturating_sub(1).max(1);
    let lo = pts.iter().map(|p| p.1).fold(tol, f64::min) / 2.0;
    let hi = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 2.0;
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| anyhow!("{e}");
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{method} on {matrix}: relative residual"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0..iters, (lo..hi).log_scale())
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("iteration")
        .y_desc("‖r‖ / ‖b‖")
        .y_label_formatter(&|v| format!("{v:.0e}"))
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(LineSeries::new(pts, &BLUE))
        .map_err(|x| e(&x))?
        .label("recursive residual")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart
        .draw_series(LineSeries::new(vec![(0, tol), (iters, tol)], &RED))
        .map_err(|x| e(&x))?
        .label("tolerance")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

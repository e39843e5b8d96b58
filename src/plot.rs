//! PNG line charts (plotters, bitmap backend) for sweeps and testbed reports.

use plotters::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Draw with hollow markers (e.g. the lower class of a strategy).
    pub dashed: bool,
}

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers a TrueType font with plotters once; the ab_glyph backend needs one and we avoid
/// fontconfig so plots work on a bare server.
fn ensure_font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let bytes = FONT_PATHS
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .ok_or_else(|| {
                "no DejaVuSans.ttf found (scripts/install-deps.sh installs fonts-dejavu-core)"
                    .to_string()
            })?;
        // The font must live as long as the process: plotters keeps a 'static reference.
        let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, leaked)
            .map_err(|_| "invalid font file".to_string())
    })
    .clone()
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draws `series` into a PNG at `path`. With `log_y`, the y axis is logarithmic (latencies span
/// orders of magnitude between classes and loads). Series that share a label prefix (the text
/// before the last space) share a colour.
pub fn line_chart(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
    log_y: bool,
) -> Result<(), String> {
    ensure_font()?;
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        if !log_y || y > 0.0 {
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
    }
    if x0 > x1 || y0 > y1 {
        return Err("no data points".into());
    }
    if x0 == x1 {
        x1 = x0 + 1.0;
    }
    let root = BitMapBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut keys: Vec<String> = Vec::new();
    let color_of = |label: &str, keys: &mut Vec<String>| -> RGBColor {
        let key = label
            .rsplit_once(' ')
            .map(|(a, _)| a)
            .unwrap_or(label)
            .to_string();
        let i = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
            keys.push(key);
            keys.len() - 1
        });
        COLORS[i % COLORS.len()]
    };
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(xlabel)
                .y_desc(ylabel)
                .x_labels(12)
                .y_labels(12)
                .max_light_lines(2)
                .y_label_formatter(&|v: &f64| fmt_tick(*v))
                .label_style(("sans-serif", 14))
                .draw()
                .map_err(|e| e.to_string())?;
            for s in series {
                let c = color_of(&s.label, &mut keys);
                let data: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|&(_, y)| !log_y || y > 0.0)
                    .collect();
                let style = ShapeStyle::from(&c).stroke_width(2);
                let hollow = s.dashed;
                chart
                    .draw_series(LineSeries::new(data.clone(), style))
                    .map_err(|e| e.to_string())?
                    .label(s.label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                chart
                    .draw_series(data.into_iter().map(move |p| {
                        if hollow {
                            Circle::new(p, 4, ShapeStyle::from(&c).stroke_width(1))
                        } else {
                            Circle::new(p, 4, ShapeStyle::from(&c).filled())
                        }
                    }))
                    .map_err(|e| e.to_string())?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    if log_y {
        let (lo, hi) = (y0.max(1e-3) / 1.5, y1 * 1.5);
        draw!(builder
            .build_cartesian_2d(x0..x1, (lo..hi).log_scale())
            .map_err(|e| e.to_string())?);
    } else {
        let hi = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
        draw!(builder
            .build_cartesian_2d(x0..x1, y0.min(0.0)..hi)
            .map_err(|e| e.to_string())?);
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// Tick labels readable on a log axis: 0.5, 3, 40, 2k.
fn fmt_tick(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

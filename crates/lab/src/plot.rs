//! PNG line charts (plotters, bitmap backend) for sweeps and testbed reports.

use plotters::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

/// Why a chart was not drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlotError(pub String);

impl PlotError {
    fn of(e: impl std::fmt::Display) -> PlotError {
        PlotError(e.to_string())
    }
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Lines of one group (a strategy, a target) share a hue, so the groups read apart.
    pub group: String,
    /// Within a group, the class (0 = highest) picks the shade, the line style and the marker,
    /// so that no two lines of a chart look alike.
    pub class: usize,
}

impl Series {
    /// A series of one group with one class.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        let label = label.into();
        Series {
            group: label.clone(),
            label,
            points,
            class: 0,
        }
    }
}

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers a TrueType font with plotters once; the ab_glyph backend needs one and we avoid
/// fontconfig so plots work on a bare server.
fn ensure_font() -> Result<(), PlotError> {
    static FONT: OnceLock<Result<(), PlotError>> = OnceLock::new();
    FONT.get_or_init(|| {
        let bytes = FONT_PATHS
            .iter()
            .find_map(|p| std::fs::read(p).ok())
            .ok_or_else(|| {
                PlotError(
                    "no DejaVuSans.ttf found (scripts/install-deps.sh installs fonts-dejavu-core)"
                        .to_string(),
                )
            })?;
        // The font must live as long as the process: plotters keeps a 'static reference.
        let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, leaked)
            .map_err(|_| PlotError("invalid font file".to_string()))
    })
    .clone()
}

/// Pairs of a dark and a light shade of one hue (matplotlib's tab20): group → pair, class →
/// shade.
const PAIRS: [(RGBColor, RGBColor); 10] = [
    (RGBColor(31, 119, 180), RGBColor(107, 174, 214)),
    (RGBColor(255, 127, 14), RGBColor(253, 174, 107)),
    (RGBColor(44, 160, 44), RGBColor(116, 196, 118)),
    (RGBColor(214, 39, 40), RGBColor(251, 106, 74)),
    (RGBColor(148, 103, 189), RGBColor(158, 154, 200)),
    (RGBColor(140, 86, 75), RGBColor(196, 156, 148)),
    (RGBColor(227, 119, 194), RGBColor(247, 182, 210)),
    (RGBColor(80, 80, 80), RGBColor(160, 160, 160)),
    (RGBColor(188, 189, 34), RGBColor(219, 219, 141)),
    (RGBColor(23, 190, 207), RGBColor(158, 218, 229)),
];

/// How one series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Look {
    pub color: RGBColor,
    /// Solid line for class 0, dashed for the others.
    pub dashed: bool,
    /// Marker: 0 filled circle, 1 hollow square, 2 filled triangle (by class).
    pub marker: usize,
}

/// The look of every series, in order: one hue per group (in order of first appearance), a
/// shade, line style and marker per class.
pub fn looks(series: &[Series]) -> Vec<Look> {
    let mut groups: Vec<&str> = Vec::new();
    series
        .iter()
        .map(|s| {
            let g = groups
                .iter()
                .position(|g| *g == s.group)
                .unwrap_or_else(|| {
                    groups.push(&s.group);
                    groups.len() - 1
                });
            let (dark, light) = PAIRS[g % PAIRS.len()];
            Look {
                color: if s.class % 2 == 0 { dark } else { light },
                dashed: s.class > 0,
                marker: s.class % 3,
            }
        })
        .collect()
}

/// Width of the legend panel right of the plot area: the legend never covers data.
const LEGEND_W: u32 = 250;

/// Draws `series` into a PNG at `path`, the legend in a panel right of the data. With `log_y`,
/// the y axis is logarithmic (latencies span orders of magnitude between classes and loads);
/// points with y ≤ 0 are then left out.
pub fn line_chart(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    series: &[Series],
    log_y: bool,
) -> Result<(), PlotError> {
    ensure_font()?;
    let (x0, x1, y0, y1) = bounds(series, log_y).ok_or(PlotError("no data points".into()))?;
    let looks = looks(series);
    let root = BitMapBackend::new(path, (1000 + LEGEND_W, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(PlotError::of)?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(PlotError::of)?;
    let (plot_area, legend_area) = root.split_horizontally(1000);
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
                .map_err(PlotError::of)?;
            for (s, look) in series.iter().zip(&looks) {
                let data: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|&(x, y)| x.is_finite() && y.is_finite() && (!log_y || y > 0.0))
                    .collect();
                let style = ShapeStyle::from(&look.color).stroke_width(2);
                if look.dashed {
                    chart
                        .draw_series(DashedLineSeries::new(data.clone(), 8, 5, style))
                        .map_err(PlotError::of)?;
                } else {
                    chart
                        .draw_series(LineSeries::new(data.clone(), style))
                        .map_err(PlotError::of)?;
                }
                let c = look.color;
                match look.marker {
                    0 => chart.draw_series(
                        data.into_iter()
                            .map(|p| Circle::new(p, 4, ShapeStyle::from(&c).filled())),
                    ),
                    1 => chart.draw_series(data.into_iter().map(|p| {
                        EmptyElement::at(p)
                            + Rectangle::new(
                                [(-4, -4), (4, 4)],
                                ShapeStyle::from(&c).stroke_width(2),
                            )
                    })),
                    _ => chart.draw_series(data.into_iter().map(|p| {
                        EmptyElement::at(p)
                            + Polygon::new(
                                vec![(0, -5), (-5, 4), (5, 4)],
                                ShapeStyle::from(&c).filled(),
                            )
                    })),
                }
                .map_err(PlotError::of)?;
            }
        }};
    }
    let mut builder = ChartBuilder::on(&plot_area);
    builder
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    if log_y {
        let (lo, hi) = (y0.max(1e-3) / 1.5, y1 * 1.5);
        draw!(builder
            .build_cartesian_2d(x0..x1, (lo..hi).log_scale())
            .map_err(PlotError::of)?);
    } else {
        let hi = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
        draw!(builder
            .build_cartesian_2d(x0..x1, y0.min(0.0)..hi)
            .map_err(PlotError::of)?);
    }
    legend(&legend_area, series, &looks)?;
    root.present().map_err(PlotError::of)?;
    Ok(())
}
/// The range of the drawable points (x0, x1, y0, y1): finite, and y > 0 on a log axis; x1 > x0.
fn bounds(series: &[Series], log_y: bool) -> Option<(f64, f64, f64, f64)> {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in series.iter().flat_map(|s| s.points.iter()) {
        if !x.is_finite() || !y.is_finite() {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        if !log_y || y > 0.0 {
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
    }
    if x0 > x1 || y0 > y1 {
        return None;
    }
    if x0 == x1 {
        x1 = x0 + 1.0;
    }
    Some((x0, x1, y0, y1))
}

/// The legend: one row per series, line sample, marker and label.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    looks: &[Look],
) -> Result<(), PlotError> {
    let legend_area = area;
    let font = ("sans-serif", 13).into_font().color(&BLACK);
    for (i, (s, look)) in series.iter().zip(looks).enumerate() {
        let y = 30 + 22 * i as i32;
        let style = ShapeStyle::from(&look.color).stroke_width(2);
        let line = vec![(8, y), (44, y)];
        let drawn = if look.dashed {
            legend_area.draw(&plotters::element::DashedPathElement::new(
                line, 6, 4, style,
            ))
        } else {
            legend_area.draw(&PathElement::new(line, style))
        };
        drawn.map_err(PlotError::of)?;
        let (p, c) = ((26, y), look.color);
        match look.marker {
            0 => legend_area.draw(&Circle::new(p, 4, ShapeStyle::from(&c).filled())),
            1 => legend_area.draw(&Rectangle::new(
                [(p.0 - 4, p.1 - 4), (p.0 + 4, p.1 + 4)],
                ShapeStyle::from(&c).stroke_width(2),
            )),
            _ => legend_area.draw(&Polygon::new(
                vec![(p.0, p.1 - 5), (p.0 - 5, p.1 + 4), (p.0 + 5, p.1 + 4)],
                ShapeStyle::from(&c).filled(),
            )),
        }
        .map_err(PlotError::of)?;
        legend_area
            .draw(&Text::new(s.label.clone(), (52, y - 7), font.clone()))
            .map_err(PlotError::of)?;
    }
    Ok(())
}

/// Tick labels readable on a log axis: 0.5, 3, 40, 2k.
fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(group: &str, class: usize) -> Series {
        Series {
            label: format!("{group} {class}"),
            points: vec![(0.0, 1.0), (1.0, 2.0)],
            group: group.into(),
            class,
        }
    }

    #[test]
    fn classes_of_a_group_never_look_alike() {
        let l = looks(&[s("sq", 0), s("sq", 1), s("ll-wfq", 0), s("ll-wfq", 1)]);
        // RT and BE of one strategy: different colour, line style and marker.
        assert_ne!(l[0].color, l[1].color);
        assert!(!l[0].dashed && l[1].dashed);
        assert_ne!(l[0].marker, l[1].marker);
        // Strategies apart: no colour used twice in the chart.
        for i in 0..l.len() {
            for j in i + 1..l.len() {
                assert_ne!(l[i].color, l[j].color, "{i} and {j}");
            }
        }
    }

    #[test]
    fn chart_is_written_with_the_legend_beside_it() {
        if ensure_font().is_err() {
            eprintln!("skipped: no font");
            return;
        }
        let p = std::env::temp_dir().join(format!("llr-plot-{}.png", std::process::id()));
        line_chart(&p, "t", "x", "y", &[s("sq", 0), s("sq", 1)], true).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        // PNG, as wide as the plot plus the legend panel (IHDR width at offset 16).
        assert_eq!(&bytes[1..4], b"PNG");
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        assert_eq!(w, 1000 + LEGEND_W);
        let _ = std::fs::remove_file(&p);
    }
}

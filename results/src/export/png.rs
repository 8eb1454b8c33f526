//! PNG: the SVG chart, rendered to pixels with resvg.
//!
//! resvg (with usvg and tiny-skia) draws exactly the SVG [`SvgExporter`] writes, so the PNG and
//! the SVG are one picture; its text is set in the bundled DejaVu Sans (the font plotters laid
//! the SVG out with), never in whatever fonts the machine has.

use std::sync::{Arc, OnceLock};

use resvg::{tiny_skia, usvg};

use super::{Exporter, SvgExporter};
use crate::error::{Result, ResultsError};
use crate::summary::Report;

/// The grouped bar chart of [`SvgExporter`] as a PNG image, `scale` pixels per SVG pixel.
#[derive(Debug, Clone, Copy)]
pub struct PngExporter {
    /// The chart to render.
    pub svg: SvgExporter,
    /// Pixels per SVG pixel: 2 keeps text sharp on high-density screens and when zoomed.
    pub scale: f32,
}

impl Default for PngExporter {
    fn default() -> Self {
        PngExporter {
            svg: SvgExporter::default(),
            scale: 2.0,
        }
    }
}

impl Exporter for PngExporter {
    fn serialize(&self, report: &Report) -> Result<Vec<u8>> {
        let svg = self.svg.serialize(report)?;
        svg_to_png(&svg, self.scale)
    }
}

/// The font database every render shares: DejaVu Sans, standing for `sans-serif`.
fn fonts() -> Arc<usvg::fontdb::Database> {
    static FONTS: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = usvg::fontdb::Database::new();
            db.load_font_data(dejavu::sans::regular().to_vec());
            db.load_font_data(dejavu::sans::bold().to_vec());
            db.set_sans_serif_family("DejaVu Sans");
            Arc::new(db)
        })
        .clone()
}

/// Render an SVG document (railbench's charts: [`SvgExporter`], railsweep's fleet heatmaps) to
/// PNG bytes at `scale` pixels per SVG pixel, its text in DejaVu Sans.
///
/// # Errors
///
/// The SVG does not parse, its size times `scale` is empty or too large, or the PNG cannot be
/// encoded.
pub fn svg_to_png(svg: &[u8], scale: f32) -> Result<Vec<u8>> {
    let opt = usvg::Options {
        font_family: "DejaVu Sans".into(),
        fontdb: fonts(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_data(svg, &opt).map_err(|e| ResultsError::export("png", e))?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .filter(|s| u64::from(s.width()) * u64::from(s.height()) <= 100_000_000)
        .ok_or_else(|| {
            ResultsError::export(
                "png",
                format!(
                    "the image would be {} x {} pixels at scale {scale}",
                    tree.size().width(),
                    tree.size().height()
                ),
            )
        })?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| ResultsError::export("png", "cannot allocate the image"))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| ResultsError::export("png", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_svg_becomes_a_png_of_its_size_times_the_scale() {
        let svg = br#"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30"><rect x="0" y="0" width="20" height="30" fill="red"/><text x="2" y="20" font-family="sans-serif" font-size="12">Gb/s</text></svg>"#;
        let png = svg_to_png(svg, 2.0).expect("renders");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height, big-endian, at bytes 16..24.
        assert_eq!(u32::from_be_bytes([png[16], png[17], png[18], png[19]]), 80);
        assert_eq!(u32::from_be_bytes([png[20], png[21], png[22], png[23]]), 60);
    }

    #[test]
    fn text_is_drawn_with_the_bundled_font() {
        let blank = br#"<svg xmlns="http://www.w3.org/2000/svg" width="60" height="20"></svg>"#;
        let text = br#"<svg xmlns="http://www.w3.org/2000/svg" width="60" height="20"><text x="2" y="15" font-family="sans-serif" font-size="14">Gb/s</text></svg>"#;
        // Without a font, usvg drops the text and the two images are the same.
        assert_ne!(
            svg_to_png(blank, 1.0).expect("renders"),
            svg_to_png(text, 1.0).expect("renders")
        );
    }

    #[test]
    fn what_is_not_svg_is_an_error_naming_png() {
        let err = svg_to_png(b"# markdown", 1.0).expect_err("not svg");
        assert!(err.to_string().contains("png"), "{err}");
    }
}

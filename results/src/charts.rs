//! What every chart railbench draws shares: plotters' font, registered once. Behind the
//! `charts` feature (on by default), so that what needs only the records (the verbs engine,
//! rdmabw) does not build plotters.

use std::sync::OnceLock;

use plotters::style::{register_font, FontStyle};

use crate::error::{Result, ResultsError};

/// The font family charts name; viewers draw it with their own sans-serif.
pub const FONT: &str = "sans-serif";

/// Register the bundled DejaVu Sans as plotters' `sans-serif`, once. plotters needs font
/// metrics to lay out text even for SVG, and this build has no system font lookup; the SVG
/// itself only names `sans-serif`.
///
/// # Errors
///
/// The bundled font could not be loaded.
pub fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok());
    if ok {
        Ok(())
    } else {
        Err(ResultsError::export(
            "svg",
            "the bundled DejaVu Sans font could not be loaded",
        ))
    }
}

//! The two tile matrix sets of OGC's 2D Tile Matrix Set standard that map
//! clients use: WebMercatorQuad (XYZ tiles of web maps) and
//! WorldCRS84Quad (two tiles of longitude and latitude at zoom 0).

use super::crs::{Crs, WEB_MERCATOR_RADIUS};

/// Pixels along a tile's side.
pub const TILE_SIZE: u32 = 256;
/// The deepest zoom served: a pixel of a few centimetres.
pub const MAX_ZOOM: u32 = 30;
/// The pixel size OGC scale denominators assume, in metres.
const STANDARDIZED_PIXEL: f64 = 0.000_28;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TileMatrixSet {
    pub id: &'static str,
    pub title: &'static str,
    pub uri: &'static str,
    /// The CRS as OGC names it.
    pub crs_uri: &'static str,
    /// Tiles across and down at zoom 0.
    columns_at_0: u64,
    rows_at_0: u64,
    /// The top-left corner and the extent's width, in CRS units (x, y order).
    origin: (f64, f64),
    width: f64,
    /// Metres per CRS unit, for scale denominators.
    metres_per_unit: f64,
    degrees: bool,
}

const HALF_WORLD: f64 = PI_R;
const PI_R: f64 = std::f64::consts::PI * WEB_MERCATOR_RADIUS;

pub const WEB_MERCATOR_QUAD: TileMatrixSet = TileMatrixSet {
    id: "WebMercatorQuad",
    title: "Google Maps Compatible for the World",
    uri: "http://www.opengis.net/def/tilematrixset/OGC/1.0/WebMercatorQuad",
    crs_uri: "http://www.opengis.net/def/crs/EPSG/0/3857",
    columns_at_0: 1,
    rows_at_0: 1,
    origin: (-HALF_WORLD, HALF_WORLD),
    width: 2.0 * HALF_WORLD,
    metres_per_unit: 1.0,
    degrees: false,
};

pub const WORLD_CRS84_QUAD: TileMatrixSet = TileMatrixSet {
    id: "WorldCRS84Quad",
    title: "CRS84 for the World",
    uri: "http://www.opengis.net/def/tilematrixset/OGC/1.0/WorldCRS84Quad",
    crs_uri: "http://www.opengis.net/def/crs/OGC/1.3/CRS84",
    columns_at_0: 2,
    rows_at_0: 1,
    origin: (-180.0, 90.0),
    width: 360.0,
    metres_per_unit: 2.0 * PI_R / 360.0,
    degrees: true,
};

/// Every tile matrix set served.
pub const TILE_MATRIX_SETS: [TileMatrixSet; 2] = [WEB_MERCATOR_QUAD, WORLD_CRS84_QUAD];

/// One zoom level of a set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TileMatrix {
    pub zoom: u32,
    pub columns: u64,
    pub rows: u64,
    /// CRS units per pixel.
    pub cell_size: f64,
    pub scale_denominator: f64,
    pub origin: (f64, f64),
}

impl TileMatrixSet {
    pub fn by_id(id: &str) -> Option<TileMatrixSet> {
        TILE_MATRIX_SETS
            .iter()
            .find(|t| t.id.eq_ignore_ascii_case(id))
            .copied()
    }

    pub fn crs(&self) -> Crs {
        if self.degrees {
            Crs::degrees()
        } else {
            Crs::web_mercator()
        }
    }

    /// Zoom level `zoom`; `None` past [`MAX_ZOOM`].
    pub fn matrix(&self, zoom: u32) -> Option<TileMatrix> {
        if zoom > MAX_ZOOM {
            return None;
        }
        let columns = self.columns_at_0 << zoom;
        let cell_size = self.width / (columns as f64 * TILE_SIZE as f64);
        Some(TileMatrix {
            zoom,
            columns,
            rows: self.rows_at_0 << zoom,
            cell_size,
            scale_denominator: cell_size * self.metres_per_unit / STANDARDIZED_PIXEL,
            origin: self.origin,
        })
    }

    /// The bounds of tile (`zoom`, `col`, `row`) as `[min x, min y, max x,
    /// max y]` in the set's CRS, or why there is no such tile.
    pub fn tile_bounds(&self, zoom: u32, col: u64, row: u64) -> Result<[f64; 4], String> {
        let m = self.matrix(zoom).ok_or_else(|| {
            format!(
                "zoom {zoom} is past the deepest level of {}, {MAX_ZOOM}",
                self.id
            )
        })?;
        if col >= m.columns || row >= m.rows {
            return Err(format!(
                "tile {zoom}/{col}/{row} is outside {}: at zoom {zoom} columns run 0 to {} and rows 0 to {}",
                self.id,
                m.columns - 1,
                m.rows - 1
            ));
        }
        let span = m.cell_size * TILE_SIZE as f64;
        let x0 = m.origin.0 + col as f64 * span;
        let y1 = m.origin.1 - row as f64 * span;
        Ok([x0, y1 - span, x0 + span, y1])
    }

    /// The first zoom whose pixels are no larger than `cell` CRS units,
    /// clamped to the set's levels.
    pub fn zoom_for(&self, cell: f64) -> u32 {
        let at0 = self.width / (self.columns_at_0 as f64 * TILE_SIZE as f64);
        let z = ((at0 / cell).log2() - 1e-6).ceil();
        if z.is_finite() {
            z.clamp(0.0, MAX_ZOOM as f64) as u32
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_the_world_from_the_top_left() {
        let t = WEB_MERCATOR_QUAD.tile_bounds(1, 0, 0).unwrap();
        assert_eq!(t, [-HALF_WORLD, 0.0, 0.0, HALF_WORLD]);
        let w = WORLD_CRS84_QUAD.tile_bounds(0, 1, 0).unwrap();
        assert_eq!(w, [0.0, -90.0, 180.0, 90.0]);
        assert!(WEB_MERCATOR_QUAD.tile_bounds(1, 2, 0).is_err());
        assert!(WORLD_CRS84_QUAD.tile_bounds(0, 0, 1).is_err());
        assert!(WEB_MERCATOR_QUAD.tile_bounds(31, 0, 0).is_err());
        // The published scale denominators.
        let z0 = WEB_MERCATOR_QUAD.matrix(0).unwrap().scale_denominator;
        assert!((z0 - 559_082_264.028_717_2).abs() < 1e-3, "{z0}");
        let c0 = WORLD_CRS84_QUAD.matrix(0).unwrap().scale_denominator;
        assert!((c0 - 279_541_132.014_358_6).abs() < 1e-2, "{c0}");
        assert_eq!(WEB_MERCATOR_QUAD.zoom_for(156_543.033_928 / 4.0), 2);
        assert_eq!(WEB_MERCATOR_QUAD.zoom_for(111_319.5), 1);
    }
}

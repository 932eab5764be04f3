//! Coordinate reference systems as xarray, rioxarray and GeoZarr write
//! them, and moving points between them. EPSG codes, WKT authorities,
//! PROJ strings and CF grid-mapping parameters all become one [`Crs`];
//! the arithmetic is proj4rs', with the two transforms every map asks
//! for (degrees to and from Web Mercator) done in closed form.

use std::f64::consts::PI;
use std::sync::Arc;

use proj4rs::Proj;
use serde_json::{Map, Value};

/// The sphere Web Mercator projects onto (EPSG:3857).
pub const WEB_MERCATOR_RADIUS: f64 = 6_378_137.0;

/// A coordinate reference system: its name, and how to reach degrees.
#[derive(Clone)]
pub struct Crs {
    /// `EPSG:4326`, `EPSG:32633`, or the PROJ string it was built from.
    pub name: String,
    pub epsg: Option<u32>,
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    /// Longitude and latitude in degrees (WGS 84, or near enough for maps).
    Degrees,
    /// EPSG:3857.
    WebMercator,
    Projected(Arc<Proj>),
}

impl std::fmt::Debug for Crs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Crs({})", self.name)
    }
}

impl PartialEq for Crs {
    fn eq(&self, other: &Self) -> bool {
        match (&self.kind, &other.kind) {
            (Kind::Degrees, Kind::Degrees) | (Kind::WebMercator, Kind::WebMercator) => true,
            _ => self.name == other.name,
        }
    }
}

impl Crs {
    /// Longitude, latitude in degrees (EPSG:4326, in x/y order).
    pub fn degrees() -> Crs {
        Crs {
            name: "EPSG:4326".into(),
            epsg: Some(4326),
            kind: Kind::Degrees,
        }
    }

    pub fn web_mercator() -> Crs {
        Crs {
            name: "EPSG:3857".into(),
            epsg: Some(3857),
            kind: Kind::WebMercator,
        }
    }

    /// The CRS an EPSG code names.
    pub fn epsg(code: u32) -> Result<Crs, String> {
        match code {
            4326 | 4979 | 4258 | 4269 | 4283 | 4167 | 4617 | 4670 => {
                return Ok(Crs {
                    name: format!("EPSG:{code}"),
                    epsg: Some(code),
                    kind: Kind::Degrees,
                })
            }
            3857 | 900913 | 3785 | 102100 => return Ok(Crs::web_mercator()),
            _ => {}
        }
        let short = u16::try_from(code).map_err(|_| format!("EPSG:{code} is not known"))?;
        let proj = Proj::from_epsg_code(short).map_err(|e| format!("EPSG:{code}: {e}"))?;
        Ok(Crs::from_proj(format!("EPSG:{code}"), Some(code), proj))
    }

    /// The CRS a PROJ string (`+proj=...`) defines.
    pub fn proj_string(text: &str) -> Result<Crs, String> {
        let proj =
            Proj::from_proj_string(text).map_err(|e| format!("the PROJ string '{text}': {e}"))?;
        Ok(Crs::from_proj(text.to_string(), None, proj))
    }

    fn from_proj(name: String, epsg: Option<u32>, proj: Proj) -> Crs {
        let kind = if proj.is_latlong() {
            Kind::Degrees
        } else {
            Kind::Projected(Arc::new(proj))
        };
        Crs { name, epsg, kind }
    }

    /// A name as map clients write it: `EPSG:4326`, `CRS:84`, an OGC URI.
    pub fn named(text: &str) -> Result<Crs, String> {
        let t = text.trim();
        let upper = t.to_ascii_uppercase();
        if upper == "CRS:84" || upper.ends_with("/OGC/1.3/CRS84") || upper.ends_with("OGC:CRS84") {
            return Ok(Crs::degrees());
        }
        let code = upper
            .strip_prefix("EPSG:")
            .or_else(|| upper.rsplit_once("/EPSG/0/").map(|(_, c)| c))
            .or_else(|| upper.strip_prefix("URN:OGC:DEF:CRS:EPSG::"))
            .and_then(|c| c.parse::<u32>().ok());
        match code {
            Some(code) => Crs::epsg(code),
            None if t.starts_with('+') => Crs::proj_string(t),
            None => Err(format!(
                "'{t}' is not a CRS zarrd knows (EPSG:<code>, CRS:84)"
            )),
        }
    }

    /// Whether points of this CRS and of `other` map x to x and y to y
    /// alone (degrees and Web Mercator), so a picture's columns and rows
    /// can be carried over once each instead of pixel by pixel.
    pub fn separable_with(&self, other: &Crs) -> bool {
        let simple = |c: &Crs| matches!(c.kind, Kind::Degrees | Kind::WebMercator);
        simple(self) && simple(other)
    }

    pub fn is_degrees(&self) -> bool {
        matches!(self.kind, Kind::Degrees)
    }

    /// Points (x, y) of this CRS in place as longitude, latitude degrees;
    /// a point that does not project becomes NaN.
    pub fn to_degrees(&self, points: &mut [(f64, f64)]) {
        match &self.kind {
            Kind::Degrees => {}
            Kind::WebMercator => {
                for p in points {
                    let lon = (p.0 / WEB_MERCATOR_RADIUS).to_degrees();
                    let lat =
                        (2.0 * (p.1 / WEB_MERCATOR_RADIUS).exp().atan() - PI / 2.0).to_degrees();
                    *p = (lon, lat);
                }
            }
            Kind::Projected(proj) => through(proj, &degrees_proj(), points, false, true),
        }
    }

    /// Longitude, latitude degrees in place as points of this CRS.
    pub fn from_degrees(&self, points: &mut [(f64, f64)]) {
        match &self.kind {
            Kind::Degrees => {}
            Kind::WebMercator => {
                for p in points {
                    let lat = p.1.clamp(-89.999_999, 89.999_999).to_radians();
                    *p = (
                        p.0.to_radians() * WEB_MERCATOR_RADIUS,
                        (PI / 4.0 + lat / 2.0).tan().ln() * WEB_MERCATOR_RADIUS,
                    );
                }
            }
            Kind::Projected(proj) => through(&degrees_proj(), proj, points, true, false),
        }
    }

    /// Points of this CRS in place as points of `to`.
    pub fn transform(&self, to: &Crs, points: &mut [(f64, f64)]) {
        if self == to {
            return;
        }
        self.to_degrees(points);
        to.from_degrees(points);
    }
}

fn degrees_proj() -> Proj {
    // A fixed, valid string: it always parses.
    Proj::from_proj_string("+proj=longlat +datum=WGS84 +no_defs").expect("WGS 84")
}

fn through(from: &Proj, to: &Proj, points: &mut [(f64, f64)], in_deg: bool, out_deg: bool) {
    for p in points {
        let mut q = if in_deg {
            (p.0.to_radians(), p.1.to_radians(), 0.0)
        } else {
            (p.0, p.1, 0.0)
        };
        *p = match proj4rs::transform::transform(from, to, &mut q) {
            Ok(()) if q.0.is_finite() && q.1.is_finite() => {
                if out_deg {
                    (q.0.to_degrees(), q.1.to_degrees())
                } else {
                    (q.0, q.1)
                }
            }
            _ => (f64::NAN, f64::NAN),
        };
    }
}

fn text<'a>(attrs: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    attrs.get(key).and_then(Value::as_str)
}

fn number(attrs: &Map<String, Value>, key: &str) -> Option<f64> {
    match attrs.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::Array(a) => a.first()?.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The EPSG code of a WKT (1 or 2): its outermost authority, written last.
pub fn wkt_epsg(wkt: &str) -> Option<u32> {
    ["AUTHORITY[\"EPSG\",\"", "ID[\"EPSG\","]
        .iter()
        .filter_map(|marker| {
            let i = wkt.rfind(marker)?;
            let digits: String = wkt[i + marker.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            Some((i, digits.parse().ok()?))
        })
        .max_by_key(|(i, _)| *i)
        .map(|(_, code)| code)
}

/// The CRS GeoZarr's `proj:` attributes name (`proj:code`, `proj:epsg`,
/// `proj:wkt2`, `proj:projjson`), if any.
pub fn geozarr(attrs: &Map<String, Value>) -> Option<Result<Crs, String>> {
    if let Some(code) = text(attrs, "proj:code") {
        return Some(Crs::named(code));
    }
    if let Some(code) = attrs.get("proj:epsg").and_then(Value::as_u64) {
        return Some(Crs::epsg(code as u32));
    }
    if let Some(wkt) = text(attrs, "proj:wkt2") {
        return Some(
            wkt_epsg(wkt)
                .ok_or_else(|| "proj:wkt2 names no EPSG code".to_string())
                .and_then(Crs::epsg),
        );
    }
    let id = attrs.get("proj:projjson")?.get("id")?;
    let code = id.get("code")?.as_u64()?;
    (id.get("authority")?.as_str()? == "EPSG").then(|| Crs::epsg(code as u32))
}

/// The CRS a CF grid mapping's attributes describe: an EPSG code
/// (`epsg_code`, or the authority of `crs_wkt`/`spatial_ref`), a PROJ
/// string (`proj4`, `proj4text`, `proj4_params`), or the CF parameters of
/// its `grid_mapping_name`.
pub fn grid_mapping(attrs: &Map<String, Value>) -> Result<Crs, String> {
    if let Some(code) = text(attrs, "epsg_code") {
        return Crs::named(code);
    }
    if let Some(code) = attrs.get("epsg_code").and_then(Value::as_u64) {
        return Crs::epsg(code as u32);
    }
    for key in ["crs_wkt", "spatial_ref"] {
        if let Some(code) = text(attrs, key).and_then(wkt_epsg) {
            return Crs::epsg(code);
        }
    }
    for key in ["proj4", "proj4text", "proj4_params"] {
        if let Some(p) = text(attrs, key) {
            return Crs::proj_string(p);
        }
    }
    let name = text(attrs, "grid_mapping_name").ok_or("it has no grid_mapping_name")?;
    let n = |key: &str, default: f64| number(attrs, key).unwrap_or(default);
    let parallels = || -> Vec<f64> {
        match attrs.get("standard_parallel") {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_f64).collect(),
            Some(v) => v.as_f64().into_iter().collect(),
            None => Vec::new(),
        }
    };
    let offsets = format!(
        "+x_0={} +y_0={}",
        n("false_easting", 0.0),
        n("false_northing", 0.0)
    );
    let lat0 = n("latitude_of_projection_origin", 0.0);
    let proj = match name {
        "latitude_longitude" => return Ok(Crs::degrees()),
        "transverse_mercator" => format!(
            "+proj=tmerc +lat_0={lat0} +lon_0={} +k={} {offsets}",
            n("longitude_of_central_meridian", 0.0),
            n("scale_factor_at_central_meridian", 1.0)
        ),
        "lambert_conformal_conic" | "albers_conical_equal_area" => {
            let p = parallels();
            let (p1, p2) = (
                p.first().copied().unwrap_or(lat0),
                p.get(1).or(p.first()).copied().unwrap_or(lat0),
            );
            let proj = if name == "albers_conical_equal_area" {
                "aea"
            } else {
                "lcc"
            };
            format!(
                "+proj={proj} +lat_1={p1} +lat_2={p2} +lat_0={lat0} +lon_0={} {offsets}",
                n("longitude_of_central_meridian", 0.0)
            )
        }
        "polar_stereographic" => {
            let scale = match parallels().first() {
                Some(ts) => format!("+lat_ts={ts}"),
                None => format!("+k={}", n("scale_factor_at_projection_origin", 1.0)),
            };
            format!(
                "+proj=stere +lat_0={lat0} +lon_0={} {scale} {offsets}",
                n("straight_vertical_longitude_from_pole", 0.0)
            )
        }
        "mercator" => {
            let scale = match parallels().first() {
                Some(ts) => format!("+lat_ts={ts}"),
                None => format!("+k={}", n("scale_factor_at_projection_origin", 1.0)),
            };
            format!(
                "+proj=merc +lon_0={} {scale} {offsets}",
                n("longitude_of_projection_origin", 0.0)
            )
        }
        "lambert_azimuthal_equal_area" => format!(
            "+proj=laea +lat_0={lat0} +lon_0={} {offsets}",
            n("longitude_of_projection_origin", 0.0)
        ),
        other => {
            return Err(format!(
                "grid_mapping_name '{other}' is not one zarrd projects"
            ))
        }
    };
    let ellipsoid = match (
        number(attrs, "semi_major_axis"),
        number(attrs, "inverse_flattening"),
        number(attrs, "earth_radius"),
    ) {
        (Some(a), Some(rf), _) if rf > 0.0 => format!("+a={a} +rf={rf}"),
        (Some(a), _, _) => format!("+R={a}"),
        (_, _, Some(r)) => format!("+R={r}"),
        _ => "+ellps=WGS84".into(),
    };
    Crs::proj_string(&format!("{proj} {ellipsoid} +units=m +no_defs"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn close(a: (f64, f64), b: (f64, f64), tol: f64) -> bool {
        (a.0 - b.0).abs() < tol && (a.1 - b.1).abs() < tol
    }

    #[test]
    fn web_mercator_in_closed_form_agrees_with_proj() {
        let by_proj = Crs::from_proj(
            "merc".into(),
            None,
            Proj::from_epsg_code(3857).expect("3857"),
        );
        let mut a = [(12.5, 41.9), (-179.0, -80.0), (0.0, 0.0)];
        let mut b = a;
        Crs::web_mercator().from_degrees(&mut a);
        by_proj.from_degrees(&mut b);
        for (p, q) in a.iter().zip(&b) {
            assert!(close(*p, *q, 1e-6), "{p:?} {q:?}");
        }
        Crs::web_mercator().to_degrees(&mut a);
        assert!(close(a[0], (12.5, 41.9), 1e-9));
    }

    #[test]
    fn utm_by_code_wkt_and_cf_parameters_agree() {
        let wkt = r#"PROJCS["WGS 84 / UTM zone 33N",GEOGCS["WGS 84",AUTHORITY["EPSG","4326"]],AUTHORITY["EPSG","32633"]]"#;
        assert_eq!(wkt_epsg(wkt), Some(32633));
        let by_wkt = grid_mapping(&json!({"crs_wkt": wkt}).as_object().unwrap().clone()).unwrap();
        let by_cf = grid_mapping(
            &json!({
                "grid_mapping_name": "transverse_mercator",
                "longitude_of_central_meridian": 15.0,
                "scale_factor_at_central_meridian": 0.9996,
                "false_easting": 500000.0,
                "false_northing": 0.0,
                "latitude_of_projection_origin": 0.0,
                "semi_major_axis": 6378137.0,
                "inverse_flattening": 298.257223563
            })
            .as_object()
            .unwrap()
            .clone(),
        )
        .unwrap();
        let mut a = [(500_000.0, 5_000_000.0), (400_000.0, 4_500_000.0)];
        let mut b = a;
        by_wkt.to_degrees(&mut a);
        by_cf.to_degrees(&mut b);
        assert!(close(a[0], (15.0, 45.153_48), 1e-4), "{:?}", a[0]);
        for (p, q) in a.iter().zip(&b) {
            assert!(close(*p, *q, 1e-7), "{p:?} {q:?}");
        }
        let mut back = a;
        by_wkt.from_degrees(&mut back);
        assert!(close(back[1], (400_000.0, 4_500_000.0), 1e-3));
    }

    #[test]
    fn names_clients_write() {
        assert!(Crs::named("CRS:84").unwrap().is_degrees());
        assert!(Crs::named("http://www.opengis.net/def/crs/OGC/1.3/CRS84")
            .unwrap()
            .is_degrees());
        assert_eq!(Crs::named("EPSG:3857").unwrap(), Crs::web_mercator());
        assert_eq!(
            Crs::named("http://www.opengis.net/def/crs/EPSG/0/3857").unwrap(),
            Crs::web_mercator()
        );
        assert!(Crs::named("EPSG:99999999").is_err());
        assert!(Crs::named("nonsense").is_err());
        let g = geozarr(
            &json!({"proj:code": "EPSG:32633"})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(g.unwrap().unwrap().epsg, Some(32633));
    }
}

//! Coordinates as an index: a dimension's 1-D coordinate array read into
//! numbers, and selection by label on it as `xarray.Dataset.sel` (pandas'
//! indexing) means it: exact labels, inclusive ranges in the coordinate's
//! own direction, nearest with a tolerance, and time labels of a coarser
//! precision than the coordinate's steps naming the whole period.

use super::time::{parse_iso, DateTime, Precision, TimeUnits};
use crate::zarr::selection::DimSelector;

/// The direction a coordinate runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
    Unsorted,
}

/// A dimension coordinate, decoded.
#[derive(Debug, Clone)]
pub struct Coordinate {
    pub name: String,
    /// Unpacked values (`scale_factor`, `add_offset` applied); times as the
    /// numbers stored in `time`'s units.
    pub values: Vec<f64>,
    /// Stored with single (or half) precision: labels are compared at it,
    /// so `52.1` finds the float32 nearest 52.1.
    pub single: bool,
    pub time: Option<TimeUnits>,
    pub order: Order,
    /// For times: the finest precision a value needs (every value at
    /// midnight: days), which decides when a label names a period.
    pub resolution: Precision,
}

/// A label selection of one dimension, as written after `sel.{dim}=`.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelSel {
    Exact(String),
    /// `START..STOP`, inclusive; either end may be empty.
    Range(Option<String>, Option<String>),
    /// `~LABEL`.
    Nearest(String),
}

impl LabelSel {
    pub fn parse(text: &str) -> LabelSel {
        if let Some(rest) = text.strip_prefix('~') {
            return LabelSel::Nearest(rest.trim().to_string());
        }
        match text.split_once("..") {
            Some((a, b)) => {
                let end = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
                LabelSel::Range(end(a), end(b))
            }
            None => LabelSel::Exact(text.trim().to_string()),
        }
    }
}

/// A label as numbers of the coordinate: `[start, end)` for a time label
/// naming a period, `[v, v]` otherwise.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: f64,
    /// Exclusive when the label names a period.
    end: f64,
    period: bool,
}

impl Coordinate {
    /// A coordinate of `values` (decoded numbers).
    pub fn new(name: &str, values: Vec<f64>, single: bool, time: Option<TimeUnits>) -> Self {
        let order = if values.windows(2).all(|w| w[0] <= w[1]) {
            Order::Ascending
        } else if values.windows(2).all(|w| w[0] >= w[1]) {
            Order::Descending
        } else {
            Order::Unsorted
        };
        let resolution = match &time {
            Some(units) => resolution(units, &values),
            None => Precision::Nanosecond,
        };
        Coordinate {
            name: name.to_string(),
            values,
            single,
            time,
            order,
            resolution,
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// One value as a label: ISO 8601 for times, the number otherwise.
    pub fn label(&self, value: f64) -> String {
        match self.time.as_ref().and_then(|t| t.to_datetime(value)) {
            Some(at) => at.to_string(),
            None => number_text(if self.single {
                value as f32 as f64
            } else {
                value
            }),
        }
    }

    /// "lat runs from 89.5 to -89.5 (180 points)", for errors.
    pub fn extent(&self) -> String {
        match (self.values.first(), self.values.last()) {
            (Some(&a), Some(&b)) => format!(
                "{} runs from {} to {} ({} points{})",
                self.name,
                self.label(a),
                self.label(b),
                self.len(),
                if self.order == Order::Unsorted {
                    ", unsorted"
                } else {
                    ""
                }
            ),
            _ => format!("{} is empty", self.name),
        }
    }

    fn span(&self, label: &str) -> Result<Span, String> {
        match &self.time {
            Some(units) => {
                let (at, precision) = parse_iso(label)?;
                let start = units.to_value(&at)?;
                if precision < self.resolution {
                    let end = units.to_value(&units.period_end(&at, precision))?;
                    Ok(Span {
                        start,
                        end,
                        period: true,
                    })
                } else {
                    Ok(Span {
                        start,
                        end: start,
                        period: false,
                    })
                }
            }
            None => {
                let v: f64 = label
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite())
                    .ok_or_else(|| {
                        format!(
                            "'{label}' is not a finite number (the coordinate {} holds numbers)",
                            self.name
                        )
                    })?;
                let v = if self.single { v as f32 as f64 } else { v };
                Ok(Span {
                    start: v,
                    end: v,
                    period: false,
                })
            }
        }
    }

    /// Whether `v` lies in `span`.
    fn within(span: &Span, v: f64) -> bool {
        if span.period {
            v >= span.start && v < span.end
        } else {
            v == span.start
        }
    }

    /// The index selection a label selection of this coordinate means,
    /// with `tolerance` for nearest; errors say why, with the extent.
    pub fn select(&self, sel: &LabelSel, tolerance: Option<&str>) -> Result<DimSelector, String> {
        match sel {
            LabelSel::Exact(label) => self.exact(label),
            LabelSel::Range(a, b) => self.range(a.as_deref(), b.as_deref()),
            LabelSel::Nearest(label) => self.nearest(label, tolerance),
        }
    }

    fn exact(&self, label: &str) -> Result<DimSelector, String> {
        let span = self.span(label)?;
        let hits: Vec<i64> = (0..self.len())
            .filter(|&i| Self::within(&span, self.values[i]))
            .map(|i| i as i64)
            .collect();
        match hits.as_slice() {
            [] => Err(format!(
                "no value of {} is {label}; {}",
                self.name,
                self.extent()
            )),
            // A period (`2024-03`) keeps its dimension, as pandas' slice does.
            [first, .., last] | [first @ last] if span.period && self.order != Order::Unsorted => {
                Ok(DimSelector::Slice {
                    start: Some(*first),
                    stop: Some(*last + 1),
                    step: None,
                })
            }
            [one] if !span.period => Ok(DimSelector::Index(*one)),
            _ => Ok(DimSelector::List(hits)),
        }
    }

    fn range(&self, a: Option<&str>, b: Option<&str>) -> Result<DimSelector, String> {
        let written = format!("{}..{}", a.unwrap_or(""), b.unwrap_or(""));
        let a = a.map(|l| self.span(l)).transpose()?;
        let b = b.map(|l| self.span(l)).transpose()?;
        let n = self.len();
        let (start, stop) = match self.order {
            Order::Unsorted => {
                return Err(format!(
                    "{} is not sorted, so a range of it means nothing; select it by exact labels or by index (isel.{}=); {}",
                    self.name,
                    self.name,
                    self.extent()
                ))
            }
            Order::Ascending => {
                let start = a.map_or(0, |s| self.values.partition_point(|&v| v < s.start));
                let stop = b.map_or(n, |s| {
                    if s.period {
                        self.values.partition_point(|&v| v < s.end)
                    } else {
                        self.values.partition_point(|&v| v <= s.end)
                    }
                });
                (start, stop)
            }
            Order::Descending => {
                if let (Some(a), Some(b)) = (a, b) {
                    if a.start < b.start {
                        return Err(format!(
                            "{} runs downwards, so a range of it is written from the higher label to the lower (as {}..{}); {}",
                            self.name,
                            written.split("..").nth(1).unwrap_or(""),
                            written.split("..").next().unwrap_or(""),
                            self.extent()
                        ));
                    }
                }
                let start = a.map_or(0, |s| {
                    if s.period {
                        self.values.partition_point(|&v| v >= s.end)
                    } else {
                        self.values.partition_point(|&v| v > s.start)
                    }
                });
                let stop = b.map_or(n, |s| self.values.partition_point(|&v| v >= s.start));
                (start, stop)
            }
        };
        if stop <= start {
            return Err(format!(
                "no value of {} lies in {written}; {}",
                self.name,
                self.extent()
            ));
        }
        Ok(DimSelector::Slice {
            start: Some(start as i64),
            stop: Some(stop as i64),
            step: None,
        })
    }

    fn nearest(&self, label: &str, tolerance: Option<&str>) -> Result<DimSelector, String> {
        let target = self.span(label)?.start;
        let tolerance = tolerance.map(|t| self.tolerance(t)).transpose()?;
        // Ties go to the larger value, as pandas' nearest on an ascending index.
        let best = self
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .min_by(|(i, x), (j, y)| {
                let (dx, dy) = ((*x - target).abs(), (*y - target).abs());
                dx.total_cmp(&dy)
                    .then_with(|| y.total_cmp(x))
                    .then_with(|| i.cmp(j))
            });
        let Some((i, &v)) = best else {
            return Err(format!("{} has no values; {}", self.name, self.extent()));
        };
        if let Some(tol) = tolerance {
            if (v - target).abs() > tol {
                return Err(format!(
                    "the value of {} nearest {label} is {}, further than the tolerance; {}",
                    self.name,
                    self.label(v),
                    self.extent()
                ));
            }
        }
        Ok(DimSelector::Index(i as i64))
    }

    /// A tolerance in the coordinate's numbers: a number, or for times a
    /// duration (`12h`, `1D`, `30min`, `90s`).
    fn tolerance(&self, text: &str) -> Result<f64, String> {
        let bad = |why: &str| format!("tolerance.{} = '{text}': {why}", self.name);
        let Some(units) = &self.time else {
            let t: f64 = text.parse().map_err(|_| bad("not a number"))?;
            return if t >= 0.0 {
                Ok(t)
            } else {
                Err(bad("a tolerance is not negative"))
            };
        };
        // The unit is the trailing letters (`1e3s` is a thousand seconds).
        let number = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        if number.len() == text.len() {
            return Err(bad(
                "a time tolerance is a duration, as 12h, 1D, 30min or 90s",
            ));
        }
        let unit = &text[number.len()..];
        let number: f64 = number
            .trim()
            .parse()
            .map_err(|_| bad("a time tolerance is a duration, as 12h, 1D, 30min or 90s"))?;
        let ns: f64 = match unit {
            "W" | "w" => 7.0 * 86_400e9,
            "D" | "d" => 86_400e9,
            "h" | "H" => 3_600e9,
            "min" | "m" | "T" => 60e9,
            "s" | "S" => 1e9,
            "ms" | "L" => 1e6,
            "us" | "U" => 1e3,
            "ns" | "N" => 1.0,
            _ => return Err(bad("its unit is not one of W, D, h, min, s, ms, us, ns")),
        };
        if number < 0.0 {
            return Err(bad("a tolerance is not negative"));
        }
        Ok(number * ns / units.unit_ns() as f64)
    }
}

/// A number as a label in messages: short, whatever its size.
fn number_text(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e16 || v.abs() < 1e-6) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// The finest precision the values of a time coordinate need.
fn resolution(units: &TimeUnits, values: &[f64]) -> Precision {
    let mut finest = Precision::Day;
    for &v in values {
        let Some(DateTime { nanos, .. }) = units.to_datetime(v) else {
            continue;
        };
        let p = if nanos % 1_000_000_000 != 0 {
            Precision::Nanosecond
        } else if nanos % 60_000_000_000 != 0 {
            Precision::Second
        } else if nanos % 3_600_000_000_000 != 0 {
            Precision::Minute
        } else if nanos != 0 {
            Precision::Hour
        } else {
            Precision::Day
        };
        finest = finest.max(p);
        if finest == Precision::Nanosecond {
            break;
        }
    }
    finest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat() -> Coordinate {
        let values = (0..180).map(|i| 89.5 - i as f64).collect();
        Coordinate::new("lat", values, false, None)
    }

    fn days() -> Coordinate {
        let units = TimeUnits::parse("days since 2024-01-01", None)
            .unwrap()
            .unwrap();
        Coordinate::new(
            "time",
            (0..366).map(f64::from).collect(),
            false,
            Some(units),
        )
    }

    fn slice(a: i64, b: i64) -> DimSelector {
        DimSelector::Slice {
            start: Some(a),
            stop: Some(b),
            step: None,
        }
    }

    #[test]
    fn ranges_run_the_coordinates_way() {
        let lat = lat();
        assert_eq!(lat.order, Order::Descending);
        let sel = LabelSel::parse("60..30.5");
        assert_eq!(lat.select(&sel, None).unwrap(), slice(30, 60));
        let err = lat.select(&LabelSel::parse("30..60"), None).unwrap_err();
        assert!(err.contains("written from the higher label"), "{err}");
        assert_eq!(
            lat.select(&LabelSel::parse("..88"), None).unwrap(),
            slice(0, 2)
        );
        let err = lat.select(&LabelSel::parse("100..95"), None).unwrap_err();
        assert!(
            err.contains("runs from 89.5 to -89.5 (180 points)"),
            "{err}"
        );
    }

    #[test]
    fn exact_and_nearest_labels() {
        let lat = lat();
        assert_eq!(
            lat.select(&LabelSel::parse("52.5"), None).unwrap(),
            DimSelector::Index(37)
        );
        assert!(lat.select(&LabelSel::parse("52.1"), None).is_err());
        assert_eq!(
            lat.select(&LabelSel::parse("~52.1"), None).unwrap(),
            DimSelector::Index(37)
        );
        assert!(lat.select(&LabelSel::parse("~52.1"), Some("0.1")).is_err());
        assert!(lat.select(&LabelSel::parse("~52.1"), Some("0.5")).is_ok());
        assert!(lat
            .select(&LabelSel::parse("north"), None)
            .unwrap_err()
            .contains("not a finite number"));
    }

    #[test]
    fn a_coarser_time_label_names_its_period() {
        let t = days();
        assert_eq!(t.resolution, Precision::Day);
        // February of a leap year: days 31..=59.
        assert_eq!(
            t.select(&LabelSel::parse("2024-02"), None).unwrap(),
            slice(31, 60)
        );
        assert_eq!(
            t.select(&LabelSel::parse("2024-02-03"), None).unwrap(),
            DimSelector::Index(33)
        );
        assert_eq!(
            t.select(&LabelSel::parse("2024-03..2024-04"), None)
                .unwrap(),
            slice(60, 121)
        );
        assert_eq!(
            t.select(&LabelSel::parse("~2024-01-05T13:00"), None)
                .unwrap(),
            DimSelector::Index(5)
        );
        assert!(t
            .select(&LabelSel::parse("~2024-01-05T13:00"), Some("6h"))
            .is_err());
        assert!(t
            .select(&LabelSel::parse("~2024-01-05T13:00"), Some("1D"))
            .is_ok());
        let err = t.select(&LabelSel::parse("2025-06"), None).unwrap_err();
        assert!(
            err.contains("2024-01-01T00:00:00 to 2024-12-31T00:00:00"),
            "{err}"
        );
    }

    #[test]
    fn single_precision_coordinates_match_their_own_rounding() {
        let values = vec![52.1f32 as f64, 52.2f32 as f64];
        let c = Coordinate::new("lat", values, true, None);
        assert_eq!(
            c.select(&LabelSel::parse("52.1"), None).unwrap(),
            DimSelector::Index(0)
        );
        let unsorted = Coordinate::new("x", vec![3.0, 1.0, 2.0, 1.0], false, None);
        assert!(unsorted.select(&LabelSel::parse("1..2"), None).is_err());
        assert_eq!(
            unsorted.select(&LabelSel::parse("1"), None).unwrap(),
            DimSelector::List(vec![1, 3])
        );
    }
}

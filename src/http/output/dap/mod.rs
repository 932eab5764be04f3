//! OPeNDAP answers of a dataset (`service::Described`): what a Zarr type
//! is in DAP2 and DAP4, attributes as DAP types them, values on the wire,
//! and the plan of an answer (which variables, grids and hyperslabs a
//! constraint asks for). `dap2.rs` writes DDS, DAS, `.dods` and `.ascii`;
//! `dap4.rs` the DMR and the chunked `.dap`; `html.rs` the form page.

pub mod dap2;
pub mod dap4;
pub mod html;

use serde_json::{Map, Value};

use crate::http::input::constraint::{Projection, Slab};
use crate::service::{Described, Variable};
use crate::zarr::selection::DimSelector;
use crate::zarr::{cf, ArrayBytes, DataType, Selection};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Dap2,
    Dap4,
}

/// The atomic types served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DapType {
    /// Unsigned 8-bit (`Byte` in DAP2, `UInt8` in DAP4).
    Byte,
    Int8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float32,
    Float64,
    String,
}

impl DapType {
    pub fn name(self, version: Version) -> &'static str {
        match self {
            DapType::Byte if version == Version::Dap2 => "Byte",
            DapType::Byte => "UInt8",
            DapType::Int8 => "Int8",
            DapType::Int16 => "Int16",
            DapType::UInt16 => "UInt16",
            DapType::Int32 => "Int32",
            DapType::UInt32 => "UInt32",
            DapType::Int64 => "Int64",
            DapType::UInt64 => "UInt64",
            DapType::Float32 => "Float32",
            DapType::Float64 => "Float64",
            DapType::String => "String",
        }
    }

    fn is_float(self) -> bool {
        matches!(self, DapType::Float32 | DapType::Float64)
    }

    /// Bytes an element takes on `wire` (strings: their length word).
    pub fn wire_size(self, wire: Wire) -> u64 {
        match (self, wire) {
            (DapType::Byte | DapType::Int8, Wire::Little) => 1,
            (DapType::Int16 | DapType::UInt16, Wire::Little) => 2,
            (DapType::Int64 | DapType::UInt64 | DapType::Float64, _) => 8,
            (DapType::String, Wire::Little) => 8,
            _ => 4,
        }
    }
}

/// The DAP type `dtype` is served as, or why it is left out.
pub fn dap_type(dtype: &DataType, version: Version) -> Result<DapType, String> {
    use DataType as D;
    let dap4 = version == Version::Dap4;
    Ok(match dtype {
        D::Bool | D::UInt8 => DapType::Byte,
        // DAP2 has no signed byte: widened, as Hyrax serves netCDF bytes.
        D::Int8 if dap4 => DapType::Int8,
        D::Int8 | D::Int16 => DapType::Int16,
        D::UInt16 => DapType::UInt16,
        D::Int32 => DapType::Int32,
        D::UInt32 => DapType::UInt32,
        D::Float16 | D::BFloat16 | D::Float32 => DapType::Float32,
        D::Float64 => DapType::Float64,
        D::Int64 | D::DateTime64 { .. } | D::TimeDelta64 { .. } if dap4 => DapType::Int64,
        D::UInt64 if dap4 => DapType::UInt64,
        D::Int64 | D::UInt64 | D::DateTime64 { .. } | D::TimeDelta64 { .. } => {
            return Err(format!(
                "{} is 64-bit, which DAP2 cannot carry: read it with DAP4",
                dtype.name()
            ))
        }
        D::String | D::Bytes | D::FixedBytes(_) | D::FixedUtf32(_) => DapType::String,
        other => return Err(format!("{} has no DAP type", other.name())),
    })
}

/// How values are written: DAP2's XDR (big-endian, four bytes at least,
/// strings with a 32-bit length and padding) or DAP4's little-endian
/// (strings with a 64-bit length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Xdr,
    Little,
}

/// `data` (decoded elements of `dtype`: little-endian, C order) as `to`
/// on `wire`, appended to `out`, without an array's framing.
pub fn encode_values(
    dtype: &DataType,
    to: DapType,
    data: &ArrayBytes,
    wire: Wire,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    if to == DapType::String {
        for s in strings(dtype, data)? {
            let s = s.as_ref();
            match wire {
                Wire::Xdr => {
                    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
                    out.extend_from_slice(s);
                    out.resize(out.len() + (4 - s.len() % 4) % 4, 0);
                }
                Wire::Little => {
                    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
                    out.extend_from_slice(s);
                }
            }
        }
        return Ok(());
    }
    let ArrayBytes::Fixed(bytes) = data else {
        return Err(format!("{} holds no numbers", dtype.name()));
    };
    let size = dtype.size().unwrap_or(1);
    let same = size as u64 == to.wire_size(Wire::Little) && !matches!(dtype, DataType::Bool);
    match (same, wire) {
        // Stored as served: little-endian already, or each element swapped.
        (true, Wire::Little) => out.extend_from_slice(bytes),
        (true, Wire::Xdr) if size >= 4 => {
            out.reserve(bytes.len());
            for e in bytes.chunks_exact(size) {
                out.extend(e.iter().rev());
            }
        }
        _ => {
            let mut numbers = Vec::with_capacity(bytes.len() / size);
            cf::numbers(dtype, bytes, &mut numbers)
                .ok_or_else(|| format!("{} holds no numbers", dtype.name()))?;
            for v in numbers {
                write_number(v, to, wire, out);
            }
        }
    }
    Ok(())
}

/// One number as `to` on `wire` (casts as numpy's `astype`).
fn write_number(v: f64, to: DapType, wire: Wire, out: &mut Vec<u8>) {
    macro_rules! put {
        ($x:expr) => {
            match wire {
                Wire::Xdr => out.extend_from_slice(&$x.to_be_bytes()),
                Wire::Little => out.extend_from_slice(&$x.to_le_bytes()),
            }
        };
    }
    match (to, wire) {
        // XDR widens small integers to four bytes.
        (DapType::Byte, Wire::Xdr) => put!(v as u8 as u32),
        (DapType::Int8, Wire::Xdr) | (DapType::Int16, Wire::Xdr) => put!(v as i16 as i32),
        (DapType::UInt16, Wire::Xdr) => put!(v as u16 as u32),
        (DapType::Byte, Wire::Little) => put!(v as u8),
        (DapType::Int8, Wire::Little) => put!(v as i8),
        (DapType::Int16, Wire::Little) => put!(v as i16),
        (DapType::UInt16, Wire::Little) => put!(v as u16),
        (DapType::Int32, _) => put!(v as i32),
        (DapType::UInt32, _) => put!(v as u32),
        (DapType::Int64, _) => put!(v as i64),
        (DapType::UInt64, _) => put!(v as u64),
        (DapType::Float32, _) => put!(v as f32),
        (DapType::Float64, _) | (DapType::String, _) => put!(v),
    }
}

/// Elements of a string type as UTF-8 bytes (fixed widths without their
/// padding).
pub fn strings<'a>(
    dtype: &DataType,
    data: &'a ArrayBytes,
) -> Result<Vec<std::borrow::Cow<'a, [u8]>>, String> {
    use std::borrow::Cow;
    Ok(match (dtype, data) {
        (_, ArrayBytes::Variable(items)) => items.iter().map(|s| Cow::Borrowed(&s[..])).collect(),
        (DataType::FixedBytes(n), ArrayBytes::Fixed(b)) => b
            .chunks_exact((*n).max(1))
            .map(|e| {
                let end = e.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
                Cow::Borrowed(&e[..end])
            })
            .collect(),
        (DataType::FixedUtf32(n), ArrayBytes::Fixed(b)) => b
            .chunks_exact((*n).max(1) * 4)
            .map(|e| {
                let text: String = e
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .take_while(|&c| c != 0)
                    .map(|c| char::from_u32(c).unwrap_or('\u{FFFD}'))
                    .collect();
                Cow::Owned(text.into_bytes())
            })
            .collect(),
        _ => return Err(format!("{} holds no strings", dtype.name())),
    })
}

/// An attribute as DAP types it, its values written as text.
#[derive(Debug, Clone)]
pub struct Attribute {
    pub name: String,
    pub ty: DapType,
    pub values: Vec<String>,
}

/// Attributes that take the variable's own type (netCDF-C refuses a
/// `_FillValue` of another type).
const TYPED_AS_VARIABLE: &[&str] = &[
    "_FillValue",
    "missing_value",
    "valid_min",
    "valid_max",
    "valid_range",
];

/// `attrs` as DAP attributes; `own`: the variable's type, for the
/// attributes that must have it.
pub fn attributes(attrs: &Map<String, Value>, own: Option<DapType>, v: Version) -> Vec<Attribute> {
    let mut out = Vec::new();
    for (name, value) in attrs {
        let list: Vec<&Value> = match value {
            Value::Null => continue,
            Value::Array(items) if items.is_empty() => continue,
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        let typed = own.filter(|t| *t != DapType::String && TYPED_AS_VARIABLE.contains(&&**name));
        let numbers: Option<Vec<f64>> = list.iter().map(|x| cf::attr_number(x)).collect();
        let attr = match (typed, numbers) {
            (Some(ty), Some(ns)) => Attribute {
                name: name.clone(),
                ty,
                values: list
                    .iter()
                    .zip(&ns)
                    .map(|(x, &n)| exact(x, ty).unwrap_or_else(|| number_text(n, ty)))
                    .collect(),
            },
            (None, Some(ns)) if list.iter().all(|x| x.is_number() || x.is_boolean()) => {
                let integers = list
                    .iter()
                    .all(|x| x.is_i64() || x.is_u64() || x.is_boolean());
                let ty = match integers {
                    true if ns.iter().all(|&n| i32::try_from(n as i64).is_ok()) => DapType::Int32,
                    true if v == Version::Dap4
                        && list.iter().all(|x| !x.is_u64() || x.is_i64()) =>
                    {
                        DapType::Int64
                    }
                    _ => DapType::Float64,
                };
                let values = list
                    .iter()
                    .map(|x| match (exact(x, ty), x.as_bool()) {
                        (Some(text), _) => text,
                        (_, Some(b)) => u8::from(b).to_string(),
                        _ => number_text(cf::attr_number(x).unwrap_or(f64::NAN), ty),
                    })
                    .collect();
                Attribute {
                    name: name.clone(),
                    ty,
                    values,
                }
            }
            _ => Attribute {
                name: name.clone(),
                ty: DapType::String,
                values: list
                    .iter()
                    .map(|x| match x {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect(),
            },
        };
        out.push(attr);
    }
    out
}

/// A JSON integer as the text of an integer type, digit for digit (no
/// trip through a float: 2^64 - 1 stays itself).
fn exact(x: &Value, ty: DapType) -> Option<String> {
    if ty.is_float() || ty == DapType::String {
        return None;
    }
    x.as_i64()
        .map(|i| i.to_string())
        .or_else(|| x.as_u64().map(|u| u.to_string()))
}

/// A number as DAP's text forms read it back exactly.
fn number_text(v: f64, ty: DapType) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Inf" } else { "-Inf" }.into();
    }
    if !ty.is_float() {
        return format!("{}", v.round() as i64);
    }
    let exponent = v != 0.0 && !(1e-5..1e16).contains(&v.abs());
    match (ty, exponent) {
        (DapType::Float32, false) => format!("{}", v as f32),
        (DapType::Float32, true) => format!("{:e}", v as f32),
        (_, false) => format!("{v}"),
        (_, true) => format!("{v:e}"),
    }
}

/// A dataset as served in one DAP version: the variables it can carry,
/// with their types.
pub struct Dataset {
    pub name: String,
    pub attributes: Map<String, Value>,
    pub vars: Vec<(Variable, DapType)>,
    /// Variables not served, and why.
    pub left_out: Vec<(String, String)>,
    pub version: Version,
}

/// A dimension of an array as sent: the hyperslab of its `len` elements.
#[derive(Debug, Clone)]
pub struct Cut {
    pub dim: String,
    pub len: u64,
    pub start: u64,
    pub stride: u64,
    pub count: u64,
}

impl Cut {
    pub fn is_whole(&self) -> bool {
        self.start == 0 && self.stride == 1 && self.count == self.len
    }

    fn selector(&self) -> DimSelector {
        let stop = match self.count {
            0 => self.start,
            n => self.start + (n - 1) * self.stride + 1,
        };
        DimSelector::Slice {
            start: Some(self.start as i64),
            stop: Some(stop as i64),
            step: Some(self.stride as i64),
        }
    }
}

/// One array sent: a variable, cut.
#[derive(Debug, Clone)]
pub struct Piece {
    pub var: Variable,
    pub ty: DapType,
    pub cuts: Vec<Cut>,
}

impl Piece {
    pub fn count(&self) -> u64 {
        self.cuts.iter().map(|c| c.count).product()
    }

    pub fn shape(&self) -> Vec<u64> {
        self.cuts.iter().map(|c| c.count).collect()
    }

    pub fn selection(&self) -> Selection {
        Selection::Orthogonal(self.cuts.iter().map(Cut::selector).collect())
    }
}

/// One top-level part of an answer.
#[derive(Debug, Clone)]
pub enum Item {
    Array(Piece),
    /// DAP2: an array with its coordinate maps, cut alike.
    Grid {
        array: Piece,
        maps: Vec<Piece>,
    },
    /// DAP2: some members of a grid.
    Structure {
        name: String,
        members: Vec<Piece>,
    },
}

impl Item {
    pub fn pieces(&self) -> Vec<&Piece> {
        match self {
            Item::Array(p) => vec![p],
            Item::Grid { array, maps } => std::iter::once(array).chain(maps).collect(),
            Item::Structure { members, .. } => members.iter().collect(),
        }
    }
}

/// What one grid's projections ask for, before it is sent.
#[derive(Default)]
struct Asked {
    whole: Option<Vec<Slab>>,
    array: Option<Vec<Slab>>,
    maps: Vec<(usize, Vec<Slab>)>,
}

impl Dataset {
    pub fn new(described: Described, version: Version) -> Self {
        let mut vars = Vec::new();
        let mut left_out = described.left_out;
        for v in described.variables {
            let too_long = v.shape.iter().find(|&&n| n > i32::MAX as u64);
            match (dap_type(&v.dtype, version), too_long) {
                (Ok(_), Some(n)) if version == Version::Dap2 => left_out.push((
                    v.name.clone(),
                    format!(
                        "a dimension of {n} elements, more than DAP2 can count: read it with DAP4"
                    ),
                )),
                (Ok(t), _) => vars.push((v, t)),
                (Err(why), _) => left_out.push((v.name.clone(), why)),
            }
        }
        Dataset {
            name: described.name,
            attributes: described.attributes,
            vars,
            left_out,
            version,
        }
    }

    fn index(&self, name: &str) -> Result<usize, String> {
        self.vars
            .iter()
            .position(|(v, _)| v.name == name)
            .ok_or_else(|| {
                let why = self
                    .left_out
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, why)| format!(": {why}"));
                match why {
                    Some(why) => format!("'{name}' is not served{why}"),
                    None => {
                        let names: Vec<&str> =
                            self.vars.iter().map(|(v, _)| v.name.as_str()).collect();
                        format!(
                            "no variable '{name}' in '{}' (it has {})",
                            self.name,
                            names.join(", ")
                        )
                    }
                }
            })
    }

    /// The maps of the variable at `i` when DAP2 serves it as a grid:
    /// every dimension has a coordinate variable.
    pub fn grid_maps(&self, i: usize) -> Option<Vec<usize>> {
        let (v, _) = &self.vars[i];
        if self.version != Version::Dap2 || v.is_coordinate() || v.dimensions.is_empty() {
            return None;
        }
        v.dimensions
            .iter()
            .map(|d| {
                self.vars
                    .iter()
                    .position(|(c, _)| c.name == *d && c.is_coordinate())
            })
            .collect()
    }

    fn piece(&self, i: usize, slabs: &[Slab]) -> Result<Piece, String> {
        let (var, ty) = &self.vars[i];
        if !slabs.is_empty() && slabs.len() != var.shape.len() {
            return Err(format!(
                "'{}' has {} dimensions, the constraint gives {} hyperslabs",
                var.name,
                var.shape.len(),
                slabs.len()
            ));
        }
        let cuts = var
            .dimensions
            .iter()
            .zip(&var.shape)
            .enumerate()
            .map(|(k, (dim, &len))| cut(&var.name, dim, len, slabs.get(k).unwrap_or(&Slab::ALL)))
            .collect::<Result<_, _>>()?;
        Ok(Piece {
            var: var.clone(),
            ty: *ty,
            cuts,
        })
    }

    /// The items `projections` ask for, in the dataset's order (every
    /// variable, whole, when there are none).
    pub fn plan(&self, projections: &[Projection]) -> Result<Vec<Item>, String> {
        let mut asked: Vec<Option<Asked>> = (0..self.vars.len()).map(|_| None).collect();
        if projections.is_empty() {
            for a in &mut asked {
                *a = Some(Asked {
                    whole: Some(Vec::new()),
                    ..Asked::default()
                });
            }
        }
        for p in projections {
            // A name holding a dot (`a.b`) reads as a grid's member.
            let dotted = p.member.as_ref().map(|m| format!("{}.{m}", p.name));
            let (name, member) = match dotted {
                Some(d) if self.index(&p.name).is_err() && self.index(&d).is_ok() => (d, None),
                _ => (p.name.clone(), p.member.clone()),
            };
            let p = &Projection {
                name,
                member,
                slabs: p.slabs.clone(),
            };
            let i = self.index(&p.name)?;
            let entry = asked[i].get_or_insert_with(Asked::default);
            match &p.member {
                None => entry.whole = Some(p.slabs.clone()),
                Some(m) => {
                    let maps = self.grid_maps(i).ok_or_else(|| {
                        format!("'{}' is not a grid: it has no member '{m}'", p.name)
                    })?;
                    if *m == p.name {
                        entry.array = Some(p.slabs.clone());
                    } else {
                        let k = maps
                            .iter()
                            .position(|&j| self.vars[j].0.name == *m)
                            .ok_or_else(|| format!("the grid '{}' has no map '{m}'", p.name))?;
                        entry.maps.retain(|(j, _)| *j != k);
                        entry.maps.push((k, p.slabs.clone()));
                    }
                }
            }
        }
        let mut items = Vec::new();
        for (i, a) in asked.into_iter().enumerate() {
            let Some(a) = a else { continue };
            let maps = self.grid_maps(i);
            if let Some(slabs) = &a.whole {
                let array = self.piece(i, slabs)?;
                items.push(match maps {
                    Some(maps) => {
                        let maps = maps
                            .iter()
                            .enumerate()
                            .map(|(k, &j)| {
                                let s: Vec<Slab> = slabs.get(k).copied().into_iter().collect();
                                self.piece(j, &s)
                            })
                            .collect::<Result<_, _>>()?;
                        Item::Grid { array, maps }
                    }
                    None => Item::Array(array),
                });
                continue;
            }
            let maps = maps.unwrap_or_default();
            let mut members = Vec::new();
            if let Some(slabs) = &a.array {
                members.push(self.piece(i, slabs)?);
            }
            let mut asked_maps = a.maps;
            asked_maps.sort_by_key(|(k, _)| *k);
            for (k, slabs) in &asked_maps {
                members.push(self.piece(maps[*k], slabs)?);
            }
            let all = a.array.is_some() && asked_maps.len() == maps.len();
            items.push(if all {
                let array = members.remove(0);
                Item::Grid {
                    array,
                    maps: members,
                }
            } else {
                Item::Structure {
                    name: self.vars[i].0.name.clone(),
                    members,
                }
            });
        }
        Ok(items)
    }
}

fn cut(var: &str, dim: &str, len: u64, slab: &Slab) -> Result<Cut, String> {
    if *slab == Slab::ALL {
        return Ok(Cut {
            dim: dim.to_string(),
            len,
            start: 0,
            stride: 1,
            count: len,
        });
    }
    if slab.start >= len {
        return Err(format!(
            "the hyperslab of '{var}' starts at {} past the {len} elements of '{dim}'",
            slab.start
        ));
    }
    let stop = slab.stop.unwrap_or(len - 1);
    if stop >= len {
        return Err(format!(
            "the hyperslab of '{var}' stops at {stop} past the last index {} of '{dim}'",
            len - 1
        ));
    }
    // A stride past the end takes the start alone (and stays a step the
    // engine's signed selections can hold).
    let stride = slab.stride.min(len);
    Ok(Cut {
        dim: dim.to_string(),
        len,
        start: slab.start,
        stride,
        count: (stop - slab.start) / stride + 1,
    })
}

/// A name as DAP writes it in a DDS: characters outside its word set
/// percent-encoded (as libdap's `id2www`).
pub fn www_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || "_!~*'-\"/.".contains(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_numbers_keep_their_exact_values() {
        assert_eq!(number_text(0.1, DapType::Float32), "0.1");
        assert_eq!(number_text(1e34, DapType::Float64), "1e34");
        assert_eq!(number_text(f64::NAN, DapType::Float32), "NaN");
        assert_eq!(number_text(-32768.0, DapType::Int16), "-32768");
        let attrs: Map<String, Value> = serde_json::from_str(
            r#"{"_FillValue": -32768, "scale_factor": 0.01, "units": "K", "flags": [1, 2],
                "big": 10000000000, "nan": "NaN", "nested": {"a": 1}}"#,
        )
        .unwrap();
        let a = attributes(&attrs, Some(DapType::Int16), Version::Dap2);
        let by = |n: &str| a.iter().find(|x| x.name == n).unwrap();
        assert_eq!(by("_FillValue").ty, DapType::Int16);
        assert_eq!(by("scale_factor").ty, DapType::Float64);
        assert_eq!(by("units").values, vec!["K"]);
        assert_eq!(by("flags").ty, DapType::Int32);
        assert_eq!(by("big").ty, DapType::Float64);
        assert_eq!(by("nan").ty, DapType::String);
        assert_eq!(by("nested").values, vec![r#"{"a":1}"#]);
        let a4 = attributes(&attrs, None, Version::Dap4);
        assert_eq!(
            a4.iter().find(|x| x.name == "big").unwrap().ty,
            DapType::Int64
        );
    }

    #[test]
    fn values_on_the_wire() {
        let data = ArrayBytes::Fixed(vec![0xff, 0x01]);
        let mut out = Vec::new();
        encode_values(&DataType::Int8, DapType::Int16, &data, Wire::Xdr, &mut out).unwrap();
        assert_eq!(out, [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
        let f = ArrayBytes::Fixed(1.5f32.to_le_bytes().to_vec());
        out.clear();
        encode_values(
            &DataType::Float32,
            DapType::Float32,
            &f,
            Wire::Xdr,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, 1.5f32.to_be_bytes());
        let s = ArrayBytes::Variable(vec![b"abcde".to_vec()]);
        out.clear();
        encode_values(&DataType::String, DapType::String, &s, Wire::Xdr, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0]);
        out.clear();
        encode_values(
            &DataType::String,
            DapType::String,
            &s,
            Wire::Little,
            &mut out,
        )
        .unwrap();
        assert_eq!(&out[..8], 5u64.to_le_bytes());
    }

    #[test]
    fn hyperslabs_are_checked_against_the_shape() {
        let c = cut(
            "t",
            "time",
            10,
            &Slab {
                start: 1,
                stride: 3,
                stop: Some(9),
            },
        )
        .unwrap();
        assert_eq!((c.count, c.is_whole()), (3, false));
        assert!(cut(
            "t",
            "time",
            10,
            &Slab {
                start: 10,
                stride: 1,
                stop: None
            }
        )
        .is_err());
        assert!(cut(
            "t",
            "time",
            10,
            &Slab {
                start: 0,
                stride: 1,
                stop: Some(10)
            }
        )
        .is_err());
        assert!(cut("t", "time", 10, &Slab::ALL).unwrap().is_whole());
    }
}

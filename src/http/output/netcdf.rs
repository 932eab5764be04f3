//! NetCDF: a CF file of the selection, its coordinates (with their units
//! and calendars, so readers decode times) and its attributes, that
//! `xarray.open_dataset` and `ncdump` read. Written in the classic 64-bit
//! offset format (CDF-2), or in CDF-5 when a 64-bit integer type needs it
//! (netCDF-C reads both; no NetCDF-4/HDF5 writer is kept well enough in
//! Rust to depend on). Unsigned 8- to 32-bit types are stored signed with
//! `_Unsigned = "true"`, as netCDF-C and xarray read them.

use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::{Built, File};
use crate::http::error::{ApiError, ApiResult};
use crate::service::{Content, Data};
use crate::zarr::{ArrayBytes, DataType};

pub const NETCDF: File = File {
    name: "netcdf",
    content_type: "application/x-netcdf",
    expansion: 1,
    build: encode,
};

/// NetCDF external types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NcType {
    Byte = 1,
    Char = 2,
    Short = 3,
    Int = 4,
    Float = 5,
    Double = 6,
    Int64 = 10,
    UInt64 = 11,
}

impl NcType {
    fn size(self) -> usize {
        match self {
            NcType::Byte | NcType::Char => 1,
            NcType::Short => 2,
            NcType::Int | NcType::Float => 4,
            NcType::Double | NcType::Int64 | NcType::UInt64 => 8,
        }
    }
}

/// How a dtype is stored: its type, whether it is unsigned, and whether
/// elements are converted first (half floats to float).
fn nc_type(dtype: &DataType) -> Option<(NcType, bool)> {
    Some(match dtype {
        DataType::Bool | DataType::Int8 => (NcType::Byte, false),
        DataType::UInt8 => (NcType::Byte, true),
        DataType::Int16 => (NcType::Short, false),
        DataType::UInt16 => (NcType::Short, true),
        DataType::Int32 => (NcType::Int, false),
        DataType::UInt32 => (NcType::Int, true),
        DataType::Int64 => (NcType::Int64, false),
        DataType::UInt64 => (NcType::UInt64, false),
        DataType::Float32 => (NcType::Float, false),
        DataType::Float64 => (NcType::Double, false),
        _ => return None,
    })
}

/// An attribute's values.
enum AttrValue {
    Text(String),
    Numbers(NcType, Vec<f64>),
}

struct Variable {
    name: String,
    dims: Vec<usize>,
    nc: NcType,
    attrs: Vec<(String, AttrValue)>,
    /// Big-endian values.
    data: Vec<u8>,
}

/// A netCDF name: letters, digits and `_.@+-`, not starting with a digit
/// or punctuation.
fn nc_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.@+-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

/// Attributes from JSON: text as text, numbers as doubles (or ints when
/// whole and in range), lists of numbers alike; the missing-value family
/// in the variable's own type, as netCDF requires.
fn attributes(attrs: &Map<String, Value>, own: NcType) -> Vec<(String, AttrValue)> {
    let mut out = Vec::new();
    for (k, v) in attrs {
        let typed = matches!(
            k.as_str(),
            "_FillValue" | "missing_value" | "valid_min" | "valid_max" | "valid_range"
        );
        let numbers: Option<Vec<f64>> = match v {
            Value::Array(list) => list.iter().map(crate::zarr::cf::attr_number).collect(),
            Value::String(_) if typed => crate::zarr::cf::attr_number(v).map(|x| vec![x]),
            Value::Number(_) | Value::Bool(_) => crate::zarr::cf::attr_number(v).map(|x| vec![x]),
            _ => None,
        };
        let value = match (v, numbers) {
            (_, Some(nums)) if typed => AttrValue::Numbers(own, nums),
            (_, Some(nums)) => {
                let ints = nums
                    .iter()
                    .all(|x| x.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(x));
                let whole = match v {
                    Value::Array(l) => l.iter().all(|x| x.is_i64() || x.is_u64()),
                    other => other.is_i64() || other.is_u64(),
                };
                AttrValue::Numbers(
                    if ints && whole {
                        NcType::Int
                    } else {
                        NcType::Double
                    },
                    nums,
                )
            }
            (Value::String(s), None) => AttrValue::Text(s.clone()),
            (Value::Null, None) => continue,
            (other, None) => AttrValue::Text(other.to_string()),
        };
        out.push((nc_name(k), value));
    }
    out
}

/// One number as big-endian bytes of `nc`.
fn put_number(out: &mut Vec<u8>, nc: NcType, x: f64) {
    match nc {
        NcType::Byte | NcType::Char => out.push(x as i64 as u8),
        NcType::Short => out.extend((x as i64 as i16).to_be_bytes()),
        NcType::Int => out.extend((x as i64 as i32).to_be_bytes()),
        NcType::Float => out.extend((x as f32).to_be_bytes()),
        NcType::Double => out.extend(x.to_be_bytes()),
        NcType::Int64 => out.extend((x as i64).to_be_bytes()),
        NcType::UInt64 => out.extend((x as u64).to_be_bytes()),
    }
}

/// The header and data of a file, CDF-2 or CDF-5 (`wide`).
struct Writer {
    wide: bool,
    out: Vec<u8>,
}

impl Writer {
    fn non_neg(&mut self, n: u64) {
        if self.wide {
            self.out.extend(n.to_be_bytes());
        } else {
            self.out.extend((n as u32).to_be_bytes());
        }
    }
    fn tag(&mut self, tag: u32) {
        self.out.extend(tag.to_be_bytes());
    }
    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }
    fn name(&mut self, name: &str) {
        self.non_neg(name.len() as u64);
        self.out.extend(name.as_bytes());
        self.pad();
    }
    fn attrs(&mut self, attrs: &[(String, AttrValue)]) {
        if attrs.is_empty() {
            self.tag(0);
            self.non_neg(0);
            return;
        }
        self.tag(0x0C);
        self.non_neg(attrs.len() as u64);
        for (name, value) in attrs {
            self.name(name);
            match value {
                AttrValue::Text(t) => {
                    self.tag(NcType::Char as u32);
                    self.non_neg(t.len() as u64);
                    self.out.extend(t.as_bytes());
                }
                AttrValue::Numbers(nc, nums) => {
                    self.tag(*nc as u32);
                    self.non_neg(nums.len() as u64);
                    for &x in nums {
                        put_number(&mut self.out, *nc, x);
                    }
                }
            }
            self.pad();
        }
    }
}

fn file(dims: &[(String, u64)], globals: &[(String, AttrValue)], vars: &[Variable]) -> Vec<u8> {
    let wide = vars
        .iter()
        .any(|v| matches!(v.nc, NcType::Int64 | NcType::UInt64));
    let header = |begins: &[u64]| -> Vec<u8> {
        let mut w = Writer {
            wide,
            out: Vec::new(),
        };
        w.out.extend(b"CDF");
        w.out.push(if wide { 5 } else { 2 });
        w.non_neg(0);
        if dims.is_empty() {
            w.tag(0);
            w.non_neg(0);
        } else {
            w.tag(0x0A);
            w.non_neg(dims.len() as u64);
            for (name, len) in dims {
                w.name(name);
                w.non_neg(*len);
            }
        }
        w.attrs(globals);
        if vars.is_empty() {
            w.tag(0);
            w.non_neg(0);
        } else {
            w.tag(0x0B);
            w.non_neg(vars.len() as u64);
            for (v, begin) in vars.iter().zip(begins) {
                w.name(&v.name);
                w.non_neg(v.dims.len() as u64);
                for &d in &v.dims {
                    w.non_neg(d as u64);
                }
                w.attrs(&v.attrs);
                w.tag(v.nc as u32);
                let vsize = (v.data.len() as u64).next_multiple_of(4);
                // A classic vsize past 32 bits is written as 2^32 - 1;
                // readers compute it from the shape.
                w.non_neg(if wide {
                    vsize
                } else {
                    vsize.min(u32::MAX as u64)
                });
                w.out.extend(begin.to_be_bytes());
            }
        }
        w.out
    };
    let size = header(&vec![0; vars.len()]).len() as u64;
    let mut begins = Vec::with_capacity(vars.len());
    let mut at = size;
    for v in vars {
        begins.push(at);
        at += (v.data.len() as u64).next_multiple_of(4);
    }
    let mut out = header(&begins);
    out.reserve((at - size) as usize);
    for v in vars {
        out.extend(&v.data);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    }
    out
}

fn encode(data: Data) -> ApiResult<Built> {
    let Content::Whole(ArrayBytes::Fixed(bytes)) = &data.content else {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "NetCDF carries fixed-size numbers; use format=json",
        ));
    };
    let Some((nc, unsigned)) = nc_type(&data.dtype) else {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            format!(
                "NetCDF carries numbers; {} values cannot be written (use format=npy)",
                data.dtype.name()
            ),
        ));
    };
    let n = data.shape.len();
    let named = data.axes.len() == n;
    let var_name = nc_name(if data.name.is_empty() {
        "data"
    } else {
        &data.name
    });
    // Names that sanitize alike are told apart: a file's dimensions are unique.
    let mut dim_names: Vec<String> = Vec::with_capacity(n);
    for d in 0..n {
        let base = if named {
            nc_name(&data.axes[d].name)
        } else {
            format!("dim_{d}")
        };
        let mut name = base.clone();
        let mut k = 1;
        while dim_names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        dim_names.push(name);
    }
    let dims: Vec<(String, u64)> = dim_names.iter().cloned().zip(data.shape.clone()).collect();
    let mut vars = Vec::new();
    if named {
        for (d, axis) in data.axes.iter().enumerate() {
            let Some(c) = &axis.coordinate else { continue };
            if dim_names[d] == var_name {
                continue;
            }
            vars.push(coordinate(&dim_names[d], d, c));
        }
    }
    let mut attrs = attributes(&data.attributes, nc);
    if unsigned {
        attrs.push(("_Unsigned".into(), AttrValue::Text("true".into())));
    }
    let size = data.dtype.size().unwrap_or(1).max(1);
    let mut values = Vec::with_capacity(bytes.len());
    for element in bytes.chunks_exact(size) {
        values.extend(element.iter().rev());
    }
    vars.push(Variable {
        name: var_name.clone(),
        dims: (0..n).collect(),
        nc,
        attrs,
        data: values,
    });
    let globals = vec![("Conventions".to_string(), AttrValue::Text("CF-1.8".into()))];
    let out = file(&dims, &globals, &vars);
    Ok(Built {
        bytes: out,
        filename: Some(format!("{var_name}.nc")),
    })
}

/// A coordinate's variable along dimension `d`: its values unpacked
/// already, so without their packing attributes.
fn coordinate(name: &str, d: usize, c: &crate::service::AxisValues) -> Variable {
    let nc = if c.single {
        NcType::Float
    } else {
        NcType::Double
    };
    let mut attrs = c.attributes.clone();
    for packed in ["scale_factor", "add_offset", "_FillValue", "missing_value"] {
        attrs.remove(packed);
    }
    let mut data = Vec::with_capacity(c.values.len() * nc.size());
    for &x in &c.values {
        put_number(&mut data, nc, x);
    }
    Variable {
        name: name.to_string(),
        dims: vec![d],
        nc,
        attrs: attributes(&attrs, nc),
        data,
    }
}

/// A variable of decoded numbers for [`numbers_file`]: NaN where missing,
/// written as float (`single`) or double, its dimensions named by `axes`.
pub struct Numbers<'a> {
    pub name: &'a str,
    pub axes: &'a [crate::service::Axis],
    pub shape: &'a [u64],
    pub values: &'a [f64],
    pub attributes: &'a Map<String, Value>,
    pub single: bool,
}

/// A CF file of several variables of decoded numbers (EDR's answers):
/// dimensions shared by name, each coordinate written once.
pub fn numbers_file(vars: &[Numbers], globals: &Map<String, Value>) -> Vec<u8> {
    let mut dims: Vec<(String, u64)> = Vec::new();
    let mut out_vars: Vec<Variable> = Vec::new();
    let dim_of = |name: &str, len: u64, dims: &mut Vec<(String, u64)>| -> usize {
        let name = nc_name(name);
        match dims.iter().position(|(n, l)| *n == name && *l == len) {
            Some(i) => i,
            None => {
                let mut unique = name.clone();
                let mut k = 1;
                while dims.iter().any(|(n, _)| *n == unique) {
                    unique = format!("{name}_{k}");
                    k += 1;
                }
                dims.push((unique, len));
                dims.len() - 1
            }
        }
    };
    for v in vars {
        let ids: Vec<usize> = v
            .axes
            .iter()
            .zip(v.shape)
            .map(|(a, &n)| dim_of(&a.name, n, &mut dims))
            .collect();
        for (a, &d) in v.axes.iter().zip(&ids) {
            let Some(c) = &a.coordinate else { continue };
            if out_vars.iter().any(|o| o.name == dims[d].0) {
                continue;
            }
            out_vars.push(coordinate(&dims[d].0, d, c));
        }
        let nc = if v.single {
            NcType::Float
        } else {
            NcType::Double
        };
        let mut attrs = v.attributes.clone();
        for packed in [
            "scale_factor",
            "add_offset",
            "_FillValue",
            "missing_value",
            "valid_range",
            "valid_min",
            "valid_max",
        ] {
            attrs.remove(packed);
        }
        attrs.insert("_FillValue".into(), Value::String("NaN".into()));
        let mut data = Vec::with_capacity(v.values.len() * nc.size());
        for &x in v.values {
            put_number(&mut data, nc, x);
        }
        out_vars.push(Variable {
            name: nc_name(v.name),
            dims: ids,
            nc,
            attrs: attributes(&attrs, nc),
            data,
        });
    }
    let mut global_attrs = attributes(globals, NcType::Double);
    if !globals.contains_key("Conventions") {
        global_attrs.push(("Conventions".to_string(), AttrValue::Text("CF-1.8".into())));
    }
    file(&dims, &global_attrs, &out_vars)
}

//! DAP2: the DDS (structure), the DAS (attributes), the XDR encoding of
//! `.dods` and the `.ascii` text, as libdap writes them and netCDF-C and
//! pydap read them.

use std::fmt::Write;

use super::{attributes, encode_values, www_name, DapType, Dataset, Item, Piece, Version, Wire};
use crate::zarr::{ArrayBytes, DataType};

/// The DDS of `items`.
pub fn dds(name: &str, items: &[Item]) -> String {
    let mut s = String::from("Dataset {\n");
    for item in items {
        match item {
            Item::Array(p) => declare(&mut s, p, 4),
            Item::Grid { array, maps } => {
                s.push_str("    Grid {\n      ARRAY:\n");
                declare(&mut s, array, 8);
                s.push_str("      MAPS:\n");
                for m in maps {
                    declare(&mut s, m, 8);
                }
                let _ = writeln!(s, "    }} {};", www_name(&array.var.name));
            }
            Item::Structure { name, members } => {
                s.push_str("    Structure {\n");
                for m in members {
                    declare(&mut s, m, 8);
                }
                let _ = writeln!(s, "    }} {};", www_name(name));
            }
        }
    }
    let _ = writeln!(s, "}} {};", www_name(name));
    s
}

fn declare(s: &mut String, p: &Piece, indent: usize) {
    let _ = write!(
        s,
        "{:indent$}{} {}",
        "",
        p.ty.name(Version::Dap2),
        www_name(&p.var.name)
    );
    for c in &p.cuts {
        let _ = write!(s, "[{} = {}]", www_name(&c.dim), c.count);
    }
    s.push_str(";\n");
}

/// The DAS of the whole dataset; what it cannot carry is named in
/// `DODS_EXTRA`.
pub fn das(dataset: &Dataset) -> String {
    let mut s = String::from("Attributes {\n");
    for (v, ty) in &dataset.vars {
        let _ = writeln!(s, "    {} {{", www_name(&v.name));
        container(&mut s, &v.attributes, Some(*ty));
        // netCDF-C reads a DAP2 Byte as a signed byte unless told.
        if *ty == DapType::Byte && !v.attributes.contains_key("_Unsigned") {
            s.push_str("        String _Unsigned \"true\";\n");
        }
        s.push_str("    }\n");
    }
    s.push_str("    NC_GLOBAL {\n");
    container(&mut s, &dataset.attributes, None);
    s.push_str("    }\n");
    if !dataset.left_out.is_empty() {
        s.push_str("    DODS_EXTRA {\n        String left_out ");
        let notes: Vec<String> = dataset
            .left_out
            .iter()
            .map(|(n, why)| quoted(&format!("{n}: {why}")))
            .collect();
        s.push_str(&notes.join(", "));
        s.push_str(";\n    }\n");
    }
    s.push_str("}\n");
    s
}

fn container(
    s: &mut String,
    attrs: &serde_json::Map<String, serde_json::Value>,
    own: Option<DapType>,
) {
    for a in attributes(attrs, own, Version::Dap2) {
        let values: Vec<String> = match a.ty {
            DapType::String => a.values.iter().map(|v| quoted(v)).collect(),
            _ => a.values.clone(),
        };
        let _ = writeln!(
            s,
            "        {} {} {};",
            a.ty.name(Version::Dap2),
            www_name(&a.name),
            values.join(", ")
        );
    }
}

fn quoted(v: &str) -> String {
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

/// One piece's values as `.dods` sends them: an array's length (twice,
/// but once for strings), its elements, padding; a scalar's element alone.
pub fn xdr(piece: &Piece, dtype: &DataType, data: &ArrayBytes) -> Result<Vec<u8>, String> {
    let n = piece.count();
    let n32 = u32::try_from(n).map_err(|_| {
        format!(
            "'{}' has {n} elements here, more than DAP2 can count: ask for a hyperslab",
            piece.var.name
        )
    })?;
    let mut out = Vec::with_capacity(8 + (n * piece.ty.wire_size(Wire::Xdr)) as usize);
    if !piece.cuts.is_empty() {
        out.extend_from_slice(&n32.to_be_bytes());
        if piece.ty != DapType::String {
            out.extend_from_slice(&n32.to_be_bytes());
        }
    }
    if piece.ty == DapType::Byte && !piece.cuts.is_empty() {
        // Bytes are packed, then padded to four.
        let mut wide = Vec::new();
        encode_values(dtype, DapType::Byte, data, Wire::Xdr, &mut wide)?;
        out.extend(wide.chunks_exact(4).map(|w| w[3]));
        out.resize(out.len() + (4 - n as usize % 4) % 4, 0);
    } else {
        encode_values(dtype, piece.ty, data, Wire::Xdr, &mut out)?;
    }
    Ok(out)
}

/// One piece's values as `.ascii` writes them: a line per row of the
/// last dimension, led by the name and the indices of the row.
pub fn ascii(
    prefix: &str,
    piece: &Piece,
    dtype: &DataType,
    data: &ArrayBytes,
) -> Result<String, String> {
    let values: Vec<String> = match piece.ty {
        DapType::String => super::strings(dtype, data)?
            .iter()
            .map(|s| quoted(&String::from_utf8_lossy(s)))
            .collect(),
        _ => {
            let ArrayBytes::Fixed(bytes) = data else {
                return Err("no numbers".into());
            };
            let mut numbers = Vec::new();
            crate::zarr::cf::numbers(dtype, bytes, &mut numbers)
                .ok_or_else(|| format!("{} holds no numbers", dtype.name()))?;
            numbers
                .iter()
                .map(|&v| super::number_text(v, piece.ty))
                .collect()
        }
    };
    let shape = piece.shape();
    let name = format!("{prefix}{}", piece.var.name);
    let mut s = String::new();
    if shape.len() <= 1 {
        let _ = writeln!(s, "{name}, {}", values.join(", "));
        return Ok(s);
    }
    let row = *shape.last().unwrap_or(&1) as usize;
    let outer = &shape[..shape.len() - 1];
    for (r, chunk) in values.chunks(row.max(1)).enumerate() {
        let mut index = Vec::with_capacity(outer.len());
        let mut rest = r as u64;
        for &len in outer.iter().rev() {
            index.push(rest % len.max(1));
            rest /= len.max(1);
        }
        let idx: String = index.iter().rev().map(|i| format!("[{i}]")).collect();
        let _ = writeln!(s, "{name}{idx}, {}", chunk.join(", "));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{Described, Variable};
    use crate::store::StoreKey;

    fn var(name: &str, dtype: DataType, shape: Vec<u64>) -> Variable {
        Variable {
            name: name.into(),
            path: StoreKey::new(name).unwrap(),
            dimensions: (0..shape.len()).map(|i| format!("d{i}")).collect(),
            shape,
            dtype,
            attributes: serde_json::Map::new(),
        }
    }

    #[test]
    fn the_das_says_what_dap2_cannot_carry_and_that_bytes_are_unsigned() {
        let described = Described {
            name: "g".into(),
            attributes: serde_json::Map::new(),
            variables: vec![
                var("u8", DataType::UInt8, vec![4]),
                var("i64", DataType::Int64, vec![4]),
                var("huge", DataType::Float32, vec![1 << 40]),
            ],
            left_out: Vec::new(),
        };
        let dataset = Dataset::new(described, Version::Dap2);
        let das = das(&dataset);
        assert!(
            das.contains("    u8 {\n        String _Unsigned \"true\";"),
            "{das}"
        );
        assert!(das.contains("i64: int64 is 64-bit"), "{das}");
        assert!(
            das.contains("huge: a dimension of 1099511627776 elements"),
            "{das}"
        );
        let dds = dds(&dataset.name, &dataset.plan(&[]).unwrap());
        assert!(!dds.contains("huge") && !dds.contains("i64"), "{dds}");
    }
}

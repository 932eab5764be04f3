//! DAP4: the DMR (the dataset as XML) and the chunked `.dap` data
//! response (the DMR, then each variable's little-endian values with its
//! CRC-32), as the DAP 4.0 specification writes them and netCDF-C and
//! pydap read them.

use std::fmt::Write;

use super::{attributes, encode_values, DapType, Dataset, Piece, Version, Wire};
use crate::http::output::xml::escape;
use crate::zarr::{ArrayBytes, DataType};

/// Chunk flags: the last chunk, an error chunk, little-endian data.
pub const END: u8 = 0x01;
pub const ERROR: u8 = 0x02;
pub const LITTLE_ENDIAN: u8 = 0x04;

/// The longest chunk (its length is 24 bits).
const MAX_CHUNK: usize = (1 << 24) - 1;

/// The DMR of `pieces` (every variable, whole, for `.dmr`).
pub fn dmr(dataset: &Dataset, pieces: &[&Piece]) -> String {
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<Dataset xmlns=\"http://xml.opendap.org/ns/DAP/4.0#\" dapVersion=\"4.0\" dmrVersion=\"1.0\" name=\"{}\">",
        escape(&dataset.name)
    );
    // Shared dimensions: those some piece sends whole.
    let mut shared: Vec<(&str, u64)> = Vec::new();
    for p in pieces {
        for c in p.cuts.iter().filter(|c| c.is_whole()) {
            if !shared.iter().any(|(d, _)| *d == c.dim) {
                shared.push((&c.dim, c.len));
            }
        }
    }
    for (d, n) in &shared {
        let _ = writeln!(s, "    <Dimension name=\"{}\" size=\"{n}\"/>", escape(d));
    }
    for p in pieces {
        let ty = p.ty.name(Version::Dap4);
        let _ = writeln!(s, "    <{ty} name=\"{}\">", escape(&p.var.name));
        for c in &p.cuts {
            match c.is_whole() {
                true => {
                    let _ = writeln!(s, "        <Dim name=\"/{}\"/>", escape(&c.dim));
                }
                false => {
                    let _ = writeln!(s, "        <Dim size=\"{}\"/>", c.count);
                }
            }
        }
        attributes_xml(&mut s, &p.var.attributes, Some(p.ty), 8);
        if !p.var.is_coordinate() {
            for c in p.cuts.iter().filter(|c| c.is_whole()) {
                let mapped = pieces
                    .iter()
                    .any(|m| m.var.name == c.dim && m.var.is_coordinate() && m.cuts[0].is_whole());
                if mapped {
                    let _ = writeln!(s, "        <Map name=\"/{}\"/>", escape(&c.dim));
                }
            }
        }
        let _ = writeln!(s, "    </{ty}>");
    }
    attributes_xml(&mut s, &dataset.attributes, None, 4);
    for (name, why) in &dataset.left_out {
        let note = format!("{name} is left out: {why}").replace("--", "- -");
        let _ = writeln!(s, "    <!-- {} -->", escape(&note));
    }
    s.push_str("</Dataset>\n");
    s
}

fn attributes_xml(
    s: &mut String,
    attrs: &serde_json::Map<String, serde_json::Value>,
    own: Option<DapType>,
    indent: usize,
) {
    for a in attributes(attrs, own, Version::Dap4) {
        let _ = writeln!(
            s,
            "{:indent$}<Attribute name=\"{}\" type=\"{}\">",
            "",
            escape(&a.name),
            a.ty.name(Version::Dap4)
        );
        for v in &a.values {
            let _ = writeln!(s, "{:indent$}    <Value>{}</Value>", "", escape(v));
        }
        let _ = writeln!(s, "{:indent$}</Attribute>", "");
    }
}

/// `payload` as chunks with `flags`, appended to `out`.
pub fn chunks(flags: u8, payload: &[u8], out: &mut Vec<u8>) {
    for part in payload.chunks(MAX_CHUNK) {
        let header = (u32::from(flags) << 24) | part.len() as u32;
        out.extend_from_slice(&header.to_be_bytes());
        out.extend_from_slice(part);
    }
}

/// The first chunk of `.dap`: the DMR and its CRLF.
pub fn head(dmr: &str) -> Vec<u8> {
    let mut payload = dmr.as_bytes().to_vec();
    payload.extend_from_slice(b"\r\n");
    let mut out = Vec::with_capacity(payload.len() + 4);
    chunks(LITTLE_ENDIAN, &payload, &mut out);
    out
}

/// The chunks of one variable's values, with their CRC-32 when asked.
pub fn values(
    piece: &Piece,
    dtype: &DataType,
    data: &ArrayBytes,
    checksum: bool,
) -> Result<Vec<u8>, String> {
    let mut payload =
        Vec::with_capacity((piece.count() * piece.ty.wire_size(Wire::Little)) as usize);
    encode_values(dtype, piece.ty, data, Wire::Little, &mut payload)?;
    if checksum {
        let crc = crc32fast::hash(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
    }
    let mut out = Vec::with_capacity(payload.len() + 4 * (1 + payload.len() / MAX_CHUNK));
    chunks(LITTLE_ENDIAN, &payload, &mut out);
    Ok(out)
}

/// The last chunk: empty, flagged as the end.
pub fn end() -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(u32::from(END | LITTLE_ENDIAN) << 24).to_be_bytes());
    out
}

/// A DAP4 error document.
pub fn error(status: u16, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error httpcode=\"{status}\">\n    <Message>{}</Message>\n</Error>\n",
        escape(message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_carry_their_flags_and_length() {
        let mut out = Vec::new();
        chunks(LITTLE_ENDIAN, b"abc", &mut out);
        assert_eq!(out, [0x04, 0, 0, 3, b'a', b'b', b'c']);
        assert_eq!(end(), [0x05, 0, 0, 0]);
        let h = head("<Dataset/>");
        assert!(h.ends_with(b"<Dataset/>\r\n"));
        assert_eq!(h[3] as usize, "<Dataset/>\r\n".len());
    }
}

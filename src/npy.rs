//! The `.npy` format: headers for responses and parsing for request bodies.
//! Version 1.0 is written when the header fits, else 2.0 (3.0 for non-ASCII
//! field names), as numpy does.

/// Errors in an `.npy` body.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("not an .npy file: {0}")]
    Invalid(String),
}

/// The header (magic, version, dict, padding) for an array of `shape` with dtype `descr`.
pub fn header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let shape = match shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}");
    let utf8 = !dict.is_ascii();
    for (version, len_bytes) in [(1u8, 2usize), (2, 4)] {
        if utf8 && version == 1 {
            continue;
        }
        let unpadded = 6 + 2 + len_bytes + dict.len() + 1;
        let total = unpadded.div_ceil(64) * 64;
        let header_len = total - 6 - 2 - len_bytes;
        if len_bytes == 2 && header_len > u16::MAX as usize {
            continue;
        }
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(b"\x93NUMPY");
        out.push(if utf8 { 3 } else { version });
        out.push(0);
        if len_bytes == 2 {
            out.extend_from_slice(&(header_len as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(header_len as u32).to_le_bytes());
        }
        out.extend_from_slice(dict.as_bytes());
        out.resize(total - 1, b' ');
        out.push(b'\n');
        return out;
    }
    // Version 2.0 holds headers up to 4 GiB; no data type zarrd accepts gets near.
    Vec::new()
}

/// A parsed `.npy` header.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    /// The `descr` value as written (a typestr, or a field list literal).
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<u64>,
    /// Offset of the data.
    pub data_offset: usize,
}

/// Parse an `.npy` header.
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, NpyError> {
    let bad = |m: &str| NpyError::Invalid(m.to_string());
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing the \\x93NUMPY magic"));
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(NpyError::Invalid(format!("unsupported version {v}"))),
    };
    let dict = bytes
        .get(start..start.saturating_add(len))
        .ok_or_else(|| bad("header is longer than the body"))?;
    let dict = std::str::from_utf8(dict).map_err(|_| bad("header is not UTF-8"))?;
    let descr = dict_value(dict, "descr").ok_or_else(|| bad("header has no 'descr'"))?;
    let fortran =
        dict_value(dict, "fortran_order").ok_or_else(|| bad("header has no 'fortran_order'"))?;
    let shape = dict_value(dict, "shape").ok_or_else(|| bad("header has no 'shape'"))?;
    let shape = shape
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| bad("shape is not a tuple of integers"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NpyHeader {
        descr: descr.trim().to_string(),
        fortran_order: fortran.trim() == "True",
        shape,
        data_offset: start + len,
    })
}

/// The raw text of `'key': value` in a Python dict literal (values may nest brackets).
fn dict_value<'a>(dict: &'a str, key: &str) -> Option<&'a str> {
    let at = dict.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = dict[at..].trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0i32;
    let mut in_str: Option<char> = None;
    for (i, c) in rest.char_indices() {
        match (in_str, c) {
            (Some(q), c) if c == q => in_str = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => in_str = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') if depth > 0 => depth -= 1,
            (None, ',' | '}') if depth == 0 => return Some(&rest[..i]),
            _ => {}
        }
    }
    None
}

/// A simple descr (`'<f4'`) without quotes; `None` for structured descrs.
pub fn simple_typestr(descr: &str) -> Option<&str> {
    let d = descr.trim();
    d.strip_prefix('\'')
        .and_then(|d| d.strip_suffix('\''))
        .or_else(|| d.strip_prefix('"').and_then(|d| d.strip_suffix('"')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = header("'<f4'", &[3, 4]);
        assert_eq!(h.len() % 64, 0);
        let parsed = parse_header(&h).unwrap();
        assert_eq!(
            parsed,
            NpyHeader {
                descr: "'<f4'".into(),
                fortran_order: false,
                shape: vec![3, 4],
                data_offset: h.len()
            }
        );
        assert_eq!(
            parse_header(&header("'|b1'", &[])).unwrap().shape,
            Vec::<u64>::new()
        );
        assert_eq!(parse_header(&header("'<i8'", &[7])).unwrap().shape, vec![7]);
        let s = parse_header(&header("[('a', '<i4'), ('b', '<f8', (2,))]", &[2])).unwrap();
        assert_eq!(s.descr, "[('a', '<i4'), ('b', '<f8', (2,))]");
        assert_eq!(simple_typestr("'<f4'"), Some("<f4"));
        assert!(parse_header(b"not numpy at all").is_err());
        assert!(parse_header(b"\x93NUMPY\x01\x00\xff\xff{").is_err());
    }
}

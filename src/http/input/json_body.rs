//! JSON data bodies, `{"data": ...}`, read element by element into the
//! array's bytes. Building the document first held about 75 times the
//! body in memory (a value, a reference and a small vector per element):
//! a 64 MiB body took 3.8 GB before its shape was even compared with the
//! selection's. Here each level of nesting is walked as raw text, and each
//! element is parsed alone and appended, so what is held is the elements'
//! bytes.

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use axum::http::StatusCode;
use base64::Engine;

use crate::http::error::{ApiError, ApiResult};
use crate::service::Incoming;
use crate::zarr::fill::parse_fill;
use crate::zarr::{ArrayBytes, DataType};

fn unprocessable(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "bad_data", message)
}

fn not_json(e: serde_json::Error) -> ApiError {
    unprocessable(format!("the body is not JSON: {e}"))
}

/// The elements of `{"data": ...}` in C order, and their shape, for an
/// array of `dtype` with `ndim` dimensions.
pub(super) fn parse(body: &[u8], dtype: &DataType, ndim: usize) -> ApiResult<Incoming> {
    let text = std::str::from_utf8(body)
        .map_err(|e| unprocessable(format!("the body is not JSON: not UTF-8 ({e})")))?;
    let no_data = || unprocessable("a JSON body must be an object with a \"data\" member".into());
    let data = match serde_json::from_str::<Body>(text) {
        Ok(Body(Some(data))) => data,
        Ok(Body(None)) => return Err(no_data()),
        // JSON, but not an object.
        Err(_)
            if !text.trim_start().starts_with('{')
                && serde_json::from_str::<IgnoredAny>(text).is_ok() =>
        {
            return Err(no_data())
        }
        Err(e) => return Err(not_json(e)),
    };
    let mut reader = Reader {
        dtype,
        ndim,
        fixed: Vec::new(),
        variable: Vec::new(),
        lengths: Vec::new(),
        leaf_depth: None,
        deepest_list: None,
        failed: None,
    };
    reader.value(data, 0)?;
    let depth = reader.leaf_depth.unwrap_or(reader.lengths.len());
    let shape: Vec<u64> = reader.lengths[..depth.min(reader.lengths.len())]
        .iter()
        .map(|n| n.unwrap_or(0))
        .collect();
    let data = if dtype.is_variable() {
        ArrayBytes::Variable(reader.variable)
    } else {
        ArrayBytes::Fixed(reader.fixed)
    };
    Ok(Incoming {
        data,
        shape: Some(shape),
    })
}

/// The body's `data` member, as text, left unparsed.
struct Body<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> de::Deserialize<'de> for Body<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Body<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object with a \"data\" member")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Body<'de>, M::Error> {
                let mut data = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "data" {
                        if data.is_some() {
                            return Err(de::Error::duplicate_field("data"));
                        }
                        data = Some(map.next_value::<&'de RawValue>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Body(data))
            }
        }
        d.deserialize_map(Members)
    }
}

struct Reader<'a> {
    dtype: &'a DataType,
    /// The array's dimensions: data nested deeper than one past them is
    /// refused as it is met (each level is read again from its text, so
    /// nesting bounds the work as well as the shape).
    ndim: usize,
    fixed: Vec<u8>,
    variable: Vec<Vec<u8>>,
    /// The length of the lists at each depth, from the first one ended there.
    lengths: Vec<Option<u64>>,
    /// The depth of the elements, from the first one read.
    leaf_depth: Option<usize>,
    /// The deepest depth a list has started at.
    deepest_list: Option<usize>,
    /// Why reading stopped, when an element could not be read.
    failed: Option<ApiError>,
}

impl Reader<'_> {
    fn ragged(&self) -> ApiError {
        unprocessable("the nested lists of \"data\" are ragged".into())
    }

    /// One value at `depth`: an element, or a list of values one deeper.
    fn value(&mut self, raw: &RawValue, depth: usize) -> ApiResult<()> {
        if self.is_list(raw)? {
            return self.list(raw, depth);
        }
        let value: Value = serde_json::from_str(raw.get()).map_err(not_json)?;
        self.element(&value, depth)
    }

    /// Whether `raw` is a level of nesting rather than one element (which
    /// a pair `[re, im]` or a list of byte values is).
    fn is_list(&self, raw: &RawValue) -> ApiResult<bool> {
        let text = raw.get();
        if !text.starts_with('[') {
            return Ok(false);
        }
        let first = text[1..].trim_start();
        let first_is_list = first.starts_with('[');
        match self.dtype {
            // A list of byte values (numbers; none is an empty value) is one
            // element; a list of anything else is a level.
            DataType::RawBytes(_) | DataType::FixedBytes(_) | DataType::Bytes => {
                Ok(!first.starts_with(|c: char| c == ']' || c == '-' || c.is_ascii_digit()))
            }
            // So is `[re, im]`: two scalars, which is short.
            DataType::Complex64 | DataType::Complex128 => {
                if first_is_list || text.len() > 1 << 12 {
                    return Ok(true);
                }
                let value: Value = serde_json::from_str(text).map_err(not_json)?;
                Ok(!is_leaf(&value, self.dtype))
            }
            _ => Ok(true),
        }
    }

    fn list(&mut self, raw: &RawValue, depth: usize) -> ApiResult<()> {
        if self.leaf_depth.is_some_and(|leaf| depth >= leaf) {
            return Err(self.ragged());
        }
        if depth > self.ndim {
            return Err(unprocessable(format!(
                "the nested lists of \"data\" are deeper than the array's {} dimensions",
                self.ndim
            )));
        }
        self.deepest_list = Some(self.deepest_list.map_or(depth, |d| d.max(depth)));
        let mut de = serde_json::Deserializer::from_str(raw.get());
        let read = de::Deserializer::deserialize_seq(
            &mut de,
            Items {
                reader: self,
                depth,
            },
        );
        let length = match read {
            Ok(n) => n,
            Err(e) => return Err(self.failed.take().unwrap_or_else(|| not_json(e))),
        };
        if self.lengths.len() <= depth {
            self.lengths.resize(depth + 1, None);
        }
        match self.lengths[depth] {
            None => self.lengths[depth] = Some(length),
            Some(n) if n == length => {}
            Some(_) => return Err(self.ragged()),
        }
        Ok(())
    }

    fn element(&mut self, value: &Value, depth: usize) -> ApiResult<()> {
        match self.leaf_depth {
            None if self.deepest_list.is_some_and(|d| d >= depth) => return Err(self.ragged()),
            None => self.leaf_depth = Some(depth),
            Some(leaf) if leaf != depth => return Err(self.ragged()),
            Some(_) => {}
        }
        let bytes = element_from_json(self.dtype, value)?;
        if self.dtype.is_variable() {
            self.variable.push(bytes);
        } else {
            self.fixed.extend_from_slice(&bytes);
        }
        Ok(())
    }
}

/// The items of one list, each read as it comes; the count is the value.
struct Items<'r, 'a> {
    reader: &'r mut Reader<'a>,
    depth: usize,
}

impl<'de> Visitor<'de> for Items<'_, '_> {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<u64, S::Error> {
        let mut n = 0u64;
        while let Some(item) = seq.next_element::<&RawValue>()? {
            if let Err(e) = self.reader.value(item, self.depth + 1) {
                self.reader.failed = Some(e);
                return Err(de::Error::custom("an element could not be read"));
            }
            n += 1;
        }
        Ok(n)
    }
}

/// Whether a JSON value is one element (not a level of nesting) of `dtype`.
fn is_leaf(v: &Value, dtype: &DataType) -> bool {
    match v {
        Value::Array(items) => match dtype {
            // [re, im] and byte lists are single elements.
            DataType::Complex64 | DataType::Complex128 => {
                items.len() == 2 && items.iter().all(|x| !x.is_array())
            }
            DataType::RawBytes(_) | DataType::FixedBytes(_) | DataType::Bytes => {
                items.iter().all(Value::is_number)
            }
            _ => false,
        },
        _ => true,
    }
}

fn collect_leaves<'a>(v: &'a Value, depth: usize, out: &mut Vec<&'a Value>) {
    match (depth, v) {
        (0, _) => out.push(v),
        (_, Value::Array(items)) => items.iter().for_each(|i| collect_leaves(i, depth - 1, out)),
        // A scalar where a list was expected: leave the count short so the caller reports raggedness.
        _ => {}
    }
}

/// One element from JSON: what the JSON output writes (numbers, "NaN", strings,
/// base64, [re, im], objects for records) reads back.
pub fn element_from_json(dtype: &DataType, v: &Value) -> ApiResult<Vec<u8>> {
    let bad = |e: String| unprocessable(format!("value {v}: {e}"));
    // Fill values may be null or, in v2, a boolean for any type; an
    // element of data is spelled as the JSON output writes it.
    let refused = match v {
        Value::Null => Some("null"),
        Value::Bool(_) if *dtype != DataType::Bool => Some("a boolean"),
        _ => None,
    };
    if let Some(what) = refused {
        return Err(bad(format!("{what} is not a {} element", dtype.name())));
    }
    match (dtype, v) {
        (DataType::Structured(fields), Value::Object(obj)) => {
            if let Some(extra) = obj.keys().find(|k| !fields.iter().any(|f| &f.name == *k)) {
                return Err(bad(format!("the record type has no field '{extra}'")));
            }
            let mut record = vec![0u8; dtype.size().unwrap_or(0)];
            for f in fields {
                let value = obj
                    .get(&f.name)
                    .ok_or_else(|| bad(format!("missing field '{}'", f.name)))?;
                let bytes = if f.shape.is_empty() {
                    element_from_json(&f.dtype, value)?
                } else {
                    let mut leaves = Vec::new();
                    collect_leaves(value, f.shape.len(), &mut leaves);
                    leaves
                        .iter()
                        .map(|l| element_from_json(&f.dtype, l))
                        .collect::<ApiResult<Vec<_>>>()?
                        .concat()
                };
                if bytes.len() != f.size() {
                    return Err(bad(format!("field '{}' has the wrong size", f.name)));
                }
                record[f.offset..f.offset + f.size()].copy_from_slice(&bytes);
            }
            Ok(record)
        }
        (DataType::FixedBytes(n), Value::String(s)) => {
            let mut b = s.as_bytes().to_vec();
            if b.len() > *n {
                return Err(bad(format!("longer than {n} bytes")));
            }
            b.resize(*n, 0);
            Ok(b)
        }
        (DataType::Bytes, Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| bad(format!("not base64: {e}"))),
        _ => Ok(parse_fill(dtype, v).map_err(|e| bad(e.to_string()))?.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str, dtype: &DataType) -> Result<(Vec<u64>, ArrayBytes), String> {
        parse(body.as_bytes(), dtype, 3)
            .map(|i| (i.shape.unwrap(), i.data))
            .map_err(|e| e.message)
    }

    fn fixed(data: ArrayBytes) -> Vec<u8> {
        match data {
            ArrayBytes::Fixed(b) => b,
            ArrayBytes::Variable(_) => panic!("variable"),
        }
    }

    #[test]
    fn shapes_come_from_the_nesting() {
        let i8 = DataType::Int8;
        for (body, shape, bytes) in [
            (r#"{"data": 7}"#, vec![], vec![7u8]),
            (r#"{"data": []}"#, vec![0], vec![]),
            (r#"{"data": [[], []]}"#, vec![2, 0], vec![]),
            (
                r#"{"x": [1], "data": [[1, 2], [3, 4], [5, 6]]}"#,
                vec![3, 2],
                vec![1, 2, 3, 4, 5, 6],
            ),
            (r#"{"data": [[[1], [2]]]}"#, vec![1, 2, 1], vec![1, 2]),
        ] {
            let (got, data) = read(body, &i8).unwrap();
            assert_eq!((got, fixed(data)), (shape, bytes), "{body}");
        }
    }

    #[test]
    fn ragged_and_malformed_bodies_say_so() {
        let i8 = DataType::Int8;
        for (body, says) in [
            (r#"{"data": [[1, 2], [3]]}"#, "ragged"),
            (r#"{"data": [[1, 2], 3]}"#, "ragged"),
            (r#"{"data": [3, [1, 2]]}"#, "ragged"),
            (r#"{"data": [[], [1]]}"#, "ragged"),
            (r#"{"data": [1, 2"#, "not JSON"),
            (r#"[1, 2]"#, "\"data\" member"),
            (r#"{"other": 1}"#, "\"data\" member"),
            (r#"{"data": 1, "data": 2}"#, "duplicate"),
            (r#"{"data": [1, 300]}"#, "300"),
            (
                r#"{"data": [[[[[1]]]]]}"#,
                "deeper than the array's 3 dimensions",
            ),
        ] {
            let e = read(body, &i8).unwrap_err();
            assert!(e.contains(says), "{body}: {e}");
        }
    }

    #[test]
    fn pairs_and_byte_lists_are_elements() {
        let c8 = DataType::Complex64;
        let (shape, data) = read(r#"{"data": [[1, 2], [3, 4]]}"#, &c8).unwrap();
        assert_eq!(shape, vec![2]);
        assert_eq!(fixed(data).len(), 16);
        let (shape, _) = read(r#"{"data": [1, 2]}"#, &c8).unwrap();
        assert_eq!(shape, Vec::<u64>::new(), "a lone pair is one element");
        let (shape, _) = read(r#"{"data": [1, 2, 3]}"#, &c8).unwrap();
        assert_eq!(shape, vec![3]);
        let s2 = DataType::FixedBytes(2);
        let (shape, data) = read(r#"{"data": [[104, 105], "ok"]}"#, &s2).unwrap();
        assert_eq!((shape, fixed(data)), (vec![2], b"hiok".to_vec()));
        let (shape, data) = read(r#"{"data": ["ok", [104, 105], []]}"#, &s2).unwrap();
        assert_eq!((shape, fixed(data)), (vec![3], b"okhi\0\0".to_vec()));
        let (shape, data) = read(r#"{"data": [104, 105]}"#, &s2).unwrap();
        assert_eq!((shape, fixed(data)), (vec![], b"hi".to_vec()));
    }
}

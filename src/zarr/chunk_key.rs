//! Chunk key encodings: how chunk grid coordinates become store keys.

use serde_json::{json, Value};

use super::error::{Result, ZarrError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkKeyEncoding {
    /// v3 `default`: `c/1/2` (or `c.1.2`), `c` for 0-d arrays.
    Default { separator: char },
    /// v2 and v3 `v2`: `1.2` (or `1/2`), `0` for 0-d arrays.
    V2 { separator: char },
}

fn separator(config: Option<&Value>, default: char) -> Result<char> {
    match config.and_then(|c| c.get("separator")) {
        None => Ok(default),
        Some(Value::String(s)) if s == "/" => Ok('/'),
        Some(Value::String(s)) if s == "." => Ok('.'),
        Some(other) => Err(ZarrError::metadata(
            "chunk_key_encoding",
            format!("separator {other} is not \"/\" or \".\""),
        )),
    }
}

impl ChunkKeyEncoding {
    pub fn from_v3(value: &Value) -> Result<Self> {
        let (name, config) = match value {
            Value::String(s) => (s.as_str(), None),
            Value::Object(o) => (
                o.get("name").and_then(Value::as_str).unwrap_or(""),
                o.get("configuration"),
            ),
            _ => ("", None),
        };
        match name {
            "default" => Ok(ChunkKeyEncoding::Default {
                separator: separator(config, '/')?,
            }),
            "v2" => Ok(ChunkKeyEncoding::V2 {
                separator: separator(config, '.')?,
            }),
            _ => Err(ZarrError::metadata(
                "chunk_key_encoding",
                format!("{value} is not default or v2"),
            )),
        }
    }

    pub fn to_v3(&self) -> Value {
        match self {
            ChunkKeyEncoding::Default { separator } => {
                json!({"name": "default", "configuration": {"separator": separator.to_string()}})
            }
            ChunkKeyEncoding::V2 { separator } => {
                json!({"name": "v2", "configuration": {"separator": separator.to_string()}})
            }
        }
    }

    pub fn separator(&self) -> char {
        match self {
            ChunkKeyEncoding::Default { separator } | ChunkKeyEncoding::V2 { separator } => {
                *separator
            }
        }
    }

    /// The key of chunk `coords`, relative to the array.
    pub fn encode(&self, coords: &[u64]) -> String {
        let sep = self.separator().to_string();
        let joined = coords
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(&sep);
        match self {
            ChunkKeyEncoding::Default { .. } if coords.is_empty() => "c".to_string(),
            ChunkKeyEncoding::Default { .. } => format!("c{sep}{joined}"),
            ChunkKeyEncoding::V2 { .. } if coords.is_empty() => "0".to_string(),
            ChunkKeyEncoding::V2 { .. } => joined,
        }
    }

    /// Chunk coordinates from a key relative to the array, if it is a chunk key.
    pub fn decode(&self, key: &str, ndim: usize) -> Option<Vec<u64>> {
        let sep = self.separator();
        let body = match self {
            ChunkKeyEncoding::Default { .. } if ndim == 0 => return (key == "c").then(Vec::new),
            ChunkKeyEncoding::Default { .. } => key.strip_prefix('c')?.strip_prefix(sep)?,
            ChunkKeyEncoding::V2 { .. } if ndim == 0 => return (key == "0").then(Vec::new),
            ChunkKeyEncoding::V2 { .. } => key,
        };
        let coords: Vec<u64> = body
            .split(sep)
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        (coords.len() == ndim).then_some(coords)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_decodes() {
        let d = ChunkKeyEncoding::Default { separator: '/' };
        assert_eq!(d.encode(&[1, 2]), "c/1/2");
        assert_eq!(d.encode(&[]), "c");
        assert_eq!(d.decode("c/1/2", 2), Some(vec![1, 2]));
        assert_eq!(d.decode("c/1", 2), None);
        let v2 = ChunkKeyEncoding::V2 { separator: '.' };
        assert_eq!(v2.encode(&[3, 0]), "3.0");
        assert_eq!(v2.encode(&[]), "0");
        assert_eq!(v2.decode(".zarray", 1), None);
        assert_eq!(
            ChunkKeyEncoding::Default { separator: '.' }.encode(&[4]),
            "c.4"
        );
    }
}

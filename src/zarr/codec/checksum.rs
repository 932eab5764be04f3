//! 32-bit checksum codecs: v3 `crc32c` and numcodecs' crc32, crc32c,
//! adler32, fletcher32 and jenkins_lookup3, each with the checksum where
//! its writer puts it.

use serde_json::{json, Value};

use super::{v3_entry, BytesToBytesCodec};
use crate::zarr::error::{Result, ZarrError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Crc32,
    Crc32c,
    Adler32,
    Fletcher32,
    /// Bob Jenkins' lookup3 (`hashlittle`), as HDF5 and numcodecs compute
    /// it, seeded with `initval`.
    Lookup3 {
        initval: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Start,
    End,
}

#[derive(Debug, Clone)]
pub struct Checksum {
    pub algorithm: Algorithm,
    pub location: Location,
    /// Name in v3 metadata (`crc32c` or `numcodecs.*`).
    pub v3_name: &'static str,
    /// Bytes hashed before the data (numcodecs' lookup3 `prefix`).
    pub prefix: Vec<u8>,
}

impl Checksum {
    /// numcodecs' codec with its default location, or the one configured.
    pub fn numcodecs(
        algorithm: Algorithm,
        config: Option<&Value>,
        v3_name: &'static str,
    ) -> Result<Self> {
        let default = match algorithm {
            Algorithm::Crc32 | Algorithm::Adler32 => Location::Start,
            Algorithm::Crc32c | Algorithm::Fletcher32 | Algorithm::Lookup3 { .. } => Location::End,
        };
        let location = match config
            .and_then(|c| c.get("location"))
            .and_then(Value::as_str)
        {
            None => default,
            Some("start")
                if matches!(
                    algorithm,
                    Algorithm::Crc32 | Algorithm::Crc32c | Algorithm::Adler32
                ) =>
            {
                Location::Start
            }
            Some("end") => Location::End,
            Some(other) => {
                return Err(ZarrError::codec(
                    v3_name,
                    format!("location '{other}' is not supported"),
                ))
            }
        };
        Ok(Checksum {
            algorithm,
            location,
            v3_name,
            prefix: Vec::new(),
        })
    }

    /// numcodecs' `jenkins_lookup3`: `initval` seeds the hash, and
    /// `prefix` (bytes, or absent) is hashed before the data.
    pub fn lookup3(config: Option<&Value>, v3_name: &'static str) -> Result<Self> {
        let err = |r: &str| ZarrError::codec(v3_name, r);
        let initval = match config.and_then(|c| c.get("initval")) {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| err("initval must be an integer from 0 to 2^32 - 1"))?,
        };
        let prefix = match config.and_then(|c| c.get("prefix")) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(bytes)) => bytes
                .iter()
                .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| err("prefix must be a list of bytes (0 to 255)"))?,
            Some(_) => return Err(err("prefix must be a list of bytes or null")),
        };
        Ok(Checksum {
            algorithm: Algorithm::Lookup3 { initval },
            location: Location::End,
            v3_name,
            prefix,
        })
    }

    /// The v3 core `crc32c` codec.
    pub fn crc32c() -> Self {
        Checksum {
            algorithm: Algorithm::Crc32c,
            location: Location::End,
            v3_name: "crc32c",
            prefix: Vec::new(),
        }
    }

    fn compute(&self, data: &[u8]) -> u32 {
        match self.algorithm {
            Algorithm::Crc32 => crc32fast::hash(data),
            Algorithm::Crc32c => crc32c::crc32c(data),
            Algorithm::Adler32 => adler32(data),
            Algorithm::Fletcher32 => fletcher32(data),
            Algorithm::Lookup3 { initval } if self.prefix.is_empty() => lookup3(data, initval),
            Algorithm::Lookup3 { initval } => {
                lookup3(&[self.prefix.as_slice(), data].concat(), initval)
            }
        }
    }
}

/// Bob Jenkins' lookup3 `hashlittle` of bytes (HDF5's
/// `H5_checksum_lookup3`): 12 bytes at a time as three little-endian
/// words, the last (zero-padded) part mixed in by `final` unless empty.
fn lookup3(data: &[u8], initval: u32) -> u32 {
    let rot = |x: u32, k: u32| x.rotate_left(k);
    let init = 0xdead_beef_u32
        .wrapping_add(data.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let word = |w: &[u8]| {
        let mut four = [0u8; 4];
        four[..w.len()].copy_from_slice(w);
        u32::from_le_bytes(four)
    };
    let mut rest = data;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        // mix(a, b, c)
        a = a.wrapping_sub(c);
        a ^= rot(c, 4);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= rot(a, 6);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= rot(b, 8);
        b = b.wrapping_add(a);
        a = a.wrapping_sub(c);
        a ^= rot(c, 16);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= rot(a, 19);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= rot(b, 4);
        b = b.wrapping_add(a);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return c;
    }
    let mut tail = [0u8; 12];
    tail[..rest.len()].copy_from_slice(rest);
    a = a.wrapping_add(word(&tail[0..4]));
    b = b.wrapping_add(word(&tail[4..8]));
    c = c.wrapping_add(word(&tail[8..12]));
    // final(a, b, c)
    c ^= b;
    c = c.wrapping_sub(rot(b, 14));
    a ^= c;
    a = a.wrapping_sub(rot(c, 11));
    b ^= a;
    b = b.wrapping_sub(rot(a, 25));
    c ^= b;
    c = c.wrapping_sub(rot(b, 16));
    a ^= c;
    a = a.wrapping_sub(rot(c, 4));
    b ^= a;
    b = b.wrapping_sub(rot(a, 14));
    c ^= b;
    c.wrapping_sub(rot(b, 24))
}

fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before b overflows u32.
    for block in data.chunks(5552) {
        for &byte in block {
            a += byte as u32;
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// HDF5's Fletcher-32 (big-endian 16-bit words), as numcodecs computes it.
fn fletcher32(data: &[u8]) -> u32 {
    let (mut sum1, mut sum2) = (0u32, 0u32);
    let words = data.chunks_exact(2);
    let tail = words.remainder();
    let words: Vec<u32> = words.map(|w| ((w[0] as u32) << 8) | w[1] as u32).collect();
    for block in words.chunks(360) {
        for &w in block {
            sum1 += w;
            sum2 += sum1;
        }
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    if let [last] = tail {
        sum1 += (*last as u32) << 8;
        sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    (sum2 << 16) | sum1
}

impl BytesToBytesCodec for Checksum {
    fn encode(&self, mut bytes: Vec<u8>) -> Result<Vec<u8>> {
        let sum = self.compute(&bytes).to_le_bytes();
        match self.location {
            Location::End => {
                bytes.extend_from_slice(&sum);
                Ok(bytes)
            }
            Location::Start => {
                let mut out = Vec::with_capacity(bytes.len() + 4);
                out.extend_from_slice(&sum);
                out.extend_from_slice(&bytes);
                Ok(out)
            }
        }
    }

    fn decode(&self, mut bytes: Vec<u8>) -> Result<Vec<u8>> {
        if bytes.len() < 4 {
            return Err(ZarrError::codec(
                self.v3_name,
                "shorter than its 4-byte checksum",
            ));
        }
        let (stored, payload) = match self.location {
            Location::End => {
                let at = bytes.len() - 4;
                let stored: [u8; 4] = bytes[at..].try_into().unwrap_or_default();
                bytes.truncate(at);
                (stored, bytes)
            }
            Location::Start => {
                let stored: [u8; 4] = bytes[..4].try_into().unwrap_or_default();
                bytes.drain(..4);
                (stored, bytes)
            }
        };
        let computed = self.compute(&payload);
        if computed != u32::from_le_bytes(stored) {
            return Err(ZarrError::codec(
                self.v3_name,
                format!(
                    "checksum mismatch: stored {:#010x}, computed {computed:#010x}",
                    u32::from_le_bytes(stored)
                ),
            ));
        }
        Ok(payload)
    }

    fn fixed_overhead(&self) -> Option<usize> {
        Some(4)
    }

    fn to_v3(&self) -> Value {
        if self.v3_name == "crc32c" {
            return json!({"name": "crc32c"});
        }
        // numcodecs' Fletcher32 takes no arguments; the others take a location.
        if self.algorithm == Algorithm::Fletcher32 {
            return v3_entry(self.v3_name, json!({}));
        }
        if let Algorithm::Lookup3 { initval } = self.algorithm {
            let prefix = (!self.prefix.is_empty()).then(|| self.prefix.clone());
            return v3_entry(self.v3_name, json!({"initval": initval, "prefix": prefix}));
        }
        let location = if self.location == Location::Start {
            "start"
        } else {
            "end"
        };
        v3_entry(self.v3_name, json!({"location": location}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // zlib.adler32(b"Wikipedia") == 0x11E60398
        assert_eq!(adler32(b"Wikipedia"), 0x11E60398);
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE3069283);
        assert_eq!(fletcher32(b""), 0);
        // Bob Jenkins' own test values for hashlittle.
        assert_eq!(lookup3(b"", 0), 0xdeadbeef);
        assert_eq!(lookup3(b"Four score and seven years ago", 0), 0x17770551);
        assert_eq!(lookup3(b"Four score and seven years ago", 1), 0xcd628161);
    }

    #[test]
    fn detects_corruption() {
        let codec = Checksum::crc32c();
        let mut enc = codec.encode(b"hello".to_vec()).unwrap();
        assert_eq!(codec.decode(enc.clone()).unwrap(), b"hello");
        enc[0] ^= 1;
        assert!(codec
            .decode(enc)
            .unwrap_err()
            .to_string()
            .contains("mismatch"));
    }
}

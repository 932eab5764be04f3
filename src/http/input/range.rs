//! `Range: bytes=...` parsing and resolution against a value's length (RFC 9110 §14).

use std::ops::Range;

/// One range as requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// `a-b` (inclusive).
    FromTo(u64, u64),
    /// `a-`.
    From(u64),
    /// `-n`: the last n bytes.
    Suffix(u64),
}

/// Parse a `Range` header. `None` when it is not a valid bytes range set, in
/// which case the header is ignored (RFC 9110 §14.2).
pub fn parse(header: &str) -> Option<Vec<ByteRange>> {
    // The unit is case-insensitive (RFC 9110 §14.1).
    let header = header.trim();
    let spec = header
        .get(..6)
        .filter(|unit| unit.eq_ignore_ascii_case("bytes="))
        .map(|_| &header[6..])?;
    let mut out = Vec::new();
    for part in spec.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (a, b) = part.split_once('-')?;
        let (a, b) = (a.trim(), b.trim());
        let num = |s: &str| -> Option<u64> {
            if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // Past u64: as far as any value reaches.
            Some(s.parse().unwrap_or(u64::MAX))
        };
        out.push(match (a.is_empty(), b.is_empty()) {
            (true, false) => ByteRange::Suffix(num(b)?),
            (false, true) => ByteRange::From(num(a)?),
            (false, false) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    return None;
                }
                ByteRange::FromTo(a, b)
            }
            (true, true) => return None,
        });
    }
    (!out.is_empty()).then_some(out)
}

impl ByteRange {
    /// The half-open byte range this selects in a value of `len` bytes;
    /// `None` when it is unsatisfiable.
    pub fn resolve(self, len: u64) -> Option<Range<u64>> {
        match self {
            ByteRange::FromTo(a, _) | ByteRange::From(a) if a >= len => None,
            ByteRange::FromTo(a, b) => Some(a..b.saturating_add(1).min(len)),
            ByteRange::From(a) => Some(a..len),
            ByteRange::Suffix(0) => None,
            ByteRange::Suffix(_) if len == 0 => None,
            ByteRange::Suffix(n) => Some(len.saturating_sub(n)..len),
        }
    }
}

/// Resolve ranges against the value's length, sorted, with overlapping and
/// adjacent ones merged: the parts never hold a byte twice, so the answer
/// is never larger than the value (plus part headers).
pub fn coalesce(ranges: &[ByteRange], size: u64) -> Vec<std::ops::Range<u64>> {
    let mut resolved: Vec<std::ops::Range<u64>> =
        ranges.iter().filter_map(|r| r.resolve(size)).collect();
    resolved.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<u64>> = Vec::with_capacity(resolved.len());
    for r in resolved {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc_forms() {
        assert_eq!(parse("bytes=0-99"), Some(vec![ByteRange::FromTo(0, 99)]));
        assert_eq!(parse("bytes=100-"), Some(vec![ByteRange::From(100)]));
        assert_eq!(parse("bytes=-5"), Some(vec![ByteRange::Suffix(5)]));
        assert_eq!(parse("bytes=0-0, -1").unwrap().len(), 2);
        assert_eq!(parse("Bytes=3-5"), Some(vec![ByteRange::FromTo(3, 5)]));
        assert_eq!(
            parse("bytes=0-99999999999999999999999"),
            Some(vec![ByteRange::FromTo(0, u64::MAX)])
        );
        for bad in [
            "bytes=5-1",
            "bytes=",
            "bytes=-",
            "items=0-1",
            "bytes=a-b",
            "bytes=1-2-3",
            "bytes=+1-2",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn resolves_against_length() {
        assert_eq!(ByteRange::FromTo(0, 99).resolve(10), Some(0..10));
        assert_eq!(ByteRange::FromTo(10, 20).resolve(10), None);
        assert_eq!(ByteRange::Suffix(100).resolve(10), Some(0..10));
        assert_eq!(ByteRange::Suffix(0).resolve(10), None);
        assert_eq!(ByteRange::From(9).resolve(10), Some(9..10));
        assert_eq!(ByteRange::Suffix(1).resolve(0), None);
    }
}

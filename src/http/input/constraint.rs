//! OPeNDAP constraint expressions: DAP2's `?a[0:2:10],b.b[3]` and
//! DAP4's `dap4.ce=/a[0:2:10];/b[]`, as projections of variables (or a
//! member of a DAP2 grid) with a hyperslab per dimension. Selections
//! (`&a>3`), functions and DAP4 filters are refused by name, never ignored:
//! an answer that dropped them would look right and be wrong.

/// `[start:stride:stop]`, the stop inclusive; `stop: None` to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slab {
    pub start: u64,
    pub stride: u64,
    pub stop: Option<u64>,
}

impl Slab {
    pub const ALL: Slab = Slab {
        start: 0,
        stride: 1,
        stop: None,
    };
}

/// One projected variable, or one member of a DAP2 grid (`temp.lat`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    pub name: String,
    pub member: Option<String>,
    /// Empty: the whole variable.
    pub slabs: Vec<Slab>,
}

/// The projections of a DAP2 query string (percent-encoded, as sent).
pub fn dap2(query: &str) -> Result<Vec<Projection>, String> {
    let decoded = percent_encoding::percent_decode_str(query)
        .decode_utf8()
        .map_err(|_| "the constraint is not UTF-8".to_string())?;
    let mut clauses = decoded.split('&');
    let projections = clauses.next().unwrap_or("");
    if let Some(selection) = clauses.find(|c| !c.trim().is_empty()) {
        return Err(format!(
            "selection clauses ('&{selection}') are not supported: project variables and hyperslabs only"
        ));
    }
    split(projections, ',')
        .map(|p| projection(p, '.'))
        .collect()
}

/// The projections of DAP4's `dap4.ce` (already form-decoded).
pub fn dap4(ce: &str) -> Result<Vec<Projection>, String> {
    split(ce, ';')
        .map(|p| {
            if p.contains('|') {
                return Err(format!(
                    "filters ('{p}') are not supported: project variables and hyperslabs only"
                ));
            }
            if p.contains('=') {
                return Err(format!(
                    "dimension constraints ('{p}') are not supported: give the hyperslab on each variable"
                ));
            }
            projection(p.strip_prefix('/').unwrap_or(p), '\u{0}')
        })
        .collect()
}

/// The non-empty parts of `s` split at `sep` outside brackets.
fn split(s: &str, sep: char) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if c == sep && depth == 0 => {
                parts.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[from..]);
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty())
}

/// `name[..][..]`, or `grid.member[..]` where `member_sep` is `.`.
fn projection(text: &str, member_sep: char) -> Result<Projection, String> {
    if text.contains('(') {
        return Err(format!(
            "server functions ('{text}') are not supported: project variables and hyperslabs only"
        ));
    }
    let mut names = Vec::new();
    let mut slabs = Vec::new();
    let mut rest = text;
    loop {
        let end = rest.find(['[', member_sep]).unwrap_or(rest.len());
        let name = rest[..end].trim().trim_matches('"');
        if name.is_empty() {
            return Err(format!("'{text}' names no variable"));
        }
        if !slabs.is_empty() {
            return Err(format!(
                "'{text}': a hyperslab goes after the last name (on the grid's array or map)"
            ));
        }
        // Names are escaped as a DDS writes them (`with%20space`), and the
        // URL escapes them once more: decoded again, as libdap's www2id.
        let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
        names.push(name.into_owned());
        rest = &rest[end..];
        while let Some(inner) = rest.strip_prefix('[') {
            let close = inner
                .find(']')
                .ok_or_else(|| format!("'{text}': a '[' is not closed"))?;
            slabs.push(slab(&inner[..close]).map_err(|e| format!("'{text}': {e}"))?);
            rest = &inner[close + 1..];
        }
        match rest.chars().next() {
            None => break,
            Some(c) if c == member_sep => rest = &rest[c.len_utf8()..],
            Some(c) => return Err(format!("'{text}': unexpected '{c}'")),
        }
    }
    let (name, member) = match names.len() {
        1 => (names.remove(0), None),
        2 => {
            let member = names.pop();
            (names.remove(0), member)
        }
        _ => return Err(format!("'{text}': at most a grid and one of its members")),
    };
    Ok(Projection {
        name,
        member,
        slabs,
    })
}

/// `` (all), `i`, `start:stop`, `start:stride:stop`, a stop left out for
/// the end.
fn slab(text: &str) -> Result<Slab, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Slab::ALL);
    }
    let number = |s: &str| -> Result<u64, String> {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("'{s}' in '[{text}]' is not an index (a whole number from 0)"))
    };
    let stop = |s: &str| -> Result<Option<u64>, String> {
        if s.trim().is_empty() {
            Ok(None)
        } else {
            number(s).map(Some)
        }
    };
    let parts: Vec<&str> = text.split(':').collect();
    let slab = match parts.as_slice() {
        [i] => {
            let i = number(i)?;
            Slab {
                start: i,
                stride: 1,
                stop: Some(i),
            }
        }
        [a, b] => Slab {
            start: number(a)?,
            stride: 1,
            stop: stop(b)?,
        },
        [a, s, b] => Slab {
            start: number(a)?,
            stride: number(s)?,
            stop: stop(b)?,
        },
        _ => return Err(format!("'[{text}]' is not [start:stride:stop]")),
    };
    if slab.stride == 0 {
        return Err(format!("the stride of '[{text}]' is 0"));
    }
    if slab.stop.is_some_and(|stop| stop < slab.start) {
        return Err(format!("'[{text}]' stops before it starts"));
    }
    Ok(slab)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(start: u64, stride: u64, stop: u64) -> Slab {
        Slab {
            start,
            stride,
            stop: Some(stop),
        }
    }

    #[test]
    fn dap2_projections_with_hyperslabs_and_grid_members() {
        let p = dap2("temp%5B0:2:10%5D%5B3%5D,lat,temp.lon[1:4]").unwrap();
        assert_eq!(p[0].name, "temp");
        assert_eq!(p[0].slabs, vec![s(0, 2, 10), s(3, 1, 3)]);
        assert_eq!((p[1].name.as_str(), p[1].slabs.len()), ("lat", 0));
        assert_eq!(p[2].member.as_deref(), Some("lon"));
        assert_eq!(p[2].slabs, vec![s(1, 1, 4)]);
        assert!(dap2("").unwrap().is_empty());
    }

    #[test]
    fn dap4_projections() {
        let p = dap4("/temp[0:1:3][];/lat;lon[2:]").unwrap();
        assert_eq!(p[0].slabs, vec![s(0, 1, 3), Slab::ALL]);
        assert_eq!(p[1].name, "lat");
        assert_eq!(
            p[2].slabs,
            vec![Slab {
                start: 2,
                stride: 1,
                stop: None
            }]
        );
    }

    #[test]
    fn what_is_not_supported_is_refused_by_name() {
        for (bad, says) in [
            ("temp&temp>3", "selection"),
            ("temp[0:0:3]", "stride"),
            ("temp[5:2]", "stops before"),
            ("temp[a]", "not an index"),
            ("temp[1", "not closed"),
            ("f(temp)", "functions"),
            ("a.b.c", "at most"),
            ("temp[1].x", "after the last name"),
        ] {
            let e = dap2(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(dap4("/temp|temp>3").unwrap_err().contains("filters"));
        assert!(dap4("/time=[0:3]").unwrap_err().contains("dimension"));
    }
}

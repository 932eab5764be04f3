//! kerchunk's JSON reference sets, version 0 (a flat object of keys) and
//! version 1 (`refs` with `templates` and `gen`), read into one map of
//! [`Ref`]s. The layout is fsspec's `ReferenceFileSystem` spec; what kerchunk,
//! VirtualiZarr and hand-written sets put in it is what is accepted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;

use super::Ref;

/// Why a reference set cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

fn malformed(message: impl Into<String>) -> Malformed {
    Malformed(message.into())
}

/// At most this many references come out of the `gen` entries of a set,
/// and their keys and URLs at most this many bytes: a few hundred bytes of
/// `gen` must not cost the server gigabytes (sets that large are written in
/// the Parquet layout, which is read as needed).
const MAX_GENERATED: u64 = 2_000_000;
const MAX_GENERATED_BYTES: u64 = 256 << 20;

/// What the `gen` entries of one set have made so far.
#[derive(Default)]
struct Budget {
    count: u64,
    bytes: u64,
}

/// Every reference of a JSON set, by key.
pub fn parse(text: &[u8]) -> Result<BTreeMap<String, Ref>, Malformed> {
    let doc: Value = serde_json::from_slice(text)
        .map_err(|e| malformed(format!("the reference set is not JSON: {e}")))?;
    let Value::Object(doc) = doc else {
        return Err(malformed("a reference set is a JSON object"));
    };
    let mut out = BTreeMap::new();
    match doc.get("version") {
        None => {
            // Version 0: the object is the references.
            for (key, value) in &doc {
                out.insert(key.clone(), reference(key, value, &HashMap::new())?);
            }
        }
        Some(v) if v.as_u64() == Some(1) => {
            let templates = match doc.get("templates") {
                None | Some(Value::Null) => HashMap::new(),
                Some(Value::Object(t)) => t
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => Ok((k.clone(), s.clone())),
                        other => Err(malformed(format!(
                            "template '{k}' is {other}, not a string"
                        ))),
                    })
                    .collect::<Result<_, _>>()?,
                Some(other) => {
                    return Err(malformed(format!("templates is {other}, not an object")))
                }
            };
            if let Some(refs) = doc.get("refs") {
                let Value::Object(refs) = refs else {
                    return Err(malformed("refs is not an object"));
                };
                for (key, value) in refs {
                    out.insert(key.clone(), reference(key, value, &templates)?);
                }
            }
            match doc.get("gen") {
                None | Some(Value::Null) => {}
                Some(Value::Array(gens)) => {
                    let mut budget = Budget::default();
                    for g in gens {
                        generate(g, &templates, &mut out, &mut budget)?;
                    }
                }
                Some(other) => return Err(malformed(format!("gen is {other}, not a list"))),
            }
        }
        Some(other) => {
            return Err(malformed(format!(
                "reference set version {other} is not 0 or 1"
            )))
        }
    }
    // Keys that leave the store (`..`, empty segments) would never be
    // served; refuse the set rather than list what cannot be read.
    if let Some((key, e)) = out
        .keys()
        .find_map(|k| crate::store::StoreKey::new(k).err().map(|e| (k, e)))
    {
        return Err(malformed(format!("reference '{key}': {e}")));
    }
    Ok(out)
}

/// One reference: inline text or `base64:` bytes, `[url]`, or
/// `[url, offset, length]`.
fn reference(
    key: &str,
    value: &Value,
    templates: &HashMap<String, String>,
) -> Result<Ref, Malformed> {
    let bad = |why: &str| malformed(format!("reference '{key}': {why}"));
    match value {
        Value::String(s) => match s.strip_prefix("base64:") {
            Some(b64) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map(|b| Ref::Inline(Bytes::from(b)))
                .map_err(|e| bad(&format!("bad base64: {e}"))),
            None => Ok(Ref::Inline(Bytes::from(s.clone().into_bytes()))),
        },
        // A metadata document written as JSON rather than as its text.
        Value::Object(_) => Ok(Ref::Inline(Bytes::from(value.to_string().into_bytes()))),
        Value::Array(parts) => {
            let url = match parts.first() {
                Some(Value::String(u)) => {
                    substitute(u, templates, &HashMap::new()).map_err(|e| bad(&e.0))?
                }
                _ => return Err(bad("a list reference starts with the target's URL")),
            };
            let number = |i: usize| -> Result<u64, Malformed> {
                parts[i]
                    .as_u64()
                    .ok_or_else(|| bad(&format!("{} is not a byte count", parts[i])))
            };
            match parts.len() {
                1 => Ok(Ref::Whole { url: url.into() }),
                3 => {
                    let (offset, length) = (number(1)?, number(2)?);
                    if offset.checked_add(length).is_none() {
                        return Err(bad("its offset and length run past the largest file"));
                    }
                    Ok(Ref::Range {
                        url: url.into(),
                        offset,
                        length,
                    })
                }
                n => Err(bad(&format!(
                    "a list reference has 1 or 3 items ([url] or [url, offset, length]), not {n}"
                ))),
            }
        }
        other => Err(bad(&format!("{other} is not a string or a list"))),
    }
}

/// One `gen` entry: references for every combination of its dimensions.
fn generate(
    g: &Value,
    templates: &HashMap<String, String>,
    out: &mut BTreeMap<String, Ref>,
    budget: &mut Budget,
) -> Result<(), Malformed> {
    let text = |name: &str| -> Result<String, Malformed> {
        match g.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            _ => Err(malformed(format!("a gen entry needs '{name}': {g}"))),
        }
    };
    let (key, url) = (text("key")?, text("url")?);
    let offset = g.get("offset").map(|_| text("offset")).transpose()?;
    let length = g.get("length").map(|_| text("length")).transpose()?;
    let Some(Value::Object(dims)) = g.get("dimensions") else {
        return Err(malformed(format!("a gen entry needs 'dimensions': {g}")));
    };
    let mut axes: Vec<(String, Vec<i64>)> = Vec::new();
    for (name, spec) in dims {
        let values: Vec<i64> = match spec {
            Value::Array(v) => v
                .iter()
                .map(|x| {
                    x.as_i64().ok_or_else(|| {
                        malformed(format!("gen dimension '{name}' lists {x}, not an integer"))
                    })
                })
                .collect::<Result<_, _>>()?,
            Value::Object(r) => {
                let get = |k: &str, default: i64| -> Result<i64, Malformed> {
                    r.get(k).map_or(Ok(default), |v| {
                        v.as_i64()
                            .ok_or_else(|| malformed(format!("gen dimension '{name}': {k} is {v}")))
                    })
                };
                let (start, stop, step) =
                    (get("start", 0)?, get("stop", i64::MIN)?, get("step", 1)?);
                if stop == i64::MIN || step <= 0 {
                    return Err(malformed(format!(
                        "gen dimension '{name}' needs a stop and a positive step"
                    )));
                }
                let count = (stop.saturating_sub(start)).max(0) as u64 / step as u64 + 1;
                if count > MAX_GENERATED {
                    return Err(malformed(format!("gen dimension '{name}' is too long")));
                }
                (start..stop).step_by(step as usize).collect()
            }
            other => return Err(malformed(format!("gen dimension '{name}' is {other}"))),
        };
        axes.push((name.clone(), values));
    }
    let total = axes
        .iter()
        .try_fold(1u64, |n, (_, v)| n.checked_mul(v.len() as u64))
        .filter(|&n| n <= MAX_GENERATED)
        .ok_or_else(|| {
            malformed(format!(
                "a gen entry makes more than {MAX_GENERATED} references"
            ))
        })?;
    let mut vars: HashMap<String, i64> = HashMap::new();
    for i in 0..total {
        let mut rest = i;
        for (name, values) in axes.iter().rev() {
            let n = values.len() as u64;
            vars.insert(name.clone(), values[(rest % n) as usize]);
            rest /= n;
        }
        let key = substitute(&key, templates, &vars)?;
        let url: Arc<str> = substitute(&url, templates, &vars)?.into();
        budget.count += 1;
        budget.bytes += (key.len() + url.len()) as u64;
        if budget.count > MAX_GENERATED || budget.bytes > MAX_GENERATED_BYTES {
            return Err(malformed(format!(
                "the gen entries make more than {MAX_GENERATED} references or {MAX_GENERATED_BYTES} bytes of keys and URLs; write a set this large in the Parquet layout"
            )));
        }
        let number = |t: &Option<String>| -> Result<Option<u64>, Malformed> {
            t.as_ref()
                .map(|t| {
                    substitute(t, templates, &vars)?
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| malformed(format!("gen: '{t}' is not a byte count")))
                })
                .transpose()
        };
        let r = match (number(&offset)?, number(&length)?) {
            (Some(offset), Some(length)) if offset.checked_add(length).is_some() => Ref::Range {
                url,
                offset,
                length,
            },
            (Some(_), Some(_)) => {
                return Err(malformed(format!(
                    "gen key '{key}': its offset and length run past the largest file"
                )))
            }
            (None, None) => Ref::Whole { url },
            _ => return Err(malformed("a gen entry gives offset and length together")),
        };
        out.insert(key, r);
    }
    Ok(())
}

/// `text` with every `{{ expression }}` replaced: a template's name, or
/// integer arithmetic over the gen dimensions (`+ - * / // %`, parentheses).
fn substitute(
    text: &str,
    templates: &HashMap<String, String>,
    vars: &HashMap<String, i64>,
) -> Result<String, Malformed> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| malformed(format!("'{text}' opens {{{{ without closing it")))?;
        let expr = after[..end].trim();
        match templates.get(expr) {
            Some(t) => out.push_str(t),
            None => out.push_str(
                &expr::eval(expr, vars)
                    .map_err(|e| malformed(format!("'{{{{{expr}}}}}' in '{text}': {e}")))?
                    .to_string(),
            ),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Integer expressions of `gen` templates.
mod expr {
    use std::collections::HashMap;

    pub fn eval(text: &str, vars: &HashMap<String, i64>) -> Result<i64, String> {
        let tokens = tokens(text)?;
        let mut p = Parser {
            tokens,
            at: 0,
            vars,
            depth: 0,
        };
        let v = p.sum()?;
        if p.at != p.tokens.len() {
            return Err("unexpected text after the expression".into());
        }
        Ok(v)
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Token {
        Num(i64),
        Name(String),
        Op(&'static str),
    }

    fn tokens(text: &str) -> Result<Vec<Token>, String> {
        let b = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_whitespace() {
                i += 1;
            } else if c.is_ascii_digit() {
                let start = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                out.push(Token::Num(
                    text[start..i]
                        .parse()
                        .map_err(|_| "a number is too large")?,
                ));
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push(Token::Name(text[start..i].to_string()));
            } else if text[i..].starts_with("//") {
                out.push(Token::Op("//"));
                i += 2;
            } else {
                let op = match c {
                    b'+' => "+",
                    b'-' => "-",
                    b'*' => "*",
                    b'/' => "/",
                    b'%' => "%",
                    b'(' => "(",
                    b')' => ")",
                    _ => return Err(format!("'{}' is not allowed", c as char)),
                };
                out.push(Token::Op(op));
                i += 1;
            }
        }
        Ok(out)
    }

    struct Parser<'a> {
        tokens: Vec<Token>,
        at: usize,
        vars: &'a HashMap<String, i64>,
        /// Signs and parentheses open: each is a call deeper, and a
        /// template of thousands would overflow the stack.
        depth: usize,
    }

    const MAX_DEPTH: usize = 64;

    impl Parser<'_> {
        fn peek_op(&self) -> Option<&'static str> {
            match self.tokens.get(self.at) {
                Some(Token::Op(op)) => Some(op),
                _ => None,
            }
        }

        fn sum(&mut self) -> Result<i64, String> {
            let mut v = self.product()?;
            while let Some(op @ ("+" | "-")) = self.peek_op() {
                self.at += 1;
                let r = self.product()?;
                v = if op == "+" {
                    v.checked_add(r)
                } else {
                    v.checked_sub(r)
                }
                .ok_or("overflow")?;
            }
            Ok(v)
        }

        fn product(&mut self) -> Result<i64, String> {
            let mut v = self.unary()?;
            while let Some(op @ ("*" | "/" | "//" | "%")) = self.peek_op() {
                self.at += 1;
                let r = self.unary()?;
                v = match op {
                    "*" => v.checked_mul(r),
                    "%" => v.checked_rem_euclid(r),
                    _ => v.checked_div_euclid(r),
                }
                .ok_or("overflow or division by zero")?;
            }
            Ok(v)
        }

        fn deeper<T>(
            &mut self,
            f: impl FnOnce(&mut Self) -> Result<T, String>,
        ) -> Result<T, String> {
            if self.depth >= MAX_DEPTH {
                return Err(format!(
                    "more than {MAX_DEPTH} signs and parentheses are nested"
                ));
            }
            self.depth += 1;
            let v = f(self);
            self.depth -= 1;
            v
        }

        fn unary(&mut self) -> Result<i64, String> {
            if self.peek_op() == Some("-") {
                self.at += 1;
                let v = self.deeper(Self::unary)?;
                return v.checked_neg().ok_or_else(|| "overflow".into());
            }
            self.atom()
        }

        fn atom(&mut self) -> Result<i64, String> {
            let token = self.tokens.get(self.at).cloned();
            self.at += 1;
            match token {
                Some(Token::Num(n)) => Ok(n),
                Some(Token::Name(name)) => self
                    .vars
                    .get(&name)
                    .copied()
                    .ok_or_else(|| format!("'{name}' is not a template or a gen dimension")),
                Some(Token::Op("(")) => {
                    let v = self.deeper(Self::sum)?;
                    if self.peek_op() != Some(")") {
                        return Err("a parenthesis is not closed".into());
                    }
                    self.at += 1;
                    Ok(v)
                }
                _ => Err("an expression is incomplete".into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(doc: Value) -> BTreeMap<String, Ref> {
        parse(doc.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn version_0_is_a_flat_object_of_references() {
        let refs = set(json!({
            ".zgroup": "{\"zarr_format\": 2}",
            "a/0": ["file.nc", 10, 20],
            "a/1": ["whole.bin"],
            "a/2": "base64:AAEC",
        }));
        assert_eq!(
            refs[".zgroup"],
            Ref::Inline(Bytes::from_static(b"{\"zarr_format\": 2}"))
        );
        assert_eq!(
            refs["a/0"],
            Ref::Range {
                url: "file.nc".into(),
                offset: 10,
                length: 20
            }
        );
        assert_eq!(
            refs["a/1"],
            Ref::Whole {
                url: "whole.bin".into()
            }
        );
        assert_eq!(refs["a/2"], Ref::Inline(Bytes::from_static(&[0, 1, 2])));
    }

    #[test]
    fn version_1_expands_templates_and_generators() {
        let refs = set(json!({
            "version": 1,
            "templates": {"u": "s3://bucket/data", "f": "file"},
            "refs": {"x/0": ["{{u}}/{{f}}.nc", 0, 8], ".zattrs": {"a": 1}},
            "gen": [{
                "key": "g/{{i}}.{{j}}",
                "url": "{{u}}/part{{ i }}.bin",
                "offset": "{{ (j * 100) + 4 }}",
                "length": "100",
                "dimensions": {"i": {"stop": 2}, "j": [0, 3]},
            }],
        }));
        assert_eq!(
            refs["x/0"],
            Ref::Range {
                url: "s3://bucket/data/file.nc".into(),
                offset: 0,
                length: 8
            }
        );
        assert_eq!(
            refs[".zattrs"],
            Ref::Inline(Bytes::from_static(b"{\"a\":1}"))
        );
        assert_eq!(
            refs["g/1.3"],
            Ref::Range {
                url: "s3://bucket/data/part1.bin".into(),
                offset: 304,
                length: 100
            }
        );
        assert_eq!(refs.keys().filter(|k| k.starts_with("g/")).count(), 4);
    }

    #[test]
    fn malformed_sets_say_what_is_wrong() {
        for (doc, needle) in [
            (json!([1, 2]), "JSON object"),
            (json!({"version": 2}), "version 2"),
            (json!({"a": ["f", 1]}), "1 or 3 items"),
            (json!({"a": ["f", -1, 2]}), "byte count"),
            (json!({"a": 5}), "not a string or a list"),
            (json!({"a": "base64:!!"}), "base64"),
            (json!({"version": 1, "refs": {"a": ["{{nope}}"]}}), "nope"),
            (
                json!({"version": 1, "gen": [{"key": "k{{i}}", "url": "u", "dimensions": {"i": {"stop": 100000000}}}]}),
                "too long",
            ),
            (
                json!({"version": 1, "gen": [{"key": "k{{i/0}}", "url": "u", "dimensions": {"i": [1]}}]}),
                "division",
            ),
            // Nesting that would overflow the stack of a recursive parser.
            (
                json!({"version": 1, "refs": {"a": [format!("{{{{{}1}}}}", "-".repeat(100_000))]}}),
                "nested",
            ),
            (
                json!({"version": 1, "refs": {"a": [format!("{{{{{}1}}}}", "(".repeat(100_000))]}}),
                "nested",
            ),
        ] {
            let err = parse(doc.to_string().as_bytes()).unwrap_err().0;
            assert!(err.contains(needle), "{doc}: {err}");
        }
        assert!(parse(b"{").unwrap_err().0.contains("not JSON"));
    }
}

//! The Parquet layout of reference sets that fsspec's `LazyReferenceMapper`,
//! kerchunk's `refs_to_dataframe` and VirtualiZarr write for sets too large
//! for one JSON document: `.zmetadata` holds the metadata documents and the
//! `record_size`; each array's chunk references are rows of
//! `{array}/refs.{n}.parq` (columns `path`, `offset`, `size`, `raw`), row `r`
//! of file `n` being chunk `n * record_size + r` of the array's grid in C
//! order. Files are read when a key in them is first asked for and kept in
//! a byte-bounded cache, so a set of millions of chunks costs memory only
//! for the parts in use.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde_json::Value;

use super::kerchunk::Malformed;
use super::Ref;

/// Bytes of decoded reference rows kept.
const CACHE_BYTES: u64 = 256 << 20;

/// An array of the set: its chunk grid and how its chunk keys are written.
#[derive(Debug, Clone)]
struct Grid {
    shape: Vec<u64>,
    separator: char,
}

impl Grid {
    fn chunks(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The C-order number of a chunk key (`1.0.3`), if it is one of the grid's.
    fn number(&self, name: &str) -> Option<u64> {
        let parts: Vec<&str> = if self.shape.is_empty() {
            (name == "0").then(Vec::new)?
        } else {
            name.split(self.separator).collect()
        };
        if parts.len() != self.shape.len() {
            return None;
        }
        let mut n = 0u64;
        for (p, &len) in parts.iter().zip(&self.shape) {
            // One spelling per chunk: `05` is not chunk 5.
            let canonical = !p.starts_with('+') && (p.len() == 1 || !p.starts_with('0'));
            let i: u64 = p.parse().ok().filter(|_| canonical)?;
            if i >= len {
                return None;
            }
            n = n.checked_mul(len)?.checked_add(i)?;
        }
        Some(n)
    }

    /// The chunk key of a C-order number.
    fn name(&self, mut n: u64) -> String {
        if self.shape.is_empty() {
            return "0".into();
        }
        let mut idx = vec![0u64; self.shape.len()];
        for (i, &len) in self.shape.iter().enumerate().rev() {
            idx[i] = n % len.max(1);
            n /= len.max(1);
        }
        let sep = self.separator.to_string();
        idx.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(&sep)
    }
}

/// A Parquet reference set.
pub struct ParquetSet {
    store: Arc<dyn ObjectStore>,
    /// The set's folder.
    root: Path,
    /// Metadata documents (`.zarray`, `.zattrs`, ...) by key.
    metadata: BTreeMap<String, Bytes>,
    record_size: u64,
    arrays: HashMap<String, Grid>,
    /// Rows of one file: (array, file number) to each row's reference.
    records: moka::future::Cache<(String, u64), Arc<Vec<Option<Ref>>>>,
}

impl std::fmt::Debug for ParquetSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetSet")
            .field("root", &self.root)
            .field("arrays", &self.arrays.len())
            .field("record_size", &self.record_size)
            .finish()
    }
}

fn malformed(message: impl Into<String>) -> Malformed {
    Malformed(message.into())
}

impl ParquetSet {
    /// The set in the folder `root` of `store`, from its `.zmetadata`.
    pub async fn open(store: Arc<dyn ObjectStore>, root: Path) -> Result<Self, Malformed> {
        let at = root.clone().join(".zmetadata");
        let text = match store.get(&at).await {
            Ok(got) => got.bytes().await,
            Err(e) => Err(e),
        }
        .map_err(|e| malformed(format!("its .zmetadata cannot be read: {e}")))?;
        let doc: Value = serde_json::from_slice(&text)
            .map_err(|e| malformed(format!("its .zmetadata is not JSON: {e}")))?;
        let record_size = doc
            .get("record_size")
            .and_then(Value::as_u64)
            .filter(|&n| n > 0)
            .ok_or_else(|| malformed("its .zmetadata has no positive record_size"))?;
        let Some(Value::Object(docs)) = doc.get("metadata") else {
            return Err(malformed("its .zmetadata has no metadata object"));
        };
        let mut metadata = BTreeMap::new();
        let mut arrays = HashMap::new();
        for (key, value) in docs {
            // Documents are stored as JSON, or as the text of JSON.
            let parsed = match value {
                Value::String(s) => serde_json::from_str(s).unwrap_or(Value::Null),
                other => other.clone(),
            };
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if let Some(array) = key.strip_suffix(".zarray") {
                let array = array.trim_end_matches('/').to_string();
                arrays.insert(array, grid(key, &parsed)?);
            }
            metadata.insert(key.clone(), Bytes::from(text.into_bytes()));
        }
        Ok(ParquetSet {
            store,
            root,
            metadata,
            record_size,
            arrays,
            records: moka::future::Cache::builder()
                .max_capacity(CACHE_BYTES)
                // A file found missing weighs its entry too: each costs
                // its key and bookkeeping, and weighing nothing, misses
                // were never evicted.
                .weigher(|(array, _): &(String, u64), rows: &Arc<Vec<Option<Ref>>>| {
                    u32::try_from(rows.len() * 48 + array.len() + 128).unwrap_or(u32::MAX)
                })
                .build(),
        })
    }

    /// The array a chunk key belongs to, and the chunk's number.
    fn chunk(&self, key: &str) -> Option<(&str, &Grid, u64)> {
        let (array, name) = match key.rsplit_once('/') {
            Some((a, n)) => (a, n),
            None => ("", key),
        };
        if let Some((a, g)) = self.arrays.get_key_value(array) {
            if let Some(n) = g.number(name) {
                return Some((a.as_str(), g, n));
            }
        }
        // Keys with `/` between chunk indices: the array is a prefix.
        self.arrays.iter().find_map(|(a, g)| {
            let rest = if a.is_empty() {
                key
            } else {
                key.strip_prefix(a.as_str())?.strip_prefix('/')?
            };
            (g.separator == '/').then_some(())?;
            g.number(rest).map(|n| (a.as_str(), g, n))
        })
    }

    /// The reference of one key, `None` when the set has none.
    pub async fn get(&self, key: &str) -> Result<Option<Ref>, Malformed> {
        if let Some(doc) = self.metadata.get(key) {
            return Ok(Some(Ref::Inline(doc.clone())));
        }
        let Some((array, _, n)) = self.chunk(key) else {
            return Ok(None);
        };
        let rows = self.rows(array, n / self.record_size).await?;
        Ok(rows.get((n % self.record_size) as usize).cloned().flatten())
    }

    /// Every key at or below `prefix` (a folder, `""` for all) with its reference.
    pub async fn under(&self, prefix: &str) -> Result<Vec<(String, Ref)>, Malformed> {
        let inside = |k: &str| prefix.is_empty() || k.starts_with(&format!("{prefix}/"));
        let mut out: Vec<(String, Ref)> = self
            .metadata
            .iter()
            .filter(|(k, _)| inside(k))
            .map(|(k, v)| (k.clone(), Ref::Inline(v.clone())))
            .collect();
        let mut arrays: Vec<(&String, &Grid)> = self
            .arrays
            .iter()
            .filter(|(a, _)| inside(&format!("{a}/")) || prefix.starts_with(a.as_str()))
            .collect();
        arrays.sort_by(|a, b| a.0.cmp(b.0));
        for (array, grid) in arrays {
            let files = grid.chunks().div_ceil(self.record_size);
            // The files written, not every file the grid could have: a
            // sparse array of a trillion chunks may have a handful.
            for file in self.files(array).await?.into_iter().filter(|f| *f < files) {
                let rows = self.rows(array, file).await?;
                for (r, row) in rows.iter().enumerate() {
                    let Some(row) = row else { continue };
                    let n = file * self.record_size + r as u64;
                    if n >= grid.chunks() {
                        break;
                    }
                    let name = grid.name(n);
                    let key = if array.is_empty() {
                        name
                    } else {
                        format!("{array}/{name}")
                    };
                    if inside(&key) {
                        out.push((key, row.clone()));
                    }
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The keys directly in `folder` and the folders below it. Only a
    /// folder at or inside an array needs its reference files read.
    pub async fn children(
        &self,
        folder: &str,
    ) -> Result<(Vec<(String, Ref)>, Vec<String>), Malformed> {
        let base = if folder.is_empty() {
            String::new()
        } else {
            format!("{folder}/")
        };
        let in_array = self
            .arrays
            .keys()
            .any(|a| a == folder || (!a.is_empty() && folder.starts_with(&format!("{a}/"))));
        let mut dirs = std::collections::BTreeSet::new();
        let mut keys = Vec::new();
        let entries: Vec<(String, Ref)> = if in_array {
            self.under(folder).await?
        } else {
            for a in self.arrays.keys() {
                if let Some(rest) = a.strip_prefix(base.as_str()).filter(|r| !r.is_empty()) {
                    let dir = rest.split('/').next().unwrap_or(rest);
                    dirs.insert(format!("{base}{dir}"));
                }
            }
            self.metadata
                .iter()
                .filter(|(k, _)| k.starts_with(base.as_str()))
                .map(|(k, v)| (k.clone(), Ref::Inline(v.clone())))
                .collect()
        };
        for (k, r) in entries {
            match k[base.len()..].split_once('/') {
                Some((dir, _)) => {
                    dirs.insert(format!("{base}{dir}"));
                }
                None => keys.push((k, r)),
            }
        }
        Ok((keys, dirs.into_iter().collect()))
    }

    /// The numbers of the reference files an array has, in order.
    async fn files(&self, array: &str) -> Result<Vec<u64>, Malformed> {
        let folder = self.folder(array);
        let listed = self
            .store
            .list_with_delimiter(Some(&folder))
            .await
            .map_err(|e| malformed(format!("'{folder}' cannot be listed: {e}")))?;
        let mut files: Vec<u64> = listed
            .objects
            .iter()
            .filter_map(|o| {
                let name = o.location.filename()?;
                name.strip_prefix("refs.")?
                    .strip_suffix(".parq")?
                    .parse()
                    .ok()
            })
            .collect();
        files.sort_unstable();
        Ok(files)
    }

    fn folder(&self, array: &str) -> Path {
        let mut path = self.root.clone();
        for part in array.split('/').filter(|p| !p.is_empty()) {
            path = path.join(part);
        }
        path
    }

    /// The rows of one file, read on first use.
    async fn rows(&self, array: &str, file: u64) -> Result<Arc<Vec<Option<Ref>>>, Malformed> {
        let key = (array.to_string(), file);
        let store = self.store.clone();
        let path = self.folder(array).join(format!("refs.{file}.parq"));
        self.records
            .try_get_with(key, async move {
                let bytes = match store.get(&path).await {
                    Ok(got) => got.bytes().await,
                    Err(e) => Err(e),
                };
                let bytes = match bytes {
                    Ok(b) => b,
                    // A file of only missing chunks may not be written at all.
                    Err(object_store::Error::NotFound { .. }) => return Ok(Arc::new(Vec::new())),
                    Err(e) => return Err(malformed(format!("'{path}' cannot be read: {e}"))),
                };
                let decoded = tokio::task::spawn_blocking(move || decode(bytes, &path))
                    .await
                    .map_err(|e| malformed(format!("reading references failed: {e}")))??;
                Ok(Arc::new(decoded))
            })
            .await
            .map_err(|e: Arc<Malformed>| malformed(e.0.clone()))
    }
}

/// The chunk grid of an array from its `.zarray`.
fn grid(key: &str, zarray: &Value) -> Result<Grid, Malformed> {
    let numbers = |name: &str| -> Result<Vec<u64>, Malformed> {
        zarray
            .get(name)
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_u64).collect())
            .ok_or_else(|| malformed(format!("'{key}' has no {name} list")))
    };
    let (shape, chunks) = (numbers("shape")?, numbers("chunks")?);
    if shape.len() != chunks.len() || chunks.contains(&0) {
        return Err(malformed(format!("'{key}': shape and chunks do not match")));
    }
    let separator = match zarray.get("dimension_separator").and_then(Value::as_str) {
        Some("/") => '/',
        _ => '.',
    };
    let shape: Vec<u64> = shape
        .iter()
        .zip(&chunks)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    // Chunks are numbered in one u64 (row `r` of file `n`).
    if shape
        .iter()
        .try_fold(1u64, |n, &l| n.checked_mul(l))
        .is_none()
    {
        return Err(malformed(format!(
            "'{key}': a grid of {shape:?} chunks has more chunks than can be numbered"
        )));
    }
    Ok(Grid { shape, separator })
}

/// One file's rows as references: `raw` bytes inline, a `path` with
/// `offset` and `size` a range (size 0: the whole file), neither: no chunk.
fn decode(bytes: Bytes, path: &Path) -> Result<Vec<Option<Ref>>, Malformed> {
    let bad = |e: parquet::errors::ParquetError| {
        malformed(format!("'{path}' is not a reference file: {e}"))
    };
    let reader = SerializedFileReader::new(bytes).map_err(bad)?;
    // Many rows name the same target: share one copy of its URL.
    let mut urls: HashMap<String, Arc<str>> = HashMap::new();
    let mut out = Vec::new();
    for row in reader.get_row_iter(None).map_err(bad)? {
        let row = row.map_err(bad)?;
        let (mut url, mut offset, mut size, mut raw) = (None, 0i64, 0i64, None);
        for (name, field) in row.get_column_iter() {
            match (name.as_str(), field) {
                ("path", Field::Str(s)) => url = Some(s.clone()),
                ("offset", Field::Long(n)) => offset = *n,
                ("offset", Field::Int(n)) => offset = i64::from(*n),
                ("size", Field::Long(n)) => size = *n,
                ("size", Field::Int(n)) => size = i64::from(*n),
                ("raw", Field::Bytes(b)) => raw = Some(Bytes::copy_from_slice(b.data())),
                _ => {}
            }
        }
        let r = match (raw, url) {
            (Some(raw), _) => Some(Ref::Inline(raw)),
            (None, None) => None,
            (None, Some(u)) => {
                let url = urls.entry(u.clone()).or_insert_with(|| u.into()).clone();
                if offset < 0 || size < 0 {
                    return Err(malformed(format!("'{path}' has a negative offset or size")));
                }
                // Both are below 2^63, so their sum fits in a u64.
                Some(if size == 0 {
                    Ref::Whole { url }
                } else {
                    Ref::Range {
                        url,
                        offset: offset as u64,
                        length: size as u64,
                    }
                })
            }
        };
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_keys_number_the_grid_in_c_order() {
        let g = Grid {
            shape: vec![2, 3],
            separator: '.',
        };
        assert_eq!(g.number("0.0"), Some(0));
        assert_eq!(g.number("1.2"), Some(5));
        assert_eq!(g.number("2.0"), None);
        assert_eq!(g.number("0"), None);
        assert_eq!(g.number("+1.0"), None);
        assert_eq!(g.number("01.0"), None, "one spelling per chunk");
        assert_eq!(g.number("0.00"), None);
        assert_eq!(g.name(4), "1.1");
        let scalar = Grid {
            shape: vec![],
            separator: '.',
        };
        assert_eq!(
            (scalar.number("0"), scalar.name(0).as_str()),
            (Some(0), "0")
        );
    }
}

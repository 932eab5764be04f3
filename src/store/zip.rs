//! A read-only store over a `.zip` file as zarr-python's `ZipStore` writes it,
//! served without unpacking: the central directory is read once, stored
//! (uncompressed) entries are read by byte range straight from the file, and
//! deflated entries are inflated when read.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetResult, ListResult, ObjectMeta};

use super::read_only::Reads;

use super::StoreError;

const STORED: u16 = 0;
const DEFLATED: u16 = 8;

#[derive(Debug, Clone)]
struct Entry {
    method: u16,
    compressed: u64,
    size: u64,
    data_offset: u64,
    crc: u32,
}

/// The entries of a zip file, by name.
#[derive(Debug)]
pub struct ZipStore {
    path: PathBuf,
    file: Arc<File>,
    entries: BTreeMap<String, Entry>,
    modified: DateTime<Utc>,
}

fn corrupt(path: &FsPath, why: impl Into<String>) -> StoreError {
    StoreError::BadUrl {
        url: path.display().to_string(),
        reason: format!("not a readable zip file: {}", why.into()),
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8)
        .map(|s| u64::from_le_bytes(s.try_into().unwrap_or_default()))
}

fn read_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

impl ZipStore {
    pub fn open(path: &FsPath) -> Result<ZipStore, StoreError> {
        let file = File::open(path).map_err(|e| corrupt(path, e.to_string()))?;
        let meta = file.metadata().map_err(|e| corrupt(path, e.to_string()))?;
        let len = meta.len();
        let modified: DateTime<Utc> = meta.modified().map(DateTime::from).unwrap_or_default();
        // The end-of-central-directory record is in the last 64 KiB + 22 bytes.
        let tail_len = len.min(65_557) as usize;
        let tail = read_at(&file, len - tail_len as u64, tail_len)
            .map_err(|e| corrupt(path, e.to_string()))?;
        let eocd = (0..tail_len.saturating_sub(21))
            .rev()
            .find(|&i| u32_at(&tail, i) == Some(0x0605_4b50))
            .ok_or_else(|| corrupt(path, "no end of central directory"))?;
        let mut count = u16_at(&tail, eocd + 10).unwrap_or(0) as u64;
        let mut cd_size = u32_at(&tail, eocd + 12).unwrap_or(0) as u64;
        let mut cd_offset = u32_at(&tail, eocd + 16).unwrap_or(0) as u64;
        if (count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_offset == 0xFFFF_FFFF)
            && eocd >= 20
            && u32_at(&tail, eocd - 20) == Some(0x0706_4b50)
        {
            let at = u64_at(&tail, eocd - 20 + 8).unwrap_or(0);
            let z64 = read_at(&file, at, 56).map_err(|e| corrupt(path, e.to_string()))?;
            if u32_at(&z64, 0) != Some(0x0606_4b50) {
                return Err(corrupt(path, "bad zip64 end of central directory"));
            }
            count = u64_at(&z64, 32).unwrap_or(0);
            cd_size = u64_at(&z64, 40).unwrap_or(0);
            cd_offset = u64_at(&z64, 48).unwrap_or(0);
        }
        if cd_offset.saturating_add(cd_size) > len || cd_size > 1 << 30 {
            return Err(corrupt(path, "central directory outside the file"));
        }
        let cd = read_at(&file, cd_offset, cd_size as usize)
            .map_err(|e| corrupt(path, e.to_string()))?;
        let mut entries = BTreeMap::new();
        let mut at = 0usize;
        let mut skipped = 0u64;
        for _ in 0..count {
            let bad = || corrupt(path, format!("bad central directory entry at byte {at}"));
            if u32_at(&cd, at) != Some(0x0201_4b50) {
                return Err(bad());
            }
            let method = u16_at(&cd, at + 10).ok_or_else(bad)?;
            let crc = u32_at(&cd, at + 16).ok_or_else(bad)?;
            let mut compressed = u32_at(&cd, at + 20).ok_or_else(bad)? as u64;
            let mut size = u32_at(&cd, at + 24).ok_or_else(bad)? as u64;
            let name_len = u16_at(&cd, at + 28).ok_or_else(bad)? as usize;
            let extra_len = u16_at(&cd, at + 30).ok_or_else(bad)? as usize;
            let comment_len = u16_at(&cd, at + 32).ok_or_else(bad)? as usize;
            let mut offset = u32_at(&cd, at + 42).ok_or_else(bad)? as u64;
            let name = cd.get(at + 46..at + 46 + name_len).ok_or_else(bad)?;
            let name = String::from_utf8_lossy(name).to_string();
            let extra = cd
                .get(at + 46 + name_len..at + 46 + name_len + extra_len)
                .ok_or_else(bad)?;
            // Zip64 sizes and offsets live in extra field 0x0001, in this order.
            let mut e = 0;
            while e + 4 <= extra.len() {
                let (id, n) = (
                    u16_at(extra, e).unwrap_or(0),
                    u16_at(extra, e + 2).unwrap_or(0) as usize,
                );
                if id == 1 {
                    let mut f = e + 4;
                    for field in [&mut size, &mut compressed, &mut offset] {
                        if *field == 0xFFFF_FFFF {
                            *field = u64_at(extra, f).ok_or_else(bad)?;
                            f += 8;
                        }
                    }
                }
                e += 4 + n;
            }
            at += 46 + name_len + extra_len + comment_len;
            if name.ends_with('/') {
                continue;
            }
            // A name no request can spell (`../x`, `/x`, `a\\b`) would be
            // listed but never found.
            if let Err(e) = super::StoreKey::new(&name) {
                if skipped == 0 {
                    tracing::warn!("{}: skipping entry: {e}", path.display());
                }
                skipped += 1;
                continue;
            }
            let local = read_at(&file, offset, 30).map_err(|e| corrupt(path, e.to_string()))?;
            if u32_at(&local, 0) != Some(0x0403_4b50) {
                return Err(corrupt(path, format!("bad local header for '{name}'")));
            }
            let data_offset = offset
                + 30
                + u16_at(&local, 26).unwrap_or(0) as u64
                + u16_at(&local, 28).unwrap_or(0) as u64;
            if data_offset.saturating_add(compressed) > len {
                return Err(corrupt(
                    path,
                    format!("'{name}' runs past the end of the file"),
                ));
            }
            // Sizes no entry can have: a stored entry is its bytes, and
            // deflate expands at most 1032 to 1.
            let possible = match method {
                STORED => size == compressed,
                _ => size <= compressed.saturating_mul(1032).saturating_add(1024),
            };
            if !possible {
                return Err(corrupt(
                    path,
                    format!("'{name}' declares {size} bytes from {compressed} compressed"),
                ));
            }
            entries.insert(
                name,
                Entry {
                    method,
                    compressed,
                    size,
                    data_offset,
                    crc,
                },
            );
        }
        if skipped > 1 {
            tracing::warn!(
                "{}: skipped {skipped} entries whose names are not keys",
                path.display()
            );
        }
        Ok(ZipStore {
            path: path.to_path_buf(),
            file: Arc::new(file),
            entries,
            modified,
        })
    }

    fn meta(&self, name: &str, e: &Entry) -> ObjectMeta {
        ObjectMeta {
            location: Path::from(name),
            last_modified: self.modified,
            size: e.size,
            e_tag: Some(format!(
                "{:x}-{:08x}-{:x}",
                self.modified.timestamp(),
                e.crc,
                e.size
            )),
            version: None,
        }
    }

    fn read(&self, name: &str, e: &Entry, range: Range<u64>) -> object_store::Result<Bytes> {
        let io = |err: std::io::Error| object_store::Error::Generic {
            store: "zip",
            source: Box::new(err),
        };
        match e.method {
            STORED => read_at(&self.file, e.data_offset + range.start, (range.end - range.start) as usize).map(Bytes::from).map_err(io),
            DEFLATED => {
                use std::io::Read;
                let packed = read_at(&self.file, e.data_offset, e.compressed as usize).map_err(io)?;
                // Inflate only as far as the range reaches (one byte past the
                // declared size on a read to the end, to find an entry that
                // inflates to more than it says).
                let want = match range.end >= e.size {
                    true => e.size.saturating_add(1),
                    false => range.end,
                };
                let mut out = Vec::with_capacity(want.min(16 << 20) as usize);
                flate2::read::DeflateDecoder::new(&packed[..])
                    .take(want)
                    .read_to_end(&mut out)
                    .map_err(io)?;
                if out.len() as u64 != want.min(e.size) {
                    return Err(object_store::Error::Generic {
                        store: "zip",
                        source: format!(
                            "'{name}' inflates to other than the {} bytes it declares",
                            e.size
                        )
                        .into(),
                    });
                }
                let end = (range.end as usize).min(out.len());
                Ok(Bytes::from(out).slice((range.start as usize).min(end)..end))
            }
            other => Err(object_store::Error::NotSupported { source: format!("'{name}' uses zip compression method {other}; stored and deflated entries are supported").into() }),
        }
    }

    fn not_found(&self, location: &Path) -> object_store::Error {
        object_store::Error::NotFound {
            path: location.to_string(),
            source: format!("no entry in {}", self.path.display()).into(),
        }
    }

    fn under<'a>(
        &'a self,
        prefix: Option<&Path>,
    ) -> impl Iterator<Item = (&'a String, &'a Entry)> + 'a {
        let prefix = prefix
            .map(|p| format!("{}/", p.as_ref()))
            .filter(|p| p != "/")
            .unwrap_or_default();
        self.entries
            .range(prefix.clone()..)
            .take_while(move |(name, _)| name.starts_with(&prefix))
    }
}

impl std::fmt::Display for ZipStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ZipStore({})", self.path.display())
    }
}

#[async_trait]
impl Reads for ZipStore {
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let name = location.as_ref();
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| self.not_found(location))?;
        let meta = self.meta(name, entry);
        options.check_preconditions(&meta)?;
        let size = entry.size;
        let range = super::get::requested("zip", name, options.range.as_ref(), size)?;
        let bytes = if options.head {
            Bytes::new()
        } else {
            self.read(name, entry, range.clone())?
        };
        Ok(super::get::in_memory(bytes, meta, range))
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let metas: Vec<_> = self
            .under(prefix)
            .map(|(name, e)| Ok(self.meta(name, e)))
            .collect();
        futures::stream::iter(metas).boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let base = prefix
            .map(|p| format!("{}/", p.as_ref()))
            .filter(|p| p != "/")
            .unwrap_or_default();
        let mut objects = Vec::new();
        let mut common: Vec<Path> = Vec::new();
        for (name, e) in self.under(prefix) {
            match name[base.len()..].split_once('/') {
                Some((dir, _)) => {
                    let p = Path::from(format!("{base}{dir}"));
                    if common.last() != Some(&p) {
                        common.push(p);
                    }
                }
                None => objects.push(self.meta(name, e)),
            }
        }
        common.dedup();
        Ok(ListResult {
            common_prefixes: common,
            objects,
            extensions: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A zip of one deflated entry `a` holding `data`, saying it inflates to `declared`.
    fn deflated_zip(path: &FsPath, data: &[u8], declared: u32) {
        let mut encoder =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        let packed = encoder.finish().unwrap();
        let crc = crc32fast::hash(data);
        let mut out = vec![0x50, 0x4b, 0x03, 0x04, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0];
        out.extend(crc.to_le_bytes());
        out.extend((packed.len() as u32).to_le_bytes());
        out.extend(declared.to_le_bytes());
        out.extend(1u16.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(b"a");
        out.extend(&packed);
        let start = out.len() as u32;
        let mut c = vec![0x50, 0x4b, 0x01, 0x02, 20, 0, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0];
        c.extend(crc.to_le_bytes());
        c.extend((packed.len() as u32).to_le_bytes());
        c.extend(declared.to_le_bytes());
        c.extend(1u16.to_le_bytes());
        c.extend([0u8; 12]);
        c.extend(0u32.to_le_bytes());
        c.extend(b"a");
        out.extend(&c);
        let mut end = vec![0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 1, 0, 1, 0];
        end.extend((c.len() as u32).to_le_bytes());
        end.extend(start.to_le_bytes());
        end.extend(0u16.to_le_bytes());
        out.extend(end);
        std::fs::write(path, out).unwrap();
    }

    /// A zip of stored entries.
    fn stored_zip(path: &FsPath, entries: &[(&str, &[u8])]) {
        let (mut out, mut central) = (Vec::new(), Vec::new());
        for (name, data) in entries {
            let offset = out.len() as u32;
            let fields = |out: &mut Vec<u8>| {
                out.extend([0, 0, 0, 0, 0, 0, 0, 0]); // flags, method, time, date
                out.extend(crc32fast::hash(data).to_le_bytes());
                out.extend((data.len() as u32).to_le_bytes());
                out.extend((data.len() as u32).to_le_bytes());
                out.extend((name.len() as u16).to_le_bytes());
                out.extend(0u16.to_le_bytes());
            };
            out.extend([0x50, 0x4b, 0x03, 0x04, 20, 0]);
            fields(&mut out);
            out.extend(name.as_bytes());
            out.extend(*data);
            central.extend([0x50, 0x4b, 0x01, 0x02, 20, 0, 20, 0]);
            fields(&mut central);
            central.extend([0u8; 10]); // comment, disk, attributes
            central.extend(offset.to_le_bytes());
            central.extend(name.as_bytes());
        }
        let start = out.len() as u32;
        out.extend(&central);
        let n = (entries.len() as u16).to_le_bytes();
        out.extend([0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, n[0], n[1], n[0], n[1]]);
        out.extend((central.len() as u32).to_le_bytes());
        out.extend(start.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        std::fs::write(path, out).unwrap();
    }

    #[tokio::test]
    async fn names_no_key_can_spell_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.zip");
        let entries: &[(&str, &[u8])] = &[
            ("a/b", b"1"),
            ("../x", b"2"),
            ("/abs", b"3"),
            ("a\\c", b"4"),
        ];
        stored_zip(&path, entries);
        let zip = ZipStore::open(&path).unwrap();
        assert_eq!(zip.entries.keys().collect::<Vec<_>>(), ["a/b"]);
        let top = zip.list_with_delimiter(None).await.unwrap();
        let prefixes: Vec<&str> = top.common_prefixes.iter().map(|p| p.as_ref()).collect();
        assert_eq!((prefixes, top.objects.len()), (vec!["a"], 0));
    }

    #[test]
    fn entries_are_read_as_far_as_they_declare() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.zip");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        deflated_zip(&path, &data, data.len() as u32);
        let zip = ZipStore::open(&path).unwrap();
        let e = zip.entries["a"].clone();
        assert_eq!(zip.read("a", &e, 0..e.size).unwrap(), &data[..]);
        assert_eq!(zip.read("a", &e, 10..20).unwrap(), &data[10..20]);
        // An entry that inflates to more or less than it says is an error
        // on a whole read, and a read within what it says is still exact.
        for declared in [data.len() as u32 - 1, data.len() as u32 + 1] {
            deflated_zip(&path, &data, declared);
            let zip = ZipStore::open(&path).unwrap();
            let e = zip.entries["a"].clone();
            let whole = zip.read("a", &e, 0..e.size).unwrap_err().to_string();
            assert!(whole.contains("inflates to other than"), "{whole}");
            assert_eq!(zip.read("a", &e, 5..9).unwrap(), &data[5..9]);
        }
        // Sizes deflate cannot reach are refused when the zip is opened
        // (they would have been allocated whole on every read).
        deflated_zip(&path, &[0u8; 10], u32::MAX - 1);
        let refused = ZipStore::open(&path).unwrap_err().to_string();
        assert!(refused.contains("declares"), "{refused}");
    }
}

//! What a thumbnail of an array shows: a small, strided read that stands for
//! the whole array, chosen the same way for every array so thumbnails can be
//! compared side by side.

use super::read::{Data, ReadRequest, Residence};
use super::{Result, Service, ServiceError};
use crate::store::StoreKey;
use crate::zarr::{DataType, Selection};

/// Most chunks (inner chunks when sharded) a thumbnail decodes before it
/// shows a region of the array rather than all of it.
pub const MAX_PREVIEW_CHUNKS: u64 = 256;
/// Chunks along each drawn dimension of that region.
const REGION_CHUNKS: u64 = 16;

/// Which kind of picture a thumbnail is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreviewKind {
    /// A 2-D field of values (drawn through a colormap).
    Field,
    /// Height, width and 3 or 4 `uint8` channels.
    Rgb,
    /// A 1-D series (drawn as a line).
    Series,
}

/// A thumbnail's data, the subtree version it was read at (see
/// [`super::ZarrCache::subtree_version`]), and what it was read from.
pub struct Preview {
    pub kind: PreviewKind,
    pub data: Data,
    pub version: u64,
    /// The array's document and the stored chunks (shards) the picture
    /// reads, with their ETags from just before it read them (see
    /// [`Service::versions_of`]): while [`Service::unchanged`] says so of
    /// them, the picture is too.
    pub sources: Vec<(StoreKey, Option<String>)>,
}

impl Service {
    /// The data of a thumbnail at most `size` elements along each drawn
    /// dimension: index 0 of the leading dimensions and the last two strided
    /// by one step (so the picture keeps the array's aspect), or a 1-D
    /// array strided to at most `size` points. When that would decode more
    /// than [`MAX_PREVIEW_CHUNKS`] chunks, the picture is of the array's
    /// first chunks, at most [`REGION_CHUNKS`] along each drawn dimension.
    pub async fn preview(&self, path: &StoreKey, size: u64) -> Result<Preview> {
        let version = self.cache.subtree_version(path);
        let array = self.array(&self.store.pin(path).await?).await?;
        let meta = array.metadata();
        let shape = &meta.shape;
        let rgb = shape.len() >= 3
            && matches!(shape[shape.len() - 1], 3 | 4)
            && meta.dtype == DataType::UInt8;
        let drawn = match (shape.len(), rgb) {
            (0, _) => {
                return Err(ServiceError::unprocessable(
                    "no_preview",
                    format!("'{path}' holds a single value; there is nothing to draw"),
                ))
            }
            (1, _) => 1,
            (_, false) => 2,
            (_, true) => 3,
        };
        let kind = match drawn {
            1 => PreviewKind::Series,
            2 => PreviewKind::Field,
            _ => PreviewKind::Rgb,
        };
        if meta.dtype.size().is_none() {
            return Err(ServiceError::unprocessable(
                "not_drawable",
                format!(
                    "{} values cannot be drawn; '{path}' has no thumbnail",
                    meta.dtype.name()
                ),
            ));
        }
        let lead = shape.len() - drawn;
        let spatial = &shape[lead..lead + drawn.min(2)];
        if shape.contains(&0) {
            return Err(ServiceError::unprocessable(
                "no_preview",
                format!("'{path}' has shape {shape:?}, with no elements to draw"),
            ));
        }
        // A thumbnail strided over the whole array decodes every chunk a
        // sample falls in, which for a large array of small chunks is all
        // of them: past a bound it shows the array's first chunks instead,
        // so its cost follows the picture, not the array.
        let chunks = array.read_chunk_shape();
        let strided = |extent: &[u64]| -> Result<Selection> {
            let longest = extent.iter().copied().max().unwrap_or(1);
            let step = longest.div_ceil(size.max(1));
            let mut items: Vec<String> = vec!["0".into(); lead];
            items.extend(extent.iter().map(|e| format!("0:{e}:{step}")));
            if kind == PreviewKind::Rgb {
                items.push(":".into());
            }
            Selection::parse(&items.join(","))
                .map_err(|e| ServiceError::invalid("bad_selection", e.to_string()))
        };
        let mut selection = strided(spatial)?;
        // Fewer chunks along the drawn dimensions until the picture's fit
        // (an RGB array chunked along its channels reads several per pixel).
        let mut along = REGION_CHUNKS;
        while selection.resolve(shape)?.chunk_count_bound(&chunks) > MAX_PREVIEW_CHUNKS && along > 0
        {
            let region: Vec<u64> = spatial
                .iter()
                .zip(&chunks[lead..])
                .map(|(&s, &c)| s.min(c.saturating_mul(along)))
                .collect();
            selection = strided(&region)?;
            along /= 2;
        }
        // What the picture is read from, looked at before it is read: a
        // change after this look shows at the next one.
        let mut keys = vec![StoreKey::new(&crate::zarr::array::metadata_key(
            path,
            meta.zarr_format,
        ))?];
        for (coords, _) in selection.resolve(shape)?.chunks(&meta.chunk_shape) {
            keys.push(array.chunk_key(&coords)?);
        }
        keys.sort();
        keys.dedup();
        let sources = self.versions_of(keys).await?;
        let request = ReadRequest {
            selection,
            field: None,
            fixed_size_only: true,
            encoding_per_element: 0,
        };
        let data = self
            .read(path, request, Residence::InMemory { expansion: 1 })
            .await?;
        Ok(Preview {
            kind,
            data,
            version,
            sources,
        })
    }
}

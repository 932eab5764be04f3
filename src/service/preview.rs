//! What a thumbnail of an array shows: a small, strided read that stands for
//! the whole array, chosen the same way for every array so thumbnails can be
//! compared side by side.

use super::read::{Data, ReadRequest, Residence};
use super::{Result, Service, ServiceError};
use crate::store::StoreKey;
use crate::zarr::{DataType, Selection};

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

/// A thumbnail's data, and the subtree version it was read at (see
/// [`super::ZarrCache::subtree_version`]).
pub struct Preview {
    pub kind: PreviewKind,
    pub data: Data,
    pub version: u64,
}

impl Service {
    /// The data of a thumbnail at most `size` elements along each drawn
    /// dimension: index 0 of the leading dimensions and the last two strided
    /// by one step (so the picture keeps the array's aspect), or a 1-D
    /// array strided to at most `size` points.
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
        let longest = spatial.iter().copied().max().unwrap_or(1);
        let step = longest.div_ceil(size.max(1));
        let mut items: Vec<String> = vec!["0".into(); lead];
        items.extend(spatial.iter().map(|_| format!("::{step}")));
        if kind == PreviewKind::Rgb {
            items.push(":".into());
        }
        let selection = Selection::parse(&items.join(","))
            .map_err(|e| ServiceError::invalid("bad_selection", e.to_string()))?;
        let request = ReadRequest {
            selection,
            field: None,
            fixed_size_only: true,
        };
        let data = self
            .read(path, request, Residence::InMemory { expansion: 1 })
            .await?;
        Ok(Preview {
            kind,
            data,
            version,
        })
    }
}

//! OME-Zarr multiscale images: a group's declared levels resolved to its
//! arrays, so clients can read a level by index and viewers can pick the
//! coarsest one that fills the screen.

use super::{Result, Service, ServiceError};
use crate::store::StoreKey;
use crate::zarr::metadata::NodeMetadata;
use crate::zarr::ome::{self, Multiscale};

/// One level of an image.
#[derive(Debug, Clone)]
pub struct Level {
    /// The level's array.
    pub path: StoreKey,
    /// Its shape; `None` when the array cannot be read.
    pub shape: Option<Vec<u64>>,
}

/// A multiscale image: the group's first declaration, its levels resolved.
#[derive(Debug, Clone)]
pub struct Image {
    pub group: StoreKey,
    pub multiscale: Multiscale,
    pub levels: Vec<Level>,
}

impl Service {
    /// The first multiscale image the group at `group` declares, if any.
    pub async fn multiscale(&self, group: &StoreKey) -> Result<Option<Image>> {
        let node = self.node(group).await?;
        let NodeMetadata::Group(meta) = &node.meta else {
            return Ok(None);
        };
        let Some(multiscale) = ome::multiscales(&meta.attributes).into_iter().next() else {
            return Ok(None);
        };
        let mut levels = Vec::with_capacity(multiscale.datasets.len());
        for dataset in &multiscale.datasets {
            // A level no key can name (the group's path and its together
            // too long) leaves the group a group, as other declarations
            // readers could not use do.
            let Ok(path) = group.join(&dataset.path) else {
                return Ok(None);
            };
            let shape = match self.node(&path).await {
                Ok(n) => match &n.meta {
                    NodeMetadata::Array(a) => Some(a.shape.clone()),
                    NodeMetadata::Group(_) => None,
                },
                Err(_) => None,
            };
            levels.push(Level { path, shape });
        }
        Ok(Some(Image {
            group: group.clone(),
            multiscale,
            levels,
        }))
    }

    /// The image the array at `array` is a level of, and which level.
    pub async fn level_of(&self, array: &StoreKey) -> Result<Option<(Image, usize)>> {
        let Some(parent) = array.parent() else {
            return Ok(None);
        };
        let image = match self.multiscale(&parent).await {
            Ok(Some(image)) => image,
            // A parent that is not a readable image leaves the array as it is.
            Ok(None) | Err(_) => return Ok(None),
        };
        let found = image.levels.iter().position(|l| l.path == *array);
        Ok(found.map(|i| (image, i)))
    }

    /// The array of level `level` of the image at `group`; a negative level
    /// counts from the coarsest (`-1`).
    pub async fn level_path(&self, group: &StoreKey, level: i64) -> Result<StoreKey> {
        let image = self.multiscale(group).await?.ok_or_else(|| {
            ServiceError::invalid(
                "not_multiscale",
                format!("level: '{group}' is not an OME-Zarr multiscale image"),
            )
        })?;
        let n = image.levels.len() as i64;
        let index = if level < 0 { n + level } else { level };
        if !(0..n).contains(&index) {
            return Err(ServiceError::invalid(
                "bad_level",
                format!(
                    "level {level}: the image at '{group}' has levels 0 to {}",
                    n - 1
                ),
            ));
        }
        Ok(image.levels[index as usize].path.clone())
    }
}

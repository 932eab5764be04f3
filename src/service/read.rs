//! Reading a selection of an array: which elements, of which type and shape,
//! bounded before any work starts and, for fixed-size data, delivered slab
//! by slab so memory stays bounded whatever the selection's size.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;

use super::{Result, Service, ServiceError};
use crate::store::StoreKey;
use crate::zarr::array::extract_field;
use crate::zarr::array::recent::Recent;
use crate::zarr::slabs::{slab_split, slabs_revisit_chunks};
use crate::zarr::{Array, ArrayBytes, DataType, Resolved, Selection};

/// Streamed output is read in slabs of whole chunk rows of the selection
/// when such a row is at most this large: no slab reads a chunk another
/// slab reads.
const WHOLE_ROWS_BYTES: u64 = 16 << 20;
/// Bytes per slab when chunk rows are larger and are split anyway. Small
/// enough that the allocator reuses one slab's pages for the next: 16 MiB
/// slabs were fresh mappings, page-faulted in each time (measured: whole
/// warm reads of 4 MiB chunks, 32 MiB chunk rows, 181-189 -> 152-153 ms).
const SLAB_BYTES: u64 = 2 << 20;
/// Whole chunk rows next to each other are read as one slab while the
/// chunks it decodes stay within this size. Reading a window of small chunks or inner chunks a chunk row at a
/// time paid a pass through the read per row (and, sharded, each shard's
/// index again), more than overlapping the rows with sending saved
/// (measured, cache off, 1000^2 float32 windows: 64^2 chunks 6.3 -> 4.7 ms,
/// 256^2 inner chunks 4.9 -> 4.7 ms). Larger slabs are fresh pages for
/// every slab: joined up to 4 MiB, a 2000^2 sharded window took 26 -> 38 ms.
const JOIN_BYTES: u64 = 2 << 20;
/// At most this much of decoded chunks a stream keeps for its next slabs
/// (see [`Recent`]).
const MAX_RECENT_BYTES: u64 = 64 << 20;

/// What a streamed answer holds at most at once: two slabs in flight, each
/// with the chunks it decodes.
const STREAM_PEAK: u64 = 4 * WHOLE_ROWS_BYTES;

/// Elements of variable-length data read at a time.
const VARIABLE_SLAB: u64 = 1 << 16;

/// The chunks an in-memory answer reads in one read (about a megabyte of
/// per-chunk records); past them it is read slab by slab.
const ONE_READ_CHUNKS: u64 = 4096;

/// What to read.
#[derive(Debug, Clone)]
pub struct ReadRequest {
    pub selection: Selection,
    /// One field of a structured array.
    pub field: Option<String>,
    /// The answer can only carry fixed-size data types (raw bytes).
    pub fixed_size_only: bool,
    /// Memory the answer's encoder needs per element beyond the data (an
    /// image's drawing), reserved with the read's own.
    pub encoding_per_element: u64,
}

/// Where an output format builds its answer, which decides the limit it
/// is held to and whether the data arrives whole or slab by slab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residence {
    /// Built whole in memory, `expansion` bytes of output per byte of data.
    InMemory { expansion: u64 },
    /// Streamed as it is read.
    Streamed,
}

/// A selection's data, typed and shaped, ready to encode.
pub struct Data {
    pub dtype: DataType,
    pub shape: Vec<u64>,
    /// The limit the answer is held to, for checks only the format can make
    /// (padding variable-length elements to one width).
    pub limit: u64,
    /// The fill value as one element of `dtype` (`None` for a field).
    pub fill: Option<Vec<u8>>,
    pub content: Content,
    /// The memory budget this answer holds until it has been sent.
    pub reservation: super::Reservation,
    /// The dimensions of the answer with their coordinates, when asked
    /// for and the array names its dimensions (see [`Axis`]).
    pub axes: Vec<super::Axis>,
    /// The variable's name (the array's).
    pub name: String,
    /// Its CF attributes (units, names), for formats that carry them.
    pub attributes: serde_json::Map<String, serde_json::Value>,
    /// The attributes of its grid mapping (its CRS), when it names one.
    pub grid_mapping: serde_json::Map<String, serde_json::Value>,
}

pub enum Content {
    /// The whole selection, C order (in-memory formats, variable-length data).
    Whole(ArrayBytes),
    /// Fixed-size elements, little-endian, C order: `first` was read before
    /// this was returned (so most errors still get a status), `rest` follows.
    Slabs {
        bytes: u64,
        first: Bytes,
        rest: BoxStream<'static, Result<Bytes>>,
    },
}

impl Service {
    /// Read `request` from the array at `path`, for an answer that lives
    /// where `residence` says.
    pub async fn read(
        &self,
        path: &StoreKey,
        request: ReadRequest,
        residence: Residence,
    ) -> Result<Data> {
        // All of one answer from one commit of a versioned store.
        let array = self.array(&self.store.pin(path).await?).await?;
        self.read_array(array, request, residence).await
    }

    /// [`Service::read`] of an array already looked up.
    pub(super) async fn read_array(
        &self,
        array: Array,
        request: ReadRequest,
        residence: Residence,
    ) -> Result<Data> {
        let name = array.path().name().to_string();
        let ReadRequest {
            selection,
            field,
            fixed_size_only,
            encoding_per_element,
        } = request;
        let resolved = selection.resolve(array.shape())?;
        // A point list's coordinates are resolved now: not held while reading.
        drop(selection);
        let array_dtype = array.metadata().dtype.clone();
        let mut shape = resolved.shape();
        let dtype = match &field {
            None => array_dtype.clone(),
            Some(name) => {
                let field = array_dtype.select_field(name)?;
                shape.extend(field.shape.iter().map(|&d| d as u64));
                field.dtype.clone()
            }
        };
        if fixed_size_only && dtype.size().is_none() {
            return Err(ServiceError::new(
                super::ErrorKind::NotAcceptable,
                "not_acceptable",
                format!(
                    "this format needs a fixed-size dtype, not {}; use format=json or format=npy",
                    dtype.name()
                ),
            ));
        }
        // A subarray field multiplies the count; saturate so the limit check refuses it.
        let count = crate::zarr::metadata::element_count(&shape).unwrap_or(u64::MAX);
        let elem = dtype.size().map(|s| s as u64);
        let (limit, expansion) = match (residence, elem) {
            (Residence::InMemory { expansion }, _) => (self.limits.in_memory, expansion),
            // Variable-length data is assembled in memory whatever the format.
            (Residence::Streamed, None) => (self.limits.in_memory, 1),
            (Residence::Streamed, Some(_)) => (self.limits.streamed, 1),
        };
        // A variable-length element costs at least its 24-byte handle in memory.
        let estimate = count
            .saturating_mul(elem.unwrap_or(24))
            .saturating_mul(expansion);
        if estimate > limit {
            return Err(ServiceError::too_large(format!(
                "the selection has {count} elements (about {estimate} bytes as asked), over the {limit}-byte limit; select a smaller region, fewer points, one field, or use format=npy"
            )));
        }
        // What the answer holds at its peak: in memory, the data and its
        // encoding; streamed, the slabs in flight and the chunks they decode.
        let held = match (residence, elem) {
            (Residence::Streamed, Some(elem)) => count.saturating_mul(elem).min(STREAM_PEAK),
            (Residence::InMemory { .. }, Some(elem)) => estimate
                .saturating_add(count.saturating_mul(elem))
                .saturating_add(count.saturating_mul(encoding_per_element)),
            (_, None) => estimate.saturating_mul(2),
        };
        let reservation = self.budget.reserve(held, "this selection").await?;
        let fill = field.is_none().then(|| array.chunk_repr().fill.0.clone());
        let content = match (residence, elem) {
            (_, None) => Content::Whole(ArrayBytes::Variable(
                read_variable(&array, &resolved, field.as_deref(), limit).await?,
            )),
            // A selection of few chunks in one read, which loads them all at
            // once (on a distant store, slabs would load two at a time).
            (Residence::InMemory { .. }, Some(_))
                if resolved.chunk_count_bound(&array.read_chunk_shape()) <= ONE_READ_CHUNKS =>
            {
                let data = array.read(&resolved).await?;
                Content::Whole(convert(&array_dtype, field.as_deref(), data)?)
            }
            // More, as streams are read, slab by slab: one read of the whole
            // selection would hold a record per chunk it touches, which for
            // small chunks outweighs the answer many times over.
            (Residence::InMemory { .. }, Some(elem)) => {
                let bytes = count.saturating_mul(elem);
                let (first, mut rest) = slabs(array, resolved, field).await?;
                let mut whole = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
                whole.extend_from_slice(&first);
                while let Some(slab) = rest.next().await {
                    whole.extend_from_slice(&slab?);
                }
                Content::Whole(ArrayBytes::Fixed(whole))
            }
            (Residence::Streamed, Some(elem)) => {
                let (first, rest) = slabs(array, resolved, field).await?;
                let bytes = count.saturating_mul(elem);
                Content::Slabs { bytes, first, rest }
            }
        };
        Ok(Data {
            dtype,
            shape,
            limit,
            fill,
            content,
            reservation,
            axes: Vec::new(),
            name,
            attributes: Default::default(),
            grid_mapping: Default::default(),
        })
    }
}

fn convert(dtype: &DataType, field: Option<&str>, data: ArrayBytes) -> Result<ArrayBytes> {
    Ok(match field {
        Some(name) => extract_field(&data, dtype, name)?.data,
        None => data,
    })
}

/// Variable-length data's size is only known once read: read it slab by
/// slab and stop as soon as what was read passes `limit` (per element, its
/// bytes plus what holding it costs).
async fn read_variable(
    array: &Array,
    resolved: &Resolved,
    field: Option<&str>,
    limit: u64,
) -> Result<Vec<Vec<u8>>> {
    let dtype = &array.metadata().dtype;
    let mut items: Vec<Vec<u8>> = Vec::new();
    let mut held = 0u64;
    for slab in slab_split(resolved, &array.read_chunk_shape(), 1, VARIABLE_SLAB, 0) {
        let data = convert(dtype, field, array.read(&slab).await?)?.into_variable()?;
        held += data.iter().map(|i| i.len() as u64 + 24).sum::<u64>();
        if held > limit {
            return Err(ServiceError::too_large(format!(
                "the selection's variable-length elements hold more than {limit} bytes, the limit for data built in memory (--json-limit); select fewer elements"
            )));
        }
        items.extend(data);
    }
    Ok(items)
}

/// Fixed-size data slab by slab: the first slab, read before this returns
/// (so most errors still get a status), and the rest. Memory stays bounded
/// by a few slabs, and the first bytes leave before the last chunk is
/// decoded.
async fn slabs(
    array: Array,
    resolved: Resolved,
    field: Option<String>,
) -> Result<(Bytes, BoxStream<'static, Result<Bytes>>)> {
    let chunk_shape = array.read_chunk_shape();
    let elem = (array.elem_size() as u64).max(1);
    let mut slabs = slab_split(&resolved, &chunk_shape, elem, WHOLE_ROWS_BYTES, JOIN_BYTES);
    let revisit = slabs_revisit_chunks(&slabs, &chunk_shape);
    if revisit {
        slabs = slab_split(&resolved, &chunk_shape, elem, SLAB_BYTES, 0);
    }
    // What the next slab reuses: the chunks one slab touches. Keeping more
    // only costs fresh pages (measured: a 64 MiB budget for 32 MiB of chunk
    // row made a whole v2 Blosc read 20% slower than a 36 MiB one).
    let chunk_bytes = chunk_shape
        .iter()
        .product::<u64>()
        .saturating_mul(array.elem_size() as u64);
    let per_slab = slabs.first().map_or(0, |s| {
        s.chunk_count_bound(&chunk_shape)
            .saturating_add(1)
            .saturating_mul(chunk_bytes)
    });
    // Slabs that never come back to a chunk (a window, or whole chunk rows)
    // skip it: a per-stream cache costs its setup and an insert per chunk.
    let array = if revisit {
        let recent = Recent::new(array.source().clone(), per_slab.min(MAX_RECENT_BYTES));
        array.with_source(Arc::new(recent))
    } else {
        array
    };
    let dtype = array.metadata().dtype.clone();
    let convert = move |data: ArrayBytes| -> Result<Bytes> {
        Ok(Bytes::from(
            convert(&dtype, field.as_deref(), data)?.into_fixed()?,
        ))
    };
    let mut reads = futures::stream::iter(slabs).map(move |slab| {
        let array = array.clone();
        async move { array.read(&slab).await }
    });
    // Slabs that never come back to a chunk: the second is read while the
    // first is (it used to start only once the first had been handed to the
    // connection, so a window of two slabs was read one slab after the
    // other). Slabs that do come back read the first alone, so the next
    // finds the chunks it shares kept rather than loading them beside it.
    let (first, rest) = if revisit {
        let first = match reads.next().await {
            Some(read) => Some(read.await),
            None => None,
        };
        (first, reads.buffered(2).boxed())
    } else {
        let mut reads = reads.buffered(2);
        (reads.next().await, reads.boxed())
    };
    let first = match first {
        Some(data) => convert(data?)?,
        None => Bytes::new(),
    };
    let rest = rest
        .map(move |r| r.map_err(ServiceError::from).and_then(&convert))
        .boxed();
    Ok((first, rest))
}

//! Nodes in a store: finding and parsing metadata of any version, walking
//! the tree, and the operations that change it (create, attributes, resize,
//! append, delete).

use bytes::Bytes;
use futures::future::try_join3;
use serde_json::{json, Map, Value};

use std::sync::Arc;

use super::array::{Array, ChunkSource, Direct};
use super::chunk_key::ChunkKeyEncoding;
use super::dtype::{DataType, Endian};
use super::error::{Result, ZarrError};
use super::fill::parse_fill;
use super::metadata::{
    document_bytes, parse_json, v1, v2, v3, ArrayMetadata, CodecSpec, GroupMetadata, NodeMetadata,
    Order, NODE_DOCUMENTS,
};
use crate::store::{PutCondition, Store, StoreError, StoreKey, Version};

/// A Zarr hierarchy in a store.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    store: Store,
    source: Arc<dyn ChunkSource>,
    /// Creating a node creates its missing parents only at or below this
    /// node (a writer limited to a prefix makes no groups above it).
    parents_from: StoreKey,
}

fn doc_key(path: &StoreKey, name: &str) -> Result<StoreKey> {
    Ok(path.join(name)?)
}

/// The documents a node was read from, in the order they were looked for,
/// each with the ETag it had (`None`: looked for and not there). While
/// every one is unchanged the node is the same, so a cache can ask the
/// store about them instead of reading and parsing them again.
pub type NodeSources = Vec<(StoreKey, Option<String>)>;

/// A document as read, with the version it was read at.
struct Doc {
    key: StoreKey,
    bytes: Option<Bytes>,
    e_tag: Option<String>,
    /// Last modified long enough before it was read that a change since
    /// shows in its ETag ([`KeyMeta::settled`](crate::store::KeyMeta::settled)).
    settled: bool,
}

impl Doc {
    /// The document parsed (`None`: not there). Parsed only where it
    /// decides the node, so one that does not cannot fail it.
    fn value(&self) -> Result<Option<Value>> {
        self.bytes
            .as_ref()
            .map(|b| parse_json(self.key.as_str(), b))
            .transpose()
    }
}

/// What decided a node, unless a document it found has no ETag or was
/// changed too recently for its ETag to be trusted.
fn sources(read: Vec<Doc>) -> Option<NodeSources> {
    read.into_iter()
        .map(|d| match (d.bytes, d.e_tag) {
            (Some(_), Some(e_tag)) if d.settled => Some((d.key, Some(e_tag))),
            (Some(_), _) => None,
            (None, _) => Some((d.key, None)),
        })
        .collect()
}

/// What to create: the fields of `PUT /api/v1/meta` and of `zarr.create_array`.
#[derive(Debug, Clone)]
pub struct ArraySpec {
    pub zarr_format: u8,
    pub shape: Vec<u64>,
    /// Chunk shape (inner chunks when sharded); guessed when `None`.
    pub chunks: Option<Vec<u64>>,
    /// Shard shape (v3 only): wraps `codecs` in `sharding_indexed`.
    pub shards: Option<Vec<u64>>,
    pub dtype: DataType,
    /// Byte order for v2 (`|`-less types ignore it).
    pub endian: Endian,
    pub fill_value: Value,
    /// v3 codecs (array→array, array→bytes, bytes→bytes); `None`: the
    /// serializer + zstd, `Some(null)`: the serializer alone.
    pub codecs: Option<Value>,
    /// v2 compressor; `None`: blosc lz4, `Some(null)`: none.
    pub compressor: Option<Value>,
    /// v2 filters; `None`: what the dtype needs (vlen), `Some(null)`: none.
    pub filters: Option<Value>,
    pub order: Order,
    pub dimension_names: Option<Vec<Option<String>>>,
    pub attributes: Map<String, Value>,
    pub separator: Option<char>,
}

impl ArraySpec {
    /// An array with zarr-python 3's defaults.
    pub fn new(zarr_format: u8, shape: Vec<u64>, dtype: DataType) -> Self {
        ArraySpec {
            zarr_format,
            shape,
            chunks: None,
            shards: None,
            dtype,
            endian: Endian::Little,
            fill_value: Value::Null,
            codecs: None,
            compressor: None,
            filters: None,
            order: Order::C,
            dimension_names: None,
            attributes: Map::new(),
            separator: None,
        }
    }
}

/// zarr-python's chunk guess: about 256 KiB to 64 MiB per chunk, growing with the array.
pub fn guess_chunks(shape: &[u64], typesize: usize) -> Vec<u64> {
    const BASE: f64 = 256.0 * 1024.0;
    const MIN: f64 = 128.0 * 1024.0;
    const MAX: f64 = 64.0 * 1024.0 * 1024.0;
    let mut chunks: Vec<f64> = shape.iter().map(|&s| s.max(1) as f64).collect();
    if chunks.is_empty() {
        return vec![];
    }
    let typesize = typesize.max(1) as f64;
    let size = chunks.iter().product::<f64>() * typesize;
    let target = (BASE * 2f64.powf((size / (1024.0 * 1024.0)).log10())).clamp(MIN, MAX);
    let mut idx = 0;
    loop {
        let bytes = chunks.iter().product::<f64>() * typesize;
        if (bytes < target || (bytes - target).abs() / target < 0.5) && bytes < MAX {
            break;
        }
        if chunks.iter().product::<f64>() <= 1.0 {
            break;
        }
        let d = idx % chunks.len();
        chunks[d] = (chunks[d] / 2.0).ceil();
        idx += 1;
    }
    chunks.into_iter().map(|c| c as u64).collect()
}

/// zarr-python 3's default codecs for `dtype`: its serializer, then zstd
/// unless `compress` is false (`codecs: null`, like `compressors=None`).
fn default_v3_codecs(dtype: &DataType, compress: bool) -> Value {
    let zstd = json!({"name": "zstd", "configuration": {"level": 0, "checksum": false}});
    let serializer = match dtype {
        DataType::String => json!({"name": "vlen-utf8", "configuration": {}}),
        DataType::Bytes => json!({"name": "vlen-bytes", "configuration": {}}),
        d if d.has_byte_order() => json!({"name": "bytes", "configuration": {"endian": "little"}}),
        _ => json!({"name": "bytes"}),
    };
    if compress {
        json!([serializer, zstd])
    } else {
        json!([serializer])
    }
}

/// The metadata documents of an array: (name, document) pairs.
pub fn array_documents(meta: &ArrayMetadata) -> Vec<(&'static str, Value)> {
    match &meta.codecs {
        CodecSpec::V3(codecs) => vec![("zarr.json", v3::array_document(meta, codecs))],
        CodecSpec::V2 {
            filters,
            compressor,
            endian,
        } => {
            let mut docs = vec![(
                ".zarray",
                v2::array_document(meta, filters, compressor, *endian),
            )];
            if !meta.attributes.is_empty() {
                docs.push((".zattrs", v2::attributes_document(&meta.attributes)));
            }
            docs
        }
    }
}

impl Hierarchy {
    pub fn new(store: Store) -> Self {
        Hierarchy {
            store,
            source: Arc::new(Direct),
            parents_from: StoreKey::root(),
        }
    }

    /// This hierarchy, creating the missing parents of new nodes only at
    /// or below `floor`: a parent above it that is missing is refused.
    pub fn creating_parents_from(&self, floor: StoreKey) -> Self {
        Hierarchy {
            parents_from: floor,
            ..self.clone()
        }
    }

    /// Arrays opened here read chunks through `source`.
    pub fn with_source(mut self, source: Arc<dyn ChunkSource>) -> Self {
        self.source = source;
        self
    }

    /// Bind array metadata to `path`, reading through this hierarchy's source.
    pub fn bind(&self, path: &StoreKey, meta: ArrayMetadata) -> Result<Array> {
        Ok(Array::new(self.store.clone(), path.clone(), meta)?.with_source(self.source.clone()))
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The document at `key`, with its ETag.
    async fn read_doc(&self, key: StoreKey) -> Result<Doc> {
        Ok(match self.store.get_versioned(&key).await? {
            Some(v) => Doc {
                key,
                bytes: Some(v.bytes),
                settled: v.meta.settled(),
                e_tag: v.meta.version.e_tag,
            },
            None => Doc {
                key,
                bytes: None,
                e_tag: None,
                settled: true,
            },
        })
    }

    /// The node at `path`, from its own documents (or an implicit group).
    pub async fn node(&self, path: &StoreKey) -> Result<NodeMetadata> {
        Ok(self.node_with_sources(path).await?.0)
    }

    /// The node at `path` and the documents it was found from
    /// ([`NodeSources`]; `None` when they do not decide it: an implicit
    /// group is found by listing, and a document without an ETag cannot
    /// be asked about later).
    pub async fn node_with_sources(
        &self,
        path: &StoreKey,
    ) -> Result<(NodeMetadata, Option<NodeSources>)> {
        let mut read = Vec::with_capacity(5);
        let zarr_json = self.read_doc(doc_key(path, "zarr.json")?).await?;
        if let Some(doc) = zarr_json.value()? {
            let meta = v3::parse(zarr_json.key.as_str(), &doc)?;
            read.push(zarr_json);
            return Ok((meta, sources(read)));
        }
        read.push(zarr_json);
        let (zarray, zgroup, zattrs) = try_join3(
            self.read_doc(doc_key(path, ".zarray")?),
            self.read_doc(doc_key(path, ".zgroup")?),
            self.read_doc(doc_key(path, ".zattrs")?),
        )
        .await?;
        let attrs = zattrs.value()?;
        if let Some(doc) = zarray.value()? {
            let meta = NodeMetadata::Array(Box::new(v2::parse_array(
                zarray.key.as_str(),
                &doc,
                attrs.as_ref(),
            )?));
            // `.zarray` wins over a `.zgroup` beside it, which is neither
            // parsed nor a source of the node.
            read.extend([zarray, zattrs]);
            return Ok((meta, sources(read)));
        }
        if let Some(doc) = zgroup.value()? {
            let mut group = v2::parse_group(zgroup.key.as_str(), &doc, attrs.as_ref())?;
            let zmetadata = self.read_doc(doc_key(path, ".zmetadata")?).await?;
            if let Some(doc) = zmetadata.value()? {
                group.consolidated = Some(v2::parse_consolidated(zmetadata.key.as_str(), &doc)?);
            }
            read.extend([zarray, zgroup, zattrs, zmetadata]);
            return Ok((NodeMetadata::Group(group), sources(read)));
        }
        read.extend([zarray, zgroup, zattrs]);
        let meta = self.read_doc(doc_key(path, "meta")?).await?;
        if let Some(doc) = meta.value()? {
            let attrs = self.read_doc(doc_key(path, "attrs")?).await?;
            let node = NodeMetadata::Array(Box::new(v1::parse(
                meta.key.as_str(),
                &doc,
                attrs.value()?.as_ref(),
            )?));
            read.extend([meta, attrs]);
            return Ok((node, sources(read)));
        }
        let listing = self.store.list_dir(path).await?;
        if path.is_root() || !listing.prefixes.is_empty() || !listing.keys.is_empty() {
            return Ok((
                NodeMetadata::Group(GroupMetadata {
                    zarr_format: 3,
                    implicit: true,
                    ..Default::default()
                }),
                None,
            ));
        }
        Err(ZarrError::NodeNotFound {
            path: path.to_string(),
        })
    }

    /// The array at `path`.
    pub async fn array(&self, path: &StoreKey) -> Result<Array> {
        match self.node(path).await? {
            NodeMetadata::Array(meta) => self.bind(path, *meta),
            NodeMetadata::Group(_) => Err(ZarrError::WrongNodeType {
                path: path.to_string(),
                expected: "array",
                found: "group",
            }),
        }
    }

    /// The nodes directly below a group, by name. A child whose metadata
    /// cannot be read is listed with its error, so one broken node does not
    /// hide its siblings; store failures still fail the whole call.
    pub async fn children(&self, path: &StoreKey) -> Result<Vec<(String, Result<NodeMetadata>)>> {
        let children = self.child_nodes(path, false, &|n| n).await?;
        Ok(children
            .into_iter()
            .map(|(name, node, _)| (name, node))
            .collect())
    }

    /// The nodes directly below `path` (with their attributes when
    /// `whole`), each passed through `keep` as it is read, and whether it
    /// is a group.
    async fn child_nodes<T>(
        &self,
        path: &StoreKey,
        whole: bool,
        keep: &(dyn Fn(NodeMetadata) -> T + Send + Sync),
    ) -> Result<Vec<(String, Result<T>, bool)>> {
        let listing = self.store.list_dir(path).await?;
        let mut out = Vec::new();
        for name in listing.prefixes {
            if let Some((node, group)) = self.child(&path.join(&name)?, whole).await? {
                out.push((name, node.map(keep), group));
            }
        }
        Ok(out)
    }

    /// The node at the folder `path` as a listing of its parent shows it
    /// (with its attributes when `whole`), and whether it is a group; `None`
    /// when the folder holds no node (a folder with no document and none
    /// below it). A node whose metadata cannot be read is its error; store
    /// failures fail the call.
    pub async fn child(
        &self,
        path: &StoreKey,
        whole: bool,
    ) -> Result<Option<(Result<NodeMetadata>, bool)>> {
        Ok(match self.node(path).await {
            Ok(NodeMetadata::Group(g)) if g.implicit && !self.has_descendant_node(path).await? => {
                None
            }
            Ok(node) => {
                let group = matches!(node, NodeMetadata::Group(_));
                // Listings show neither attributes nor consolidated
                // children; holding them for every node would cost
                // without bound.
                let node = if whole { node } else { node.summary() };
                Some((Ok(node), group))
            }
            Err(ZarrError::NodeNotFound { .. }) => None,
            Err(e @ ZarrError::Store(_)) => return Err(e),
            Err(e) => Some((Err(e), false)),
        })
    }

    /// Whether any metadata document lies below `path` (so it is an implicit group).
    async fn has_descendant_node(&self, path: &StoreKey) -> Result<bool> {
        let keys = self.store.list_recursive(path).await?;
        Ok(keys.iter().any(|k| NODE_DOCUMENTS.contains(&k.name())))
    }

    /// Every node at and below `path`, as (path relative to the store root,
    /// node or why it cannot be read), using consolidated metadata when the
    /// start node has it.
    pub async fn walk(&self, path: &StoreKey) -> Result<Vec<(String, Result<NodeMetadata>)>> {
        self.walk_with(path, usize::MAX, false, &|n| n).await
    }

    /// [`Hierarchy::walk`], with every node's attributes when `whole`, each
    /// node passed through `keep` as it is read (a walk holds only what
    /// `keep` returns), stopping once it has found more than `most` nodes
    /// (a caller that will not take more need not list the rest).
    pub async fn walk_with<T>(
        &self,
        path: &StoreKey,
        most: usize,
        whole: bool,
        keep: &(dyn Fn(NodeMetadata) -> T + Send + Sync),
    ) -> Result<Vec<(String, Result<T>)>> {
        let root = self.node(path).await?;
        if let NodeMetadata::Group(GroupMetadata {
            consolidated: Some(nodes),
            ..
        }) = &root
        {
            let mut out = Vec::with_capacity(nodes.len() + 1);
            for (rel, node) in nodes {
                if !rel.is_empty() {
                    out.push((path.join(rel)?.to_string(), Ok(keep(node.clone()))));
                }
            }
            out.insert(0, (path.to_string(), Ok(keep(root))));
            return Ok(out);
        }
        let mut out = vec![(path.to_string(), Ok(keep(root)))];
        let mut stack = vec![path.clone()];
        while let Some(group) = stack.pop() {
            if out.len() > most {
                break;
            }
            for (name, node, is_group) in self.child_nodes(&group, whole, keep).await? {
                let child = group.join(&name)?;
                if is_group {
                    stack.push(child.clone());
                }
                out.push((child.to_string(), node));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    pub(super) async fn exists(&self, path: &StoreKey) -> Result<bool> {
        for name in NODE_DOCUMENTS {
            if self.store.head(&doc_key(path, name)?).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The ancestors of `path` no node is at, nearest first; refused when
    /// the nearest node above is an array, whose chunk keys a node below it
    /// would share. An ancestor whose document does not parse is left to
    /// its readers.
    async fn missing_parents(&self, path: &StoreKey) -> Result<Vec<StoreKey>> {
        let mut parent = path.parent();
        let mut missing = Vec::new();
        while let Some(p) = parent {
            if self.exists(&p).await? {
                if let Ok(NodeMetadata::Array(_)) = self.node(&p).await {
                    return Err(ZarrError::InsideArray {
                        path: path.to_string(),
                        array: p.to_string(),
                    });
                }
                break;
            }
            parent = p.parent();
            missing.push(p);
        }
        Ok(missing)
    }

    /// Refuse a node at `path` below an array, whose chunk keys its keys
    /// would share (the walk up that creating a node's parents makes).
    pub async fn check_placement(&self, path: &StoreKey) -> Result<()> {
        self.missing_parents(path).await.map(drop)
    }

    /// Create groups for every missing ancestor of `path` at or below
    /// [`Hierarchy::creating_parents_from`]'s floor, refusing a path below
    /// an array. Missing ancestors above the floor are left for a writer
    /// that may write there. A parent another writer creates meanwhile is
    /// kept as that writer stored it.
    async fn create_parents(&self, path: &StoreKey, zarr_format: u8) -> Result<()> {
        let mut missing = self.missing_parents(path).await?;
        missing.retain(|p| p.is_at_or_below(&self.parents_from));
        for p in missing.into_iter().rev() {
            match self.write_group(&p, zarr_format, &Map::new(), false).await {
                Ok(()) | Err(ZarrError::NodeExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub(crate) async fn put_json(&self, key: StoreKey, doc: &Value) -> Result<()> {
        let bytes = document_bytes(key.as_str(), doc)?;
        self.store.put(&key, bytes.into()).await?;
        Ok(())
    }

    /// Store the document that makes `path` a node; unless `overwrite`,
    /// only if no writer stored one meanwhile (of two creates racing, one
    /// is told the node exists).
    async fn put_node_document(
        &self,
        path: &StoreKey,
        name: &str,
        doc: &Value,
        overwrite: bool,
    ) -> Result<()> {
        let key = doc_key(path, name)?;
        let bytes = document_bytes(key.as_str(), doc)?;
        let condition = if overwrite {
            PutCondition::Overwrite
        } else {
            PutCondition::Create
        };
        match self.store.put_with(&key, bytes.into(), condition).await {
            Ok(_) => Ok(()),
            Err(StoreError::AlreadyExists { .. }) => Err(ZarrError::NodeExists {
                path: path.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    async fn write_group(
        &self,
        path: &StoreKey,
        zarr_format: u8,
        attributes: &Map<String, Value>,
        overwrite: bool,
    ) -> Result<()> {
        match zarr_format {
            3 => {
                let doc = v3::group_document(attributes);
                self.put_node_document(path, "zarr.json", &doc, overwrite)
                    .await
            }
            2 => {
                let doc = json!({"zarr_format": 2});
                let stray = self.stray_attributes(path, attributes).await?;
                self.put_node_document(path, ".zgroup", &doc, overwrite)
                    .await?;
                self.drop_stray_attributes(path, stray).await?;
                if !attributes.is_empty() {
                    self.put_json(
                        doc_key(path, ".zattrs")?,
                        &Value::Object(attributes.clone()),
                    )
                    .await?;
                }
                Ok(())
            }
            other => Err(ZarrError::Data(format!(
                "cannot create zarr_format {other} nodes (2 and 3 are supported)"
            ))),
        }
    }

    async fn prepare_create(
        &self,
        path: &StoreKey,
        zarr_format: u8,
        overwrite: bool,
    ) -> Result<()> {
        if self.exists(path).await? {
            if !overwrite {
                return Err(ZarrError::NodeExists {
                    path: path.to_string(),
                });
            }
            self.delete(path).await?;
        }
        self.create_parents(path, zarr_format).await
    }

    /// Create a group.
    pub async fn create_group(
        &self,
        path: &StoreKey,
        zarr_format: u8,
        attributes: Map<String, Value>,
        overwrite: bool,
    ) -> Result<()> {
        self.prepare_create(path, zarr_format, overwrite).await?;
        self.write_group(path, zarr_format, &attributes, overwrite)
            .await
    }

    /// The metadata `spec` describes, checked by building its codecs.
    pub fn array_metadata(spec: &ArraySpec) -> Result<ArrayMetadata> {
        let typesize = spec.dtype.size().unwrap_or(16);
        let chunks = spec
            .chunks
            .clone()
            .unwrap_or_else(|| guess_chunks(spec.shards.as_ref().unwrap_or(&spec.shape), typesize));
        let fill_value = parse_fill(&spec.dtype, &spec.fill_value)?;
        let (chunk_shape, codecs) = match spec.zarr_format {
            3 => {
                let inner = match &spec.codecs {
                    None => default_v3_codecs(&spec.dtype, true),
                    Some(Value::Null) => default_v3_codecs(&spec.dtype, false),
                    Some(codecs) => codecs.clone(),
                };
                match &spec.shards {
                    Some(shards) => (
                        shards.clone(),
                        CodecSpec::V3(json!([{"name": "sharding_indexed", "configuration": {
                            "chunk_shape": chunks,
                            "codecs": inner,
                            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
                            "index_location": "end"}}])),
                    ),
                    None => (chunks, CodecSpec::V3(inner)),
                }
            }
            2 => {
                if spec.shards.is_some() {
                    return Err(ZarrError::Data("shards need zarr_format 3".into()));
                }
                let filters = match (&spec.filters, &spec.dtype) {
                    (Some(f), _) => f.clone(),
                    (None, DataType::String) => json!([{"id": "vlen-utf8"}]),
                    (None, DataType::Bytes) => json!([{"id": "vlen-bytes"}]),
                    (None, _) => Value::Null,
                };
                let compressor = spec
                    .compressor
                    .clone()
                    .unwrap_or_else(|| json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}));
                (
                    chunks,
                    CodecSpec::V2 {
                        filters,
                        compressor,
                        endian: spec.endian,
                    },
                )
            }
            other => {
                return Err(ZarrError::Data(format!(
                    "cannot create zarr_format {other} arrays (2 and 3 are supported)"
                )))
            }
        };
        let chunk_key_encoding = match spec.zarr_format {
            3 => ChunkKeyEncoding::Default {
                separator: spec.separator.unwrap_or('/'),
            },
            _ => ChunkKeyEncoding::V2 {
                separator: spec.separator.unwrap_or('.'),
            },
        };
        let fill_value_json = match (spec.zarr_format, &spec.fill_value) {
            (2, Value::Null) => Value::Null,
            _ => super::fill::fill_to_v3_json(&spec.dtype, &fill_value),
        };
        let meta = ArrayMetadata {
            zarr_format: spec.zarr_format,
            shape: spec.shape.clone(),
            chunk_shape,
            dtype: spec.dtype.clone(),
            fill_value,
            fill_value_json,
            order: if spec.zarr_format == 2 {
                spec.order
            } else {
                Order::C
            },
            chunk_key_encoding,
            codecs,
            attributes: spec.attributes.clone(),
            dimension_names: spec.dimension_names.clone(),
        };
        meta.validate("the new array")?;
        if spec.zarr_format == 3 && spec.order == Order::F {
            return Err(ZarrError::Data(
                "order F is a v2 option; use a transpose codec in v3".into(),
            ));
        }
        // The type must read back as itself from `zarr.json`: one v3
        // cannot spell (structured fields with shapes) was stored as
        // another, and left a node no reader could open or replace.
        if spec.zarr_format == 3
            && DataType::from_v3_json(&spec.dtype.to_v3_json())
                .ok()
                .as_ref()
                != Some(&spec.dtype)
        {
            return Err(ZarrError::Data(format!(
                "the data type {} has no Zarr v3 form (structured fields with shapes have none); \
                 create the array with zarr_format 2",
                spec.dtype.name()
            )));
        }
        Ok(meta)
    }

    /// Create an array.
    pub async fn create_array(
        &self,
        path: &StoreKey,
        spec: &ArraySpec,
        overwrite: bool,
    ) -> Result<Array> {
        let mut meta = Self::array_metadata(spec)?;
        let mut array = self.bind(path, meta.clone())?;
        if let CodecSpec::V3(_) = meta.codecs {
            // Store codecs in canonical form (every codec with its full
            // configuration), as zarr-python does, so every reader accepts them.
            meta.codecs = CodecSpec::V3(array.codecs().to_v3());
            array = self.bind(path, meta.clone())?;
        }
        self.prepare_create(path, spec.zarr_format, overwrite)
            .await?;
        self.write_array_metadata(path, &meta, overwrite).await?;
        Ok(array)
    }

    /// Store a new array's metadata documents: the one that makes it a
    /// node first, as [`Hierarchy::put_node_document`] does.
    async fn write_array_metadata(
        &self,
        path: &StoreKey,
        meta: &ArrayMetadata,
        overwrite: bool,
    ) -> Result<()> {
        let stray = match meta.zarr_format {
            2 => self.stray_attributes(path, &meta.attributes).await?,
            _ => None,
        };
        let mut documents = array_documents(meta).into_iter();
        if let Some((name, doc)) = documents.next() {
            self.put_node_document(path, name, &doc, overwrite).await?;
        }
        self.drop_stray_attributes(path, stray).await?;
        for (name, doc) in documents {
            self.put_json(doc_key(path, name)?, &doc).await?;
        }
        Ok(())
    }

    /// The version of a `.zattrs` at `path` before a v2 node without
    /// attributes is created there: attributes a deleted node left behind
    /// are not the new node's.
    async fn stray_attributes(
        &self,
        path: &StoreKey,
        attributes: &Map<String, Value>,
    ) -> Result<Option<Version>> {
        if !attributes.is_empty() {
            return Ok(None);
        }
        Ok(self
            .store
            .head(&doc_key(path, ".zattrs")?)
            .await?
            .map(|m| m.version))
    }

    /// Delete the stray `.zattrs` once the new node's document is stored,
    /// unless a writer of the new node has replaced it since.
    async fn drop_stray_attributes(&self, path: &StoreKey, stray: Option<Version>) -> Result<()> {
        let Some(version) = stray else {
            return Ok(());
        };
        let key = doc_key(path, ".zattrs")?;
        match self.store.delete_if(&key, version.e_tag.as_deref()).await {
            Ok(()) | Err(StoreError::Precondition { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Delete a node and everything below it.
    pub async fn delete(&self, path: &StoreKey) -> Result<()> {
        if path.is_root() {
            self.store.delete_prefix(path).await?;
            return Ok(());
        }
        if !self.exists(path).await? && self.store.list_dir(path).await? == Default::default() {
            return Err(ZarrError::NodeNotFound {
                path: path.to_string(),
            });
        }
        // The node's documents first, each as writers of it coordinate (an
        // attribute patch under way finishes before, or finds the node gone).
        // Not in a transaction, which commits the delete whole, and where
        // deleting a node's document deletes the node its keys are listed by.
        if !self.store.in_transaction(path) {
            for name in NODE_DOCUMENTS.iter().chain([&".zattrs"]) {
                self.store.delete_if(&doc_key(path, name)?, None).await?;
            }
        }
        self.store.delete_prefix(path).await?;
        Ok(())
    }
}

//! A node as the data protocols (OPeNDAP, EDR) describe it: a dataset of
//! variables, each with named dimensions, its stored type and every
//! attribute, as xarray opens the same node. A group is the dataset of
//! its arrays; an array is a dataset of itself and, when the caller may
//! read them, the coordinates beside it that name its dimensions.

use serde_json::{Map, Value};

use super::{Result, Service};
use crate::store::StoreKey;
use crate::zarr::cf;
use crate::zarr::metadata::NodeMetadata;
use crate::zarr::{ArrayMetadata, DataType};

/// A node as a dataset.
#[derive(Debug, Clone)]
pub struct Described {
    /// The node's name (`root` for the store's root).
    pub name: String,
    /// The group's attributes: the dataset's global attributes.
    pub attributes: Map<String, Value>,
    /// In the order the group lists them.
    pub variables: Vec<Variable>,
    /// Arrays of the group that are not variables, and why.
    pub left_out: Vec<(String, String)>,
}

/// One array of a dataset.
#[derive(Debug, Clone)]
pub struct Variable {
    pub name: String,
    pub path: StoreKey,
    /// Its dimensions: the names it stores, or `{name}_{i}` without them.
    pub dimensions: Vec<String>,
    pub shape: Vec<u64>,
    pub dtype: DataType,
    /// Every attribute but the dimension names, with `_FillValue` as
    /// xarray reads a v2 array's fill value.
    pub attributes: Map<String, Value>,
}

impl Variable {
    /// A dimension coordinate: one dimension, named as the variable.
    pub fn is_coordinate(&self) -> bool {
        self.dimensions.len() == 1 && self.dimensions[0] == self.name
    }
}

impl Described {
    pub fn variable(&self, name: &str) -> Option<&Variable> {
        self.variables.iter().find(|v| v.name == name)
    }

    /// The coordinate variable of dimension `dim`, when the dataset has one.
    pub fn coordinate(&self, dim: &str) -> Option<&Variable> {
        self.variable(dim).filter(|v| v.is_coordinate())
    }

    /// Every dimension with its length, in the order variables name them.
    pub fn dimensions(&self) -> Vec<(&str, u64)> {
        let mut dims: Vec<(&str, u64)> = Vec::new();
        for v in &self.variables {
            for (d, &n) in v.dimensions.iter().zip(&v.shape) {
                if !dims.iter().any(|(name, _)| name == d) {
                    dims.push((d, n));
                }
            }
        }
        dims
    }

    /// Adds `v` unless one of its dimensions already has another length
    /// (no netCDF or xarray reader could hold both).
    fn push(&mut self, v: Variable) {
        for (d, &n) in v.dimensions.iter().zip(&v.shape) {
            if let Some((_, m)) = self.dimensions().into_iter().find(|(name, _)| name == d) {
                if m != n {
                    let why = format!("its dimension '{d}' has {n} elements, {m} elsewhere");
                    self.left_out.push((v.name.clone(), why));
                    return;
                }
            }
        }
        self.variables.push(v);
    }
}

fn variable(name: &str, path: StoreKey, meta: &ArrayMetadata) -> Variable {
    let dimensions = cf::dimension_names(meta)
        .filter(|d| d.len() == meta.shape.len())
        .unwrap_or_else(|| {
            (0..meta.shape.len())
                .map(|i| format!("{name}_{i}"))
                .collect()
        });
    let mut attributes: Map<String, Value> = meta
        .attributes
        .iter()
        .filter(|(k, _)| k.as_str() != "_ARRAY_DIMENSIONS")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if meta.zarr_format == 2 && !attributes.contains_key("_FillValue") {
        if let Some(fill) = cf::fill_as_f64(meta) {
            attributes.insert("_FillValue".into(), super::number_json(fill, false));
        }
    }
    // numpy datetimes count their unit from the Unix epoch, as xarray says.
    if let (DataType::DateTime64 { unit, scale }, false) =
        (&meta.dtype, attributes.contains_key("units"))
    {
        let units = format!("{} since 1970-01-01", cf::numpy_unit(unit, *scale));
        attributes.insert("units".into(), Value::String(units));
        attributes
            .entry("calendar")
            .or_insert_with(|| Value::String("proleptic_gregorian".into()));
    }
    Variable {
        name: name.to_string(),
        path,
        dimensions,
        shape: meta.shape.clone(),
        dtype: meta.dtype.clone(),
        attributes,
    }
}

impl Service {
    /// The node at `path` as a dataset. `beside`: whether an array's
    /// dataset takes the coordinates of its group (the caller may read them).
    pub async fn described(&self, path: &StoreKey, beside: bool) -> Result<Described> {
        let node = self.node(path).await?;
        let name = if path.is_root() { "root" } else { path.name() }.to_string();
        match &node.meta {
            NodeMetadata::Group(group) => {
                let mut described = Described {
                    name,
                    attributes: group.attributes.clone(),
                    variables: Vec::new(),
                    left_out: Vec::new(),
                };
                for (member, listed) in self.members(path).await? {
                    if !matches!(listed, Ok(NodeMetadata::Array(_))) {
                        continue;
                    }
                    let key = path.join(&member)?;
                    // A listing's nodes are summaries: the attributes are the node's.
                    match self.node(&key).await {
                        Ok(n) => {
                            if let NodeMetadata::Array(meta) = &n.meta {
                                described.push(variable(&member, key, meta));
                            }
                        }
                        Err(e) => described.left_out.push((member, e.to_string())),
                    }
                }
                Ok(described)
            }
            NodeMetadata::Array(meta) => {
                let own = variable(&name, path.clone(), meta);
                let mut described = Described {
                    name,
                    attributes: Map::new(),
                    variables: Vec::new(),
                    left_out: Vec::new(),
                };
                if let (true, Some(parent)) = (beside, path.parent()) {
                    for dim in own.dimensions.iter().filter(|d| **d != own.name) {
                        let Ok(key) = parent.join(dim) else { continue };
                        let Ok(n) = self.node(&key).await else {
                            continue;
                        };
                        if let NodeMetadata::Array(m) = &n.meta {
                            let c = variable(dim, key, m);
                            if c.is_coordinate() {
                                described.push(c);
                            }
                        }
                    }
                }
                // The array first, as the dataset is named after it.
                described.variables.insert(0, own);
                Ok(described)
            }
        }
    }
}

//! The nodes at and below a path, a page at a time. A page costs what it
//! returns: the walk enters only the groups it lists (never arrays, whose
//! chunks are most of a store's keys), holds one level of children per
//! group it is inside, and resumes after the last node of the previous page
//! from its path alone, so a client pages through a hierarchy of any size
//! without the server holding it.

use super::{Node, Result, Service, ServiceError};
use crate::store::StoreKey;
use crate::zarr::{GroupMetadata, NodeMetadata};

/// Nodes in a page when the client does not say.
pub const TREE_PAGE: usize = 1000;
/// Most nodes a page may ask for.
pub const MAX_TREE_PAGE: usize = 10_000;

/// One node of a tree walk.
#[derive(Debug)]
pub struct TreeNode {
    pub path: String,
    pub node: Result<Node>,
}

/// A page of a tree walk: its nodes in path order, and the path to resume
/// after when there may be more.
#[derive(Debug)]
pub struct TreePage {
    pub nodes: Vec<TreeNode>,
    pub next: Option<String>,
}

/// A group the walk is inside: its children, and the next one to visit.
struct Frame {
    group: StoreKey,
    children: Vec<(String, Result<NodeMetadata>)>,
    at: usize,
}

fn is_group(node: &Result<NodeMetadata>) -> bool {
    matches!(node, Ok(NodeMetadata::Group(_)))
}

impl Service {
    /// Up to `limit` nodes at and below `path`, after the node `after` (the
    /// `next` of the previous page), each with its runtime array when it is
    /// one (or why it cannot be read). Groups are walked depth first, their
    /// children in name order; a group that stores consolidated metadata is
    /// answered from it, in path order.
    pub async fn tree_page(
        &self,
        path: &StoreKey,
        after: Option<&str>,
        limit: usize,
    ) -> Result<TreePage> {
        let limit = limit.clamp(1, MAX_TREE_PAGE);
        let after_rel: Option<Vec<String>> = match after {
            None => None,
            Some(a) if a == path.as_str() => Some(Vec::new()),
            Some(a) => {
                let rel = if path.is_root() {
                    Some(a)
                } else {
                    a.strip_prefix(path.as_str())
                        .and_then(|r| r.strip_prefix('/'))
                };
                match rel.filter(|r| !r.is_empty()) {
                    Some(r) => Some(r.split('/').map(str::to_string).collect()),
                    None => {
                        return Err(ServiceError::invalid(
                            "bad_after",
                            format!("after='{a}' is not a node below '{path}': pass the `next` of the previous page"),
                        ))
                    }
                }
            }
        };
        let root = self.node(path).await?;
        if let NodeMetadata::Group(GroupMetadata {
            consolidated: Some(nodes),
            ..
        }) = &root.meta
        {
            let mut all: Vec<(String, NodeMetadata)> = Vec::with_capacity(nodes.len() + 1);
            all.push((path.to_string(), root.meta.clone()));
            for (rel, node) in nodes {
                if !rel.is_empty() {
                    all.push((path.join(rel)?.to_string(), node.clone()));
                }
            }
            all.sort_by(|a, b| a.0.cmp(&b.0));
            let start = after.map_or(0, |a| all.partition_point(|(p, _)| p.as_str() <= a));
            let rest = &all[start..];
            let next = (rest.len() > limit).then(|| rest[limit - 1].0.clone());
            let nodes = rest
                .iter()
                .take(limit)
                .map(|(p, meta)| self.tree_node(p.clone(), Ok(meta.clone())))
                .collect();
            return Ok(TreePage { nodes, next });
        }
        let mut nodes = Vec::new();
        if after_rel.is_none() {
            nodes.push(TreeNode {
                path: path.to_string(),
                node: Ok(Node {
                    meta: root.meta.clone(),
                    array: root.array.clone(),
                }),
            });
        }
        if !matches!(root.meta, NodeMetadata::Group(_)) {
            return Ok(TreePage { nodes, next: None });
        }
        // Down to where the previous page stopped: in each group on the way,
        // past the children already listed.
        let mut stack = Vec::new();
        let mut group = path.clone();
        let mut depth = 0;
        loop {
            let children = self.children_of(&group).await?;
            let mut at = 0;
            let mut inside = None;
            if let Some(rel) = after_rel.as_ref().filter(|r| depth < r.len()) {
                at = children.partition_point(|(n, _)| n.as_str() < rel[depth].as_str());
                if let Some((name, node)) = children.get(at).filter(|(n, _)| *n == rel[depth]) {
                    if is_group(node) {
                        inside = Some(group.join(name)?);
                    }
                    at += 1;
                }
            }
            stack.push(Frame {
                group,
                children,
                at,
            });
            match inside {
                Some(g) => {
                    group = g;
                    depth += 1;
                }
                None => break,
            }
        }
        let mut last = None;
        while let Some(frame) = stack.last_mut() {
            if nodes.len() >= limit {
                break;
            }
            let Some((name, node)) = frame.children.get_mut(frame.at) else {
                stack.pop();
                continue;
            };
            frame.at += 1;
            let child = frame.group.join(name)?;
            let group = is_group(node);
            let node = std::mem::replace(node, Err(ServiceError::not_found("listed")));
            nodes.push(self.tree_node(child.to_string(), node));
            last = Some(child.to_string());
            if group {
                let children = self.children_of(&child).await?;
                stack.push(Frame {
                    group: child,
                    children,
                    at: 0,
                });
            }
        }
        let next = if nodes.len() >= limit { last } else { None };
        // Within a page, path order, as a whole walk was always answered.
        nodes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(TreePage { nodes, next })
    }

    /// The nodes directly below `group`, by name.
    async fn children_of(&self, group: &StoreKey) -> Result<Vec<(String, Result<NodeMetadata>)>> {
        Ok(self
            .hierarchy
            .children(group)
            .await?
            .into_iter()
            .map(|(name, node)| (name, node.map_err(ServiceError::from)))
            .collect())
    }

    /// A node as a tree lists it: with its runtime array when it is one.
    fn tree_node(&self, path: String, meta: Result<NodeMetadata>) -> TreeNode {
        let node = meta.map(|meta| {
            let array = match &meta {
                NodeMetadata::Array(m) => StoreKey::new(&path)
                    .ok()
                    .and_then(|k| self.hierarchy.bind(&k, (**m).clone()).ok()),
                NodeMetadata::Group(_) => None,
            };
            Node { meta, array }
        });
        TreeNode { path, node }
    }
}

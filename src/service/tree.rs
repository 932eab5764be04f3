//! The nodes at and below a path, a page at a time. A page costs what it
//! returns: the walk enters only the groups it lists (never arrays, whose
//! chunks are most of a store's keys), holds one level of children per
//! group it is inside, and resumes after the last node of the previous page
//! from its path alone, so a client pages through a hierarchy of any size
//! without the server holding it.

use std::collections::VecDeque;

use super::{Node, Result, Service, ServiceError};
use crate::store::{LevelEntry, StoreKey};
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

/// A group the walk is inside: the names of its folders listed and not
/// yet visited, and where its listing goes on.
struct Frame {
    group: StoreKey,
    pending: VecDeque<String>,
    /// The whole key the listing resumes after (a folder's ends in `/`).
    after: Option<String>,
    listed: bool,
}

impl Frame {
    fn new(group: StoreKey, after_name: Option<&str>) -> Self {
        let after = after_name.map(|n| {
            if group.is_root() {
                format!("{n}/")
            } else {
                format!("{group}/{n}/")
            }
        });
        Frame {
            group,
            pending: VecDeque::new(),
            after,
            listed: false,
        }
    }
}

/// Folders of a group listed at a time.
const LIST_BATCH: usize = 256;

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
        if let Some(a) = after.filter(|a| !a.is_empty()) {
            StoreKey::new(a).map_err(|e| {
                ServiceError::invalid(
                    "bad_after",
                    format!("after='{a}' is not a node's path: {e}"),
                )
            })?;
        }
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
        let mut last = None;
        if after_rel.is_none() {
            nodes.push(TreeNode {
                path: path.to_string(),
                node: Ok(Node {
                    meta: root.meta.clone(),
                    array: root.array.clone(),
                    undecodable: root.undecodable.clone(),
                }),
            });
            last = Some(path.to_string());
        }
        if !matches!(root.meta, NodeMetadata::Group(_)) {
            return Ok(TreePage { nodes, next: None });
        }
        // Where the previous page stopped, at node X: X's children come
        // next if it is a group, then its siblings after it, then each
        // ancestor's siblings after that ancestor.
        let mut stack = Vec::new();
        match &after_rel {
            None => stack.push(Frame::new(path.clone(), None)),
            Some(rel) => {
                let mut group = path.clone();
                for name in rel {
                    let child = group.join(name)?;
                    stack.push(Frame::new(group, Some(name)));
                    group = child;
                }
                let x_is_group = rel.is_empty()
                    || matches!(self.hierarchy.child(&group, false).await?, Some((_, true)));
                if x_is_group {
                    stack.push(Frame::new(group, None));
                }
            }
        }
        while nodes.len() < limit {
            let Some(frame) = stack.last_mut() else {
                break;
            };
            let Some(name) = self.next_folder(frame).await? else {
                stack.pop();
                continue;
            };
            let child = frame.group.join(&name)?;
            let Some((node, is_group)) = self.hierarchy.child(&child, false).await? else {
                continue;
            };
            nodes.push(self.tree_node(child.to_string(), node.map_err(ServiceError::from)));
            last = Some(child.to_string());
            if is_group {
                stack.push(Frame::new(child, None));
            }
        }
        let next = if nodes.len() >= limit { last } else { None };
        // Within a page, path order, as a whole walk was always answered.
        nodes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(TreePage { nodes, next })
    }

    /// The next folder of the group `frame` is inside, listed a batch at a
    /// time.
    async fn next_folder(&self, frame: &mut Frame) -> Result<Option<String>> {
        loop {
            if let Some(name) = frame.pending.pop_front() {
                return Ok(Some(name));
            }
            if frame.listed {
                return Ok(None);
            }
            let page = self
                .store
                .list_level_page(&frame.group, frame.after.as_deref(), LIST_BATCH)
                .await?;
            frame.listed = page.len() < LIST_BATCH;
            let base = if frame.group.is_root() {
                String::new()
            } else {
                format!("{}/", frame.group)
            };
            if let Some(e) = page.last() {
                frame.after = Some(format!("{base}{}", e.name()));
            }
            frame
                .pending
                .extend(page.into_iter().filter_map(|e| match e {
                    LevelEntry::Folder(name) => Some(name.trim_end_matches('/').to_string()),
                    LevelEntry::Value(..) => None,
                }));
        }
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
            Node {
                meta,
                array,
                undecodable: None,
            }
        });
        TreeNode { path, node }
    }
}

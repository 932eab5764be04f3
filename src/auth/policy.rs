//! Who may do what where: `[[policy]]` rules granting (or denying) a scope
//! on a path prefix to users, groups, `authenticated` or `anonymous`, and
//! [`Rights`], the rules that apply to one caller, asked for every request.
//!
//! A rule covers its path and everything below it. Of the rules that apply
//! to a request, the one with the longest path decides; at equal length a
//! denial wins. A grant of a scope grants the scopes below it (`admin`
//! includes `write`, which includes `read`); a denial of a scope denies it
//! and every scope above it (denying `read` denies everything).

use serde::Deserialize;

use super::{AuthConfigError, Scope};

/// A `[[policy]]` table as configured (or a rule of the policy document
/// on the store).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// A path prefix; `""` for the whole store.
    pub path: String,
    pub grant: Scope,
    /// `user:SUB`, `group:NAME`, `authenticated`, `anonymous`.
    pub to: Vec<String>,
    #[serde(default)]
    pub deny: bool,
}

/// The policy document kept on the store (`/api/v1/policy`): rules that
/// apply beside the config file's, and who last replaced them when.
#[derive(Debug, Clone, Default, serde::Serialize, Deserialize)]
pub struct Document {
    pub rules: Vec<RuleConfig>,
    #[serde(default)]
    pub updated: u64,
    #[serde(default)]
    pub by: String,
}

/// Whom a rule names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Principal {
    User(String),
    Group(String),
    /// Every caller who signed in.
    Authenticated,
    /// Callers who present no credentials.
    Anonymous,
}

impl Principal {
    /// Whether this names `who`.
    pub(crate) fn applies(&self, who: &Who) -> bool {
        match (self, &who.user) {
            (Principal::Anonymous, None) => true,
            (Principal::Authenticated, Some(_)) => true,
            (Principal::User(sub), Some(user)) => sub == user,
            (Principal::Group(g), Some(_)) => who.groups.iter().any(|mine| mine == g),
            _ => false,
        }
    }

    /// A table's `to`: at least one name, each of a known form.
    pub(crate) fn list(names: &[String]) -> Result<Vec<Principal>, String> {
        if names.is_empty() {
            return Err("`to` names no one".into());
        }
        names
            .iter()
            .map(|p| {
                Principal::parse(p).ok_or_else(|| {
                    format!("'{p}' is not user:SUB, group:NAME, authenticated or anonymous")
                })
            })
            .collect()
    }

    fn parse(s: &str) -> Option<Principal> {
        match s {
            "authenticated" => Some(Principal::Authenticated),
            "anonymous" => Some(Principal::Anonymous),
            _ => match s.split_once(':') {
                Some(("user", sub)) if !sub.is_empty() => Some(Principal::User(sub.into())),
                Some(("group", name)) if !name.is_empty() => Some(Principal::Group(name.into())),
                _ => None,
            },
        }
    }
}

/// One rule of [`Rights`]: a scope granted or denied at a path and below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub scope: Scope,
    pub deny: bool,
}

impl Entry {
    pub fn grant(path: &str, scope: Scope) -> Entry {
        Entry {
            path: path.trim_matches('/').to_string(),
            scope,
            deny: false,
        }
    }

    /// Whether this rule says anything about `scope`.
    fn speaks_of(&self, scope: Scope) -> bool {
        if self.deny {
            self.scope <= scope
        } else {
            self.scope >= scope
        }
    }
}

/// Whether `path` is `prefix` or below it.
pub fn at_or_below(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

/// What one caller may do: the rules that apply to them, and for an API
/// key, the scope and prefixes it is limited to within them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rights {
    entries: Vec<Entry>,
    limit: Option<(Scope, Vec<String>)>,
}

impl Rights {
    pub fn new(entries: Vec<Entry>) -> Rights {
        Rights {
            entries,
            limit: None,
        }
    }

    /// These rights, no more than `scope` and only at or below `prefixes`.
    pub fn limited(&self, scope: Scope, prefixes: &[String]) -> Rights {
        Rights {
            entries: self.entries.clone(),
            limit: Some((
                scope,
                prefixes
                    .iter()
                    .map(|p| p.trim_matches('/').to_string())
                    .collect(),
            )),
        }
    }

    /// Whether the limit lets `path` through (`None`: no limit).
    fn inside(&self, path: &str) -> bool {
        self.limit
            .as_ref()
            .is_none_or(|(_, prefixes)| prefixes.iter().any(|p| at_or_below(path, p)))
    }

    /// Whether the caller may do `scope` on `path` (a node or a key).
    pub fn may(&self, scope: Scope, path: &str) -> bool {
        let path = path.trim_matches('/');
        if self.limit.as_ref().is_some_and(|(top, _)| scope > *top) || !self.inside(path) {
            return false;
        }
        let mut best: Option<&Entry> = None;
        for e in &self.entries {
            if !e.speaks_of(scope) || !at_or_below(path, &e.path) {
                continue;
            }
            best = match best {
                Some(b) if b.path.len() > e.path.len() => Some(b),
                Some(b) if b.path.len() == e.path.len() && b.deny => Some(b),
                _ => Some(e),
            };
        }
        best.is_some_and(|e| !e.deny)
    }

    /// Whether the caller may do `scope` on `path` and on everything below
    /// it: what replacing or deleting a node needs, since all below goes
    /// with it (a node denied to the caller below is not theirs to remove).
    pub fn may_all_below(&self, scope: Scope, path: &str) -> bool {
        let path = path.trim_matches('/');
        self.may(scope, path)
            && !self.entries.iter().any(|e| {
                e.deny
                    && e.scope <= scope
                    && e.path.len() > path.len()
                    && at_or_below(&e.path, path)
            })
    }

    /// Whether the caller may do `scope` somewhere (routes about the
    /// server, not a store path).
    pub fn has(&self, scope: Scope) -> bool {
        self.limit.as_ref().is_none_or(|(top, _)| scope <= *top)
            && self.entries.iter().any(|e| !e.deny && e.scope >= scope)
    }

    /// Whether `path` shows in listings: the caller may read it, or
    /// something below it (its name is the way there).
    pub fn sees(&self, path: &str) -> bool {
        let path = path.trim_matches('/');
        // Paths below `path` a grant or the limit begins at.
        let below = |p: &str| p.len() > path.len() && at_or_below(p, path);
        let mut starts = self
            .entries
            .iter()
            .filter(|e| !e.deny)
            .map(|e| e.path.as_str())
            .chain(
                self.limit
                    .iter()
                    .flat_map(|(_, ps)| ps.iter().map(String::as_str)),
            );
        self.may(Scope::Read, path) || starts.any(|p| below(p) && self.may(Scope::Read, p))
    }

    /// Whether the caller may read everything at and below `path`, so a
    /// listing there needs no filtering.
    pub fn reads_all_below(&self, path: &str) -> bool {
        let path = path.trim_matches('/');
        self.may(Scope::Read, path)
            && self.inside(path)
            && !self
                .entries
                .iter()
                .any(|e| e.deny && e.scope == Scope::Read && at_or_below(&e.path, path))
    }

    /// The shortest path at or above `path` from which down to `path` the
    /// caller may write: where groups it creates may begin.
    pub fn writes_from(&self, path: &str) -> Option<String> {
        let path = path.trim_matches('/');
        let mut ancestors: Vec<&str> = vec![""];
        ancestors.extend(
            path.match_indices('/')
                .map(|(i, _)| &path[..i])
                .chain((!path.is_empty()).then_some(path)),
        );
        // From `path` up, while writes stay allowed.
        let mut from = None;
        for a in ancestors.iter().rev() {
            if !self.may(Scope::Write, a) {
                break;
            }
            from = Some(a.to_string());
        }
        from
    }
}

/// The configured `[[policy]]` rules.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<(Entry, Vec<Principal>)>,
}

/// Who is asking, as a policy names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Who {
    /// `None`: a caller without credentials.
    pub user: Option<String>,
    pub groups: Vec<String>,
}

impl Policy {
    pub fn new(rules: &[RuleConfig]) -> Result<Policy, AuthConfigError> {
        let rules = rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let bad = |reason: String| AuthConfigError::Policy {
                    index: i + 1,
                    reason,
                };
                let to = Principal::list(&r.to).map_err(bad)?;
                let path = r.path.trim_matches('/');
                if path.split('/').any(|s| s == ".." || s == ".") || path.contains("//") {
                    return Err(bad(format!("path '{}' is not a store path", r.path)));
                }
                let mut entry = Entry::grant(path, r.grant);
                entry.deny = r.deny;
                Ok((entry, to))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Policy { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules that apply to `who`.
    pub fn rights(&self, who: &Who) -> Rights {
        Rights::new(
            self.rules
                .iter()
                .filter(|(_, to)| to.iter().any(|p| p.applies(who)))
                .map(|(e, _)| e.clone())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str, grant: Scope, to: &[&str], deny: bool) -> RuleConfig {
        RuleConfig {
            path: path.into(),
            grant,
            to: to.iter().map(|s| s.to_string()).collect(),
            deny,
        }
    }

    fn who(user: &str, groups: &[&str]) -> Who {
        Who {
            user: Some(user.into()),
            groups: groups.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_most_specific_rule_wins_and_denials_win_ties() {
        let policy = Policy::new(&[
            rule("", Scope::Read, &["authenticated"], false),
            rule("private", Scope::Read, &["authenticated"], true),
            rule("private", Scope::Write, &["group:lab"], false),
            rule("private/embargo", Scope::Read, &["group:lab"], true),
            rule("private/embargo/ok", Scope::Read, &["user:ana"], false),
            rule("public", Scope::Read, &["anonymous"], false),
        ])
        .unwrap();
        let ana = policy.rights(&who("ana", &["lab"]));
        let bob = policy.rights(&who("bob", &["other"]));
        let anon = policy.rights(&Who::default());
        assert!(bob.may(Scope::Read, "era5/t/c/0"));
        assert!(!bob.may(Scope::Read, "private/x"), "denied below the grant");
        assert!(!bob.may(Scope::Read, "private"));
        assert!(!bob.may(Scope::Write, "era5"), "read only");
        // Ana's group grant and the denial to everyone signed in are at
        // the same path: the denial wins for read, and read is below write.
        assert!(!ana.may(Scope::Read, "private/x"));
        assert!(ana.may(Scope::Read, "private/embargo/ok/zarr.json"));
        assert!(!ana.may(Scope::Read, "private/embargo/no"));
        assert!(
            !ana.may(Scope::Write, "privateer"),
            "prefixes are whole segments"
        );
        assert!(ana.may(Scope::Read, "privateer/x"));
        assert!(anon.may(Scope::Read, "public/a"));
        assert!(
            !anon.may(Scope::Read, "era5"),
            "anonymous is not authenticated"
        );
        assert!(!anon.sees("private"));
        assert!(ana.sees("private/embargo"), "the way to what she may read");
        assert!(ana.sees(""));
        assert!(!bob.sees("private"));
        assert!(!bob.reads_all_below(""));
        assert!(bob.reads_all_below("era5"));
    }

    #[test]
    fn write_grants_read_and_a_read_denial_denies_writes() {
        let policy = Policy::new(&[
            rule("a", Scope::Write, &["user:u"], false),
            rule("a/b", Scope::Read, &["user:u"], true),
            rule("a/c", Scope::Write, &["user:u"], true),
        ])
        .unwrap();
        let u = policy.rights(&who("u", &[]));
        assert!(u.may(Scope::Read, "a/x") && u.may(Scope::Write, "a/x"));
        assert!(!u.may(Scope::Admin, "a/x"));
        assert!(!u.may(Scope::Write, "a/b/x"));
        assert!(!u.may(Scope::Read, "a/b/x"));
        assert!(u.may(Scope::Read, "a/c/x") && !u.may(Scope::Write, "a/c/x"));
        assert_eq!(u.writes_from("a/x/y").as_deref(), Some("a"));
        assert!(u.may_all_below(Scope::Write, "a/x"));
        assert!(
            !u.may_all_below(Scope::Write, "a"),
            "a/b and a/c below are denied"
        );
        assert_eq!(u.writes_from("b").as_deref(), None);
    }

    #[test]
    fn bad_rules_are_refused() {
        assert!(Policy::new(&[rule("", Scope::Read, &[], false)]).is_err());
        assert!(Policy::new(&[rule("", Scope::Read, &["everyone"], false)]).is_err());
        assert!(Policy::new(&[rule("", Scope::Read, &["user:"], false)]).is_err());
        assert!(Policy::new(&[rule("../x", Scope::Read, &["anonymous"], false)]).is_err());
    }
}

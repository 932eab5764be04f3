//! Where references point: target URLs resolved against the reference set's
//! own location, checked against the locations the operator allows (by
//! default only the reference set's own folder, so a set cannot make the
//! server read arbitrary files or hosts), and opened once per bucket or host.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use object_store::path::Path;
use object_store::ObjectStore;
use url::Url;

/// Why a target cannot be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TargetError {
    #[error("its target '{url}' is outside the locations this reference set may read ({allowed}); allow it with `targets` in the mount's configuration")]
    Disallowed { url: String, allowed: String },
    #[error("its target '{url}' cannot be read: {reason}")]
    Unusable { url: String, reason: String },
}

/// Resolves and opens targets.
#[derive(Debug)]
pub struct Targets {
    /// Where the reference set lives: relative targets resolve against it.
    base: Url,
    /// URL prefixes targets must start with.
    allowed: Vec<String>,
    /// The allowed local folders with every symbolic link resolved: a
    /// local target's real path must lie in one of them.
    allowed_real: Vec<std::path::PathBuf>,
    /// One store per `scheme://host` (or the local file system).
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

/// A location as a URL: URLs as they are, paths as `file://` URLs.
pub fn location_url(location: &str) -> Result<Url, String> {
    if location.contains("://") {
        return Url::parse(location).map_err(|e| e.to_string());
    }
    let path = std::path::Path::new(location);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join(path)
    };
    Url::from_file_path(&absolute).map_err(|_| format!("'{location}' is not a usable path"))
}

impl Targets {
    /// Targets of the set at `base`, allowed under `allowed` (locations or
    /// URLs); none given: the set's own folder.
    pub fn new(base: Url, allowed: &[String]) -> Result<Self, String> {
        let allowed = if allowed.is_empty() {
            vec![base.join(".").map_err(|e| e.to_string())?.to_string()]
        } else {
            allowed
                .iter()
                .map(|a| {
                    let mut url = location_url(a)?.to_string();
                    // A folder allows what is inside it, not its siblings
                    // that share a name prefix.
                    if !url.ends_with('/') {
                        url.push('/');
                    }
                    Ok(url)
                })
                .collect::<Result<_, String>>()?
        };
        let allowed_real = allowed
            .iter()
            .filter_map(|a| Url::parse(a).ok())
            .filter(|u| u.scheme() == "file")
            .filter_map(|u| u.to_file_path().ok())
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        Ok(Targets {
            base,
            allowed,
            allowed_real,
            stores: Mutex::new(HashMap::new()),
        })
    }

    /// The store and path a target URL (as written in the set) reads.
    pub fn resolve(&self, target: &str) -> Result<(Arc<dyn ObjectStore>, Path), TargetError> {
        let unusable = |reason: String| TargetError::Unusable {
            url: target.to_string(),
            reason,
        };
        // Absolute local paths are written without a scheme by some tools.
        let url = if target.starts_with('/') {
            Url::from_file_path(target).map_err(|_| unusable("not a usable path".into()))?
        } else {
            self.base
                .join(target)
                .map_err(|e| unusable(e.to_string()))?
        };
        // `..` segments are resolved by the URL parser before this check.
        let text = url.to_string();
        if !self.allowed.iter().any(|a| text.starts_with(a.as_str())) {
            return Err(TargetError::Disallowed {
                url: text,
                allowed: self.allowed.join(", "),
            });
        }
        // A symbolic link inside an allowed folder must not lead out of it.
        if url.scheme() == "file" {
            if let Some(real) = url
                .to_file_path()
                .ok()
                .and_then(|p| std::fs::canonicalize(p).ok())
            {
                if !self.allowed_real.iter().any(|a| real.starts_with(a)) {
                    return Err(TargetError::Disallowed {
                        url: format!("{text} (which leads to {})", real.display()),
                        allowed: self.allowed.join(", "),
                    });
                }
            }
        }
        let path = Path::from_url_path(url.path()).map_err(|e| unusable(e.to_string()))?;
        // One store per origin: scheme, credentials, host and port.
        let bucket = url[..url::Position::BeforePath].to_string();
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = stores.get(&bucket) {
            return Ok((store.clone(), path));
        }
        let store =
            super::super::backends::bucket_store(&url).map_err(|e| unusable(e.to_string()))?;
        stores.insert(bucket, store.clone());
        Ok((store, path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_targets_resolve_against_the_set_and_stay_inside_it() {
        let t = Targets::new(Url::parse("file:///data/refs/set.json").unwrap(), &[]).unwrap();
        let (_, p) = t.resolve("a.nc").unwrap();
        assert_eq!(p.as_ref(), "data/refs/a.nc");
        let (_, p) = t.resolve("sub/b.nc").unwrap();
        assert_eq!(p.as_ref(), "data/refs/sub/b.nc");
        for outside in [
            "../secret.nc",
            "/etc/passwd",
            "file:///etc/passwd",
            "http://169.254.169.254/latest",
        ] {
            assert!(
                matches!(t.resolve(outside), Err(TargetError::Disallowed { .. })),
                "{outside}"
            );
        }
    }

    #[test]
    fn symbolic_links_cannot_lead_out_of_the_allowed_folders() {
        let dir = tempfile::tempdir().unwrap();
        let (refs, outside) = (dir.path().join("refs"), dir.path().join("secret.bin"));
        std::fs::create_dir(&refs).unwrap();
        std::fs::write(&outside, b"secret").unwrap();
        std::fs::write(refs.join("data.bin"), b"data").unwrap();
        std::os::unix::fs::symlink(&outside, refs.join("link.bin")).unwrap();
        std::os::unix::fs::symlink(dir.path(), refs.join("up")).unwrap();
        let t = Targets::new(Url::from_file_path(refs.join("set.json")).unwrap(), &[]).unwrap();
        assert!(t.resolve("data.bin").is_ok());
        for link in ["link.bin", "up/secret.bin"] {
            assert!(
                matches!(t.resolve(link), Err(TargetError::Disallowed { .. })),
                "{link}"
            );
        }
    }

    #[test]
    fn http_targets_keep_their_port() {
        let t = Targets::new(
            Url::parse("file:///refs/set.json").unwrap(),
            &[
                "http://127.0.0.1:8102/zarr".into(),
                "http://127.0.0.1:9/zarr".into(),
            ],
        )
        .unwrap();
        t.resolve("http://127.0.0.1:8102/zarr/a").unwrap();
        t.resolve("http://127.0.0.1:9/zarr/a").unwrap();
        let stores = t.stores.lock().unwrap();
        let mut origins: Vec<&String> = stores.keys().collect();
        origins.sort();
        assert_eq!(origins, ["http://127.0.0.1:8102", "http://127.0.0.1:9"]);
    }

    #[test]
    fn allowed_locations_are_folders() {
        let t = Targets::new(
            Url::parse("file:///refs/set.json").unwrap(),
            &["/archive/nc".into(), "s3://bucket/era5".into()],
        )
        .unwrap();
        assert!(t.resolve("/archive/nc/x.nc").is_ok());
        assert!(t.resolve("file:///archive/nc/x.nc").is_ok());
        assert!(matches!(
            t.resolve("/archive/nc2/x.nc"),
            Err(TargetError::Disallowed { .. })
        ));
        assert!(matches!(
            t.resolve("s3://bucket/era5x/a"),
            Err(TargetError::Disallowed { .. })
        ));
        assert!(
            matches!(t.resolve("set.json"), Err(TargetError::Disallowed { .. })),
            "not the set's own folder then"
        );
    }
}

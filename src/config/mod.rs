//! Server configuration, merged as flag > environment (`ZARRD_*`) > config
//! file (TOML) > default. Clap reads flags and the environment; the file
//! fills in whatever neither gave.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::auth::{Auth, TokenConfig};

mod options;

pub use crate::store::source::{mark_served_as_store, Source, STORE_MARKER};
pub use options::{parse_size, with_defaults_in_help, OptionDefault, ServeArgs, OPTIONS};

/// Errors in flags, environment or the config file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("{option}: {reason}")]
    Invalid {
        option: &'static str,
        reason: String,
    },
}

/// A value that must be sent as an HTTP header as given: visible ASCII.
fn header_value(
    option: &'static str,
    value: Option<String>,
) -> Result<Option<String>, ConfigError> {
    match value {
        Some(v) if v.trim().is_empty() || !v.chars().all(|c| c == ' ' || c.is_ascii_graphic()) => {
            Err(invalid(
                option,
                format!("'{v}' is not a header value (visible ASCII, not empty)"),
            ))
        }
        other => Ok(other.map(|v| v.trim().to_string())),
    }
}

fn invalid(option: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        option,
        reason: reason.into(),
    }
}

/// How long cached chunks and metadata are trusted before they are
/// revalidated against the store (TensorStore's `recheck_cached_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recheck {
    /// Trust the cache until zarrd itself changes the value.
    Never,
    /// Revalidate (by ETag) on every use.
    Always,
    /// Revalidate entries older than this.
    After(Duration),
}

impl std::str::FromStr for Recheck {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "never" | "false" => Ok(Recheck::Never),
            "always" | "true" => Ok(Recheck::Always),
            secs => secs
                .parse::<f64>()
                .ok()
                .filter(|s| *s >= 0.0)
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .map(Recheck::After)
                .ok_or_else(|| format!("'{s}' is not never, always or a number of seconds")),
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("'{other}' is not text or json")),
        }
    }
}

/// A timeout given in seconds, which must be positive (or, with
/// `zero_ok`, may be zero).
fn seconds(
    option: &'static str,
    given: Option<f64>,
    zero_ok: bool,
) -> Result<Duration, ConfigError> {
    match declared(option, given)? {
        s if s.is_finite() && (s > 0.0 || (zero_ok && s == 0.0)) && s < 1e9 => {
            Ok(Duration::from_secs_f64(s))
        }
        s => Err(invalid(
            option,
            format!("{s} is not a positive number of seconds"),
        )),
    }
}

/// The value of an option that has a declared default.
fn declared<T>(option: &'static str, value: Option<T>) -> Result<T, ConfigError> {
    value.ok_or_else(|| invalid(option, "has no value and no default"))
}

/// A mount in the config file: a URL, `{ url = "...", read_only = true }`,
/// `{ references = "...", targets = [...] }`, or `{ icechunk = "...",
/// virtual_chunks = [...], read_only = true }` (writes to its branches
/// become commits unless read-only); each table may set `cache_control`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum MountSpec {
    Url(String),
    Full {
        url: String,
        #[serde(default)]
        read_only: bool,
        cache_control: Option<String>,
    },
    References {
        references: String,
        #[serde(default)]
        targets: Vec<String>,
        cache_control: Option<String>,
    },
    Icechunk {
        icechunk: String,
        /// URL prefixes or folders of the virtual chunk containers to read.
        #[serde(default)]
        virtual_chunks: Vec<String>,
        #[serde(default)]
        read_only: bool,
        cache_control: Option<String>,
    },
}

/// The default `--memory-budget`: half the memory the process may use, which is the
/// container's limit (cgroup v2 `memory.max`, or v1's
/// `memory.limit_in_bytes`) when there is one, else the machine's memory;
/// less the decoded-chunk cache, which is bounded on its own.
pub fn default_memory_budget(cache_size: u64) -> u64 {
    // Read once: services are also made per transaction.
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let limit = *LIMIT.get_or_init(|| memory_limit().unwrap_or(4 << 30));
    (limit / 2).saturating_sub(cache_size)
}

/// The memory this process may use: its cgroup's limit, else the machine's.
pub fn memory_limit() -> Option<u64> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let cgroup = read("/sys/fs/cgroup/memory.max")
        .or_else(|| read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        .and_then(|s| s.trim().parse::<u64>().ok());
    let machine = read("/proc/meminfo").and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
    });
    // An unlimited cgroup v1 reports a huge number: the machine bounds it.
    match (cgroup, machine) {
        (Some(c), Some(m)) => Some(c.min(m)),
        (c, m) => c.or(m),
    }
}

/// A store served under a top-level name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub name: String,
    pub source: Source,
    pub read_only: bool,
    /// Cache-Control of its stored values; `None`: the root's.
    pub cache_control: Option<String>,
}

/// Cross-origin access for browsers (`[cors]` in the config file).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cors {
    /// Allowed origins; `*` allows any.
    pub origins: Vec<String>,
    /// Allowed methods.
    pub methods: Vec<String>,
    /// Request headers allowed beyond the defaults (Range, If-*, Authorization, Content-Type, Accept).
    pub headers: Vec<String>,
    /// Response headers exposed beyond the defaults (Content-Range, Content-Length, ETag, X-Zarr-*, ...).
    pub expose: Vec<String>,
    /// Origins whose pages may send the viewer's session cookie
    /// (`credentials: "include"`): answered with their own origin and
    /// `Access-Control-Allow-Credentials: true`. Pages of other origins are
    /// never answered as the session's user.
    pub credentials: Vec<String>,
}

impl Default for Cors {
    fn default() -> Self {
        Cors {
            origins: vec!["*".into()],
            methods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
                .map(String::from)
                .to_vec(),
            headers: vec![],
            expose: vec![],
            credentials: vec![],
        }
    }
}

/// `[cors] credentials`: origins exactly as browsers send them
/// (`https://viewer.example.org`: scheme, host and any port; no path, no
/// `*`), or a browser's `Origin` would never match them.
fn credential_origins(origins: Vec<String>) -> Result<Vec<String>, ConfigError> {
    for origin in &origins {
        let exact = url::Url::parse(origin)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .map(|u| u.origin().ascii_serialization());
        if exact.as_deref() != Some(origin.as_str()) {
            return Err(invalid(
                "cors.credentials",
                format!("'{origin}' is not an origin as browsers send it (like https://viewer.example.org: lower case, no path, no '*')"),
            ));
        }
    }
    Ok(origins)
}

/// Tokens from the config file plus a tokens file, validated.
fn load_tokens(
    mut tokens: Vec<TokenConfig>,
    file: Option<&std::path::Path>,
) -> Result<Vec<TokenConfig>, ConfigError> {
    if let Some(path) = file {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct TokensFile {
            tokens: Vec<TokenConfig>,
        }
        let fail = |reason: String| ConfigError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let parsed: TokensFile = toml::from_str(&text).map_err(|e| fail(e.to_string()))?;
        tokens.extend(parsed.tokens);
    }
    Auth::new(&tokens, None, None, false).map_err(|e| invalid("tokens", e.to_string()))?;
    Ok(tokens)
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub root: String,
    pub listen: SocketAddr,
    pub demo: bool,
    pub cache_size: u64,
    /// Bytes answers may reserve at once (see `service::Budget`).
    pub memory_budget: u64,
    pub recheck_cached: Recheck,
    pub json_limit: u64,
    pub response_limit: u64,
    pub log_format: LogFormat,
    pub read_only: bool,
    pub allow_anonymous_writes: bool,
    pub max_body_size: u64,
    /// Largest request target plus headers (431 beyond it).
    pub max_header_bytes: u64,
    /// `None`: open when no tokens are configured, closed otherwise.
    pub allow_anonymous_reads: Option<bool>,
    /// Tokens from the config file and the tokens file, checked at start-up.
    pub tokens: Vec<TokenConfig>,
    /// `[[oidc]]`, `[[policy]]` and `[[fair_use]]`.
    pub identities: crate::auth::Identities,
    pub max_concurrency: usize,
    pub request_timeout: Duration,
    pub shutdown_timeout: Duration,
    /// Deadline for a request's headers, and for an idle connection.
    pub header_timeout: Duration,
    /// Longest pause within a request body.
    pub body_timeout: Duration,
    /// Most pixels one image may have (422 beyond).
    pub max_image_pixels: u64,
    /// Where the viewer's page files are read from, when not the built-in copy.
    pub viewer_dir: Option<std::path::PathBuf>,
    /// v3 groups' `zarr.json` served with consolidated metadata added.
    pub consolidated_v3: bool,
    /// `.zmetadata` built for v2 groups that store none.
    pub consolidated_v2: bool,
    /// Raw writes of metadata documents are checked before they are stored.
    pub check_documents: bool,
    /// Cache-Control of stored values at the root (and mounts without one).
    pub cache_control: String,
    /// Certificate chain and key: HTTPS instead of HTTP.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// The URL browsers reach the server by, for sign-in redirects; `None`:
    /// each request's own host.
    pub public_url: Option<String>,
    pub cors: Cors,
    /// Stores mounted under top-level names.
    pub mounts: Vec<Mount>,
    /// Where the targets of a reference set given as ROOT may lie.
    pub reference_targets: Vec<String>,
}

impl Default for Config {
    /// Every option at its declared default (a test holds them valid).
    fn default() -> Self {
        Config::resolve(ServeArgs::default())
            .unwrap_or_else(|e| panic!("the declared defaults are invalid: {e}"))
    }
}

impl Config {
    /// Merge flags and environment (in `args`) over the config file over defaults.
    pub fn resolve(args: ServeArgs) -> Result<Config, ConfigError> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                toml::from_str::<ServeArgs>(&text).map_err(|e| ConfigError::File {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?
            }
            None => ServeArgs::default(),
        };
        let o = args.over(file).or_defaults()?;
        let cache_size = declared("cache_size", o.cache_size)?;
        let demo = o.demo.unwrap_or(false);
        // Turned off they agree with any policy (a chart sets them either way).
        let anonymous_flags =
            o.allow_anonymous_writes == Some(true) || o.allow_anonymous_reads == Some(true);
        if !o.policy.is_empty() && anonymous_flags {
            return Err(invalid(
                "policy",
                "with [[policy]] tables, what anonymous callers may do is theirs to say (to = [\"anonymous\"]), not --allow-anonymous-reads or --allow-anonymous-writes",
            ));
        }
        let tokens = load_tokens(o.tokens, o.tokens_file.as_deref())?;
        let identities = crate::auth::Identities {
            oidc: o.oidc,
            policy: o.policy,
            fair_use: o.fair_use,
        };
        Auth::with_identities(&tokens, None, None, false, &identities)
            .map_err(|e| invalid("policy", e.to_string()))?;
        Ok(Config {
            root: declared("root", o.root)?,
            listen: declared("listen", o.listen)?,
            demo,
            cache_size,
            memory_budget: o
                .memory_budget
                .unwrap_or_else(|| default_memory_budget(cache_size)),
            recheck_cached: declared("recheck_cached", o.recheck_cached)?,
            json_limit: declared("json_limit", o.json_limit)?,
            response_limit: declared("response_limit", o.response_limit)?,
            log_format: declared("log_format", o.log_format)?,
            read_only: o.read_only.unwrap_or(false),
            // The demo store is in memory and disposable: it takes writes.
            allow_anonymous_writes: o.allow_anonymous_writes.unwrap_or(false) || demo,
            max_body_size: declared("max_body_size", o.max_body_size)?,
            max_header_bytes: declared("max_header_bytes", o.max_header_bytes)?,
            allow_anonymous_reads: o.allow_anonymous_reads,
            tokens,
            identities,
            max_concurrency: declared("max_concurrency", o.max_concurrency)?.max(1),
            request_timeout: seconds("request_timeout", o.request_timeout, false)?,
            shutdown_timeout: seconds("shutdown_timeout", o.shutdown_timeout, true)?,
            header_timeout: seconds("header_timeout", o.header_timeout, false)?,
            body_timeout: seconds("body_timeout", o.body_timeout, false)?,
            max_image_pixels: declared("max_image_pixels", o.max_image_pixels)?,
            viewer_dir: o.viewer_dir,
            consolidated_v3: declared("consolidated_v3", o.consolidated_v3)?,
            consolidated_v2: declared("consolidated_v2", o.consolidated_v2)?,
            check_documents: declared("check_documents", o.check_documents)?,
            cache_control: declared(
                "cache_control",
                header_value("cache_control", o.cache_control)?,
            )?,
            tls_cert: o.tls_cert.clone(),
            tls_key: match (&o.tls_cert, o.tls_key) {
                (Some(_), Some(key)) => Some(key),
                (None, None) => None,
                _ => return Err(invalid("tls_cert", "--tls-cert and --tls-key go together")),
            },
            public_url: match o.public_url {
                None => None,
                Some(u) => match url::Url::parse(&u) {
                    Ok(url)
                        if matches!(url.scheme(), "http" | "https")
                            && url.has_host()
                            && url.path() == "/"
                            && url.query().is_none() =>
                    {
                        Some(url.origin().ascii_serialization())
                    }
                    _ => {
                        return Err(invalid(
                            "public_url",
                            format!("'{u}' is not an http(s) URL of a host, without a path (zarrd is served at its host's root)"),
                        ))
                    }
                },
            },
            cors: Cors {
                origins: o.cors_origins.unwrap_or(o.cors.origins),
                credentials: credential_origins(o.cors.credentials)?,
                ..o.cors
            },
            mounts: o
                .mounts
                .into_iter()
                .map(|(name, spec)| {
                    let (source, read_only, cache_control) = match spec {
                        MountSpec::Url(url) => (Source::Store(url), false, None),
                        MountSpec::Full {
                            url,
                            read_only,
                            cache_control,
                        } => (Source::Store(url), read_only, cache_control),
                        MountSpec::References {
                            references,
                            targets,
                            cache_control,
                        } => (
                            Source::References {
                                url: references,
                                targets,
                            },
                            true,
                            cache_control,
                        ),
                        MountSpec::Icechunk {
                            icechunk,
                            virtual_chunks,
                            read_only,
                            cache_control,
                        } => (
                            Source::Icechunk {
                                url: icechunk,
                                virtual_chunks,
                            },
                            read_only,
                            cache_control,
                        ),
                    };
                    Ok(Mount {
                        name,
                        source,
                        read_only,
                        cache_control: header_value("mounts.cache_control", cache_control)?,
                    })
                })
                .collect::<Result<_, ConfigError>>()?,
            reference_targets: o.reference_targets.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5 parsecs").is_err());
    }

    /// The README's option table names every option, its variable and
    /// file key, with the default `options!` declares: one declaration,
    /// and a test that the documentation says what it says.
    #[test]
    fn the_readme_names_every_option_with_its_default() {
        use clap::Args;
        let readme = include_str!("../../README.md");
        let rows: Vec<Vec<&str>> = readme
            .lines()
            .filter(|l| l.starts_with("| "))
            .map(|l| l.split('|').map(str::trim).collect())
            .filter(|cells: &Vec<&str>| cells.len() >= 6)
            .collect();
        let command = ServeArgs::augment_args(clap::Command::new("zarrd"));
        // Options the file does not take under their own name.
        let not_in_file = ["config", "cors_origins"];
        for option in OPTIONS {
            let arg = command
                .get_arguments()
                .find(|a| a.get_id() == option.key)
                .unwrap_or_else(|| panic!("{} is no flag", option.key));
            let flag = arg
                .get_long()
                .map_or("ROOT".to_string(), |l| format!("--{l}"));
            let env = arg.get_env().and_then(|e| e.to_str()).unwrap_or("");
            assert!(env.starts_with("ZARRD_"), "{flag}: {env}");
            let default = if option.parsed {
                format!("`{}`", option.default)
            } else {
                option.default.to_string()
            };
            let row = rows
                .iter()
                .find(|r| r[1].contains(&format!("`{flag}")))
                .unwrap_or_else(|| panic!("README's option table has no row for {flag}"));
            assert!(row[2].contains(&format!("`{env}`")), "{flag}: {row:?}");
            if !not_in_file.contains(&option.key) {
                assert!(
                    row[3].contains(&format!("`{}`", option.key)),
                    "{flag}: {row:?}"
                );
            }
            assert_eq!(row[4], default, "the default of {flag} in README.md");
        }
    }

    /// Every flag takes its values as its file key does: sizes with units,
    /// seconds, booleans after `=`.
    #[test]
    fn flags_take_values_with_their_units() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let cli = Cli::try_parse_from([
            "zarrd",
            "--memory-budget",
            "1GiB",
            "--cache-size",
            "64MiB",
            "--json-limit",
            "1MB",
            "--response-limit",
            "2GiB",
            "--max-body-size",
            "1KiB",
            "--max-header-bytes",
            "8KiB",
            "--body-timeout",
            "5",
            "--read-only=false",
            "--demo",
            "/data",
        ])
        .unwrap();
        let c = Config::resolve(cli.serve).unwrap();
        assert_eq!(
            (
                c.memory_budget,
                c.cache_size,
                c.json_limit,
                c.response_limit
            ),
            (1 << 30, 64 << 20, 1_000_000, 2 << 30)
        );
        assert_eq!((c.max_body_size, c.max_header_bytes), (1 << 10, 8 << 10));
        assert_eq!(c.body_timeout, Duration::from_secs(5));
        assert!(c.demo && !c.read_only);
        assert_eq!(c.root, "/data");
        // Every boolean takes the same spellings.
        let cli = Cli::try_parse_from([
            "zarrd",
            "--read-only=yes",
            "--consolidated-v3=0",
            "--check-documents=off",
            "--allow-anonymous-reads=1",
        ])
        .unwrap();
        let c = Config::resolve(cli.serve).unwrap();
        assert!(c.read_only && !c.consolidated_v3 && !c.check_documents);
        assert_eq!(c.allow_anonymous_reads, Some(true));
        assert!(Cli::try_parse_from(["zarrd", "--demo=maybe"]).is_err());
    }

    #[test]
    fn the_declared_defaults_are_valid() {
        let c = Config::resolve(ServeArgs::default()).unwrap();
        assert_eq!(c.cache_size, 512 << 20);
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 8000)));
        assert_eq!(c.request_timeout, Duration::from_secs(300));
        assert_eq!(c.max_image_pixels, 1 << 24);
        assert!(c.consolidated_v3 && c.check_documents && !c.read_only && !c.demo);
        assert_eq!(c.cache_control, "no-cache");
    }

    #[test]
    fn recheck_values() {
        assert_eq!("never".parse::<Recheck>().unwrap(), Recheck::Never);
        assert_eq!(
            "2.5".parse::<Recheck>().unwrap(),
            Recheck::After(Duration::from_millis(2500))
        );
        assert!("-1".parse::<Recheck>().is_err());
        assert!(
            "1e300".parse::<Recheck>().is_err(),
            "past what a duration holds"
        );
        assert!("NaN".parse::<Recheck>().is_err());
    }

    #[test]
    fn a_bare_flag_does_not_take_the_root() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let cli = Cli::try_parse_from(["zarrd", "--allow-anonymous-reads", "/data"]).unwrap();
        assert_eq!(cli.serve.allow_anonymous_reads, Some(true));
        assert_eq!(cli.serve.root.as_deref(), Some("/data"));
        let cli = Cli::try_parse_from(["zarrd", "--allow-anonymous-reads=false"]).unwrap();
        assert_eq!(cli.serve.allow_anonymous_reads, Some(false));
    }

    #[test]
    fn flags_beat_file_beats_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zarrd.toml");
        std::fs::write(&path, "root = \"/srv/zarr\"\nlisten = \"0.0.0.0:9000\"\ncache_size = \"1GiB\"\nrecheck_cached = 30\n").unwrap();
        let args = ServeArgs {
            config: Some(path.clone()),
            listen: Some("127.0.0.1:1234".parse().unwrap()),
            ..Default::default()
        };
        let c = Config::resolve(args).unwrap();
        assert_eq!(c.root, "/srv/zarr");
        assert_eq!(c.listen.port(), 1234);
        assert_eq!(c.cache_size, 1 << 30);
        assert_eq!(c.recheck_cached, Recheck::After(Duration::from_secs(30)));
        assert_eq!(c.json_limit, 64 << 20);
        std::fs::write(&path, "[mounts]\nera5 = \"memory://\"\nscratch = { url = \"file:///tmp/x\", read_only = true }\nnc = { references = \"s3://b/refs.json\", targets = [\"s3://b/nc/\"] }\nrepo = { icechunk = \"s3://b/repo\", virtual_chunks = [\"s3://b/nc/\"] }\nfrozen = { icechunk = \"/r\", read_only = true }\n").unwrap();
        let c = Config::resolve(ServeArgs {
            config: Some(path.clone()),
            ..Default::default()
        })
        .unwrap();
        let mount = |name: &str, source: Source, read_only| Mount {
            name: name.into(),
            source,
            read_only,
            cache_control: None,
        };
        assert_eq!(
            c.mounts,
            vec![
                mount("era5", Source::Store("memory://".into()), false),
                mount(
                    "frozen",
                    Source::Icechunk {
                        url: "/r".into(),
                        virtual_chunks: vec![]
                    },
                    true
                ),
                mount(
                    "nc",
                    Source::References {
                        url: "s3://b/refs.json".into(),
                        targets: vec!["s3://b/nc/".into()]
                    },
                    true
                ),
                mount(
                    "repo",
                    Source::Icechunk {
                        url: "s3://b/repo".into(),
                        virtual_chunks: vec!["s3://b/nc/".into()]
                    },
                    false
                ),
                mount("scratch", Source::Store("file:///tmp/x".into()), true),
            ]
        );
        std::fs::write(&path, "cache_control = \"public, max-age=60\"\n[mounts]\na = { url = \"memory://\", cache_control = \"max-age=5\" }\n").unwrap();
        let c = Config::resolve(ServeArgs {
            config: Some(path.clone()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.cache_control, "public, max-age=60");
        assert_eq!(c.mounts[0].cache_control.as_deref(), Some("max-age=5"));
        let bad = Config::resolve(ServeArgs {
            cache_control: Some("max-age=\u{7f}1".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(bad.to_string().starts_with("cache_control:"), "{bad}");
        assert_eq!(
            Source::root("/data/refs.JSON", &[]),
            Source::References {
                url: "/data/refs.JSON".into(),
                targets: vec![]
            }
        );
        assert_eq!(
            Source::root("/data/zarr", &[]),
            Source::Store("/data/zarr".into())
        );
        std::fs::write(&path, "cache_sise = 1\n").unwrap();
        let err = Config::resolve(ServeArgs {
            config: Some(path),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("cache_sise"), "{err}");
    }

    #[test]
    fn folders_clients_create_never_turn_a_served_store_into_a_repository() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap().to_string();
        let icechunk = || Source::Icechunk {
            url: root.clone(),
            virtual_chunks: vec![],
        };
        assert_eq!(Source::root(&root, &[]), Source::Store(root.clone()));
        mark_served_as_store(&root);
        // Groups named `refs` and `snapshots`, as a client may write them.
        for group in ["refs", "snapshots"] {
            std::fs::create_dir(dir.path().join(group)).unwrap();
            std::fs::write(dir.path().join(group).join(".zgroup"), "{}").unwrap();
        }
        assert_eq!(Source::root(&root, &[]), Source::Store(root.clone()));
        // A repository zarrd never served as a store is still found.
        std::fs::remove_file(dir.path().join(STORE_MARKER)).unwrap();
        assert_eq!(Source::root(&root, &[]), icechunk());
        // And marking it again is refused for what it is not: only a
        // directory is marked.
        mark_served_as_store(&format!("{root}/refs/.zgroup"));
        assert!(!dir.path().join("refs/.zgroup/__zarrd").exists());
    }

    #[test]
    fn oidc_and_policy_tables_are_read_in_their_documented_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zarrd.toml");
        std::fs::write(
            &path,
            r#"
[[oidc]]
issuer = "https://login.example.org/realms/science"
audience = "zarrd"
groups_claim = "realm_access.roles"

[[policy]]
path = ""
grant = "read"
to = ["authenticated"]

[[policy]]
path = "embargoed"
grant = "read"
to = ["group:public-users", "anonymous"]
deny = true
"#,
        )
        .unwrap();
        let file = |extra: ServeArgs| {
            Config::resolve(ServeArgs {
                config: Some(path.clone()),
                ..extra
            })
        };
        let c = file(ServeArgs::default()).unwrap();
        assert_eq!(c.identities.oidc[0].groups_claim, "realm_access.roles");
        assert_eq!(c.identities.oidc[0].user_claim, "sub", "the default");
        assert_eq!(c.identities.policy.len(), 2);
        assert!(c.identities.policy[1].deny && c.identities.policy[0].path.is_empty());
        let both = file(ServeArgs {
            allow_anonymous_reads: Some(true),
            ..Default::default()
        });
        assert!(both.unwrap_err().to_string().contains("anonymous"));
        std::fs::write(
            &path,
            "[[policy]]\npath = \"a\"\ngrant = \"read\"\nto = [\"everyone\"]\n",
        )
        .unwrap();
        let bad = file(ServeArgs::default()).unwrap_err().to_string();
        assert!(bad.contains("'everyone'"), "{bad}");
        std::fs::write(
            &path,
            "[[oidc]]\nissuer = \"https://id.example\"\naudience = \"z\"\n",
        )
        .unwrap();
        let lonely = file(ServeArgs::default()).unwrap_err().to_string();
        assert!(lonely.contains("[[policy]]"), "{lonely}");
    }
}

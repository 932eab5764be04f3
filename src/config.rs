//! Server configuration, merged as flag > environment (`ZARRD_*`) > config
//! file (TOML) > default. Clap reads flags and the environment; the file
//! fills in whatever neither gave.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::auth::{Auth, TokenConfig};

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
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(|s| Recheck::After(Duration::from_secs_f64(s)))
                .ok_or_else(|| format!("'{s}' is not never, always or a number of seconds")),
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// Parse `512MiB`, `2GB`, `1048576`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size like 512MiB"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        other => return Err(format!("unknown size unit '{other}' in '{s}'")),
    };
    Ok((value * scale as f64) as u64)
}

/// `zarrd serve`'s options, declared once: each is a flag and a `ZARRD_*`
/// variable (clap) and a key of the TOML config file (serde, same name).
/// [`Config::resolve`] merges flag > variable > file > default.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeArgs {
    /// Directory or store URL (file://, memory://) to serve [default: ./data]
    #[arg(env = "ZARRD_ROOT")]
    pub root: Option<String>,
    /// Address to listen on [default: 127.0.0.1:8000]
    #[arg(long, env = "ZARRD_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Serve an in-memory example hierarchy instead of ROOT
    #[arg(long, env = "ZARRD_DEMO")]
    pub demo: bool,
    /// TOML config file (flags and ZARRD_* variables override it)
    #[arg(long, env = "ZARRD_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Bytes of decoded chunks to cache, e.g. 512MiB [default: 512MiB]
    #[arg(long, env = "ZARRD_CACHE_SIZE", value_parser = parse_size)]
    #[serde(deserialize_with = "file::size")]
    pub cache_size: Option<u64>,
    /// Memory the answers that grow with a request (selections, images,
    /// thumbnails, consolidated metadata, request bodies) may hold at once,
    /// e.g. 2GiB, at least 256MiB; past it requests wait a second, then get
    /// 503 [default: half the container's memory limit (else the
    /// machine's) less --cache-size]
    #[arg(long, env = "ZARRD_MEMORY_BUDGET", value_parser = parse_size)]
    #[serde(deserialize_with = "file::size")]
    pub memory_budget: Option<u64>,
    /// Revalidate cached data: never, always, or after N seconds [default: always]
    #[arg(long, env = "ZARRD_RECHECK_CACHED")]
    #[serde(deserialize_with = "file::parsed")]
    pub recheck_cached: Option<Recheck>,
    /// Largest JSON data response, and largest variable-length one in any format, e.g. 64MiB [default: 64MiB]
    #[arg(long, env = "ZARRD_JSON_LIMIT", value_parser = parse_size)]
    #[serde(deserialize_with = "file::size")]
    pub json_limit: Option<u64>,
    /// Largest data response of any format [default: 16GiB]
    #[arg(long, env = "ZARRD_RESPONSE_LIMIT", value_parser = parse_size)]
    #[serde(deserialize_with = "file::size")]
    pub response_limit: Option<u64>,
    /// Log format [default: text]
    #[arg(long, env = "ZARRD_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Refuse every write (PUT, PATCH, DELETE, POST append)
    #[arg(long, env = "ZARRD_READ_ONLY")]
    pub read_only: bool,
    /// Accept writes from clients without credentials
    #[arg(long, env = "ZARRD_ALLOW_ANONYMOUS_WRITES")]
    pub allow_anonymous_writes: bool,
    /// Largest request body, e.g. 256MiB [default: 256MiB]
    #[arg(long, env = "ZARRD_MAX_BODY_SIZE", value_parser = parse_size)]
    #[serde(deserialize_with = "file::size")]
    pub max_body_size: Option<u64>,
    /// Largest request line and headers together, e.g. 64KiB [default: 64KiB]
    #[arg(long, env = "ZARRD_MAX_HEADER_BYTES", value_parser = parse_size)]
    #[serde(deserialize_with = "file::size")]
    pub max_header_bytes: Option<u64>,
    /// TOML file of bearer tokens ([[tokens]] with token or token_sha256, scopes, prefixes)
    #[arg(long, env = "ZARRD_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Accept reads without a token even when tokens are configured
    // A value only as `--allow-anonymous-reads=false`, so a bare flag never
    // takes the ROOT that follows it.
    #[arg(long, env = "ZARRD_ALLOW_ANONYMOUS_READS", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub allow_anonymous_reads: Option<bool>,
    /// Requests served at once before new ones get 503 [default: 1024]
    #[arg(long, env = "ZARRD_MAX_CONCURRENCY")]
    pub max_concurrency: Option<usize>,
    /// Seconds a request may take to start its response (504 after) [default: 300]
    #[arg(long, env = "ZARRD_REQUEST_TIMEOUT")]
    #[serde(deserialize_with = "file::parsed")]
    pub request_timeout: Option<f64>,
    /// Origins browsers may read from, comma-separated, `*` for any [default: *]
    #[arg(long, env = "ZARRD_CORS_ORIGINS", value_delimiter = ',')]
    #[serde(skip)]
    pub cors_origins: Option<Vec<String>>,
    /// Seconds in-flight requests get to finish after SIGTERM [default: 30]
    #[arg(long, env = "ZARRD_SHUTDOWN_TIMEOUT")]
    #[serde(deserialize_with = "file::parsed")]
    pub shutdown_timeout: Option<f64>,
    /// Seconds a client has to send a request's headers; also how long an
    /// idle keep-alive connection stays open [default: 30]
    #[arg(long, env = "ZARRD_HEADER_TIMEOUT")]
    #[serde(deserialize_with = "file::parsed")]
    pub header_timeout: Option<f64>,
    /// Seconds a request body may stall (408), or a client stop reading a response [default: 30]
    #[arg(long, env = "ZARRD_BODY_TIMEOUT")]
    #[serde(deserialize_with = "file::parsed")]
    pub body_timeout: Option<f64>,
    /// Most pixels one image (format=png) may have [default: 16777216]
    #[arg(long, env = "ZARRD_MAX_IMAGE_PIXELS")]
    pub max_image_pixels: Option<u64>,
    /// Where the targets of a reference set given as ROOT (a `.json` file)
    /// may lie, or the virtual chunks of an Icechunk repository given as ROOT,
    /// comma-separated folders or URL prefixes [default: the set's folder; no virtual chunks]
    #[arg(long, env = "ZARRD_REFERENCE_TARGETS", value_delimiter = ',')]
    pub reference_targets: Option<Vec<String>>,
    /// Serve the web viewer's page files from this directory instead of the
    /// copy built into the binary, read on every request (for working on the viewer)
    #[arg(long, env = "ZARRD_VIEWER_DIR")]
    pub viewer_dir: Option<std::path::PathBuf>,
    /// Serve a Zarr v3 group's zarr.json that stores no consolidated_metadata
    /// with it added, describing the hierarchy below (`=false` serves stored bytes) [default: true]
    // A value only as `--consolidated-v3=false`, so a bare flag never takes
    // the ROOT that follows it.
    #[arg(long, env = "ZARRD_CONSOLIDATED_V3", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub consolidated_v3: Option<bool>,
    /// Check that metadata documents written as raw keys (`zarr.json`,
    /// `.zarray`, `.zgroup`, `.zattrs`, `.zmetadata`) are what their names say
    /// before storing them (`=false` stores any bytes, for trusted writers
    /// using zarrd as a plain key-value store) [default: true]
    #[arg(long, env = "ZARRD_CHECK_DOCUMENTS", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub check_documents: Option<bool>,
    /// Answer `.zmetadata` of a Zarr v2 group that stores none with one built
    /// from the hierarchy below (`=false`: 404, the group as stored) [default: true]
    #[arg(long, env = "ZARRD_CONSOLIDATED_V2", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub consolidated_v2: Option<bool>,
    /// PEM certificate chain (leaf first): serve HTTPS, HTTP/2 and HTTP/1.1 by ALPN (needs --tls-key)
    #[arg(long, env = "ZARRD_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1)
    #[arg(long, env = "ZARRD_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Cache-Control of stored values under /zarr/ (mounts may set their
    /// own), e.g. "public, max-age=600"; values read at an Icechunk
    /// snapshot id are always immutable [default: no-cache]
    #[arg(long, env = "ZARRD_CACHE_CONTROL")]
    pub cache_control: Option<String>,
    /// `[cors]` in the file (origins also from --cors-origins).
    #[arg(skip)]
    pub cors: Cors,
    /// `[mounts]` in the file.
    #[arg(skip)]
    pub mounts: std::collections::BTreeMap<String, MountSpec>,
    /// `[[tokens]]` in the file.
    #[arg(skip)]
    pub tokens: Vec<TokenConfig>,
}

/// How the file's values become options: sizes as numbers or strings like
/// "512MiB", everything else as a TOML value or a string that parses.
mod file {
    use serde::de::{Deserializer, Error};
    use serde::Deserialize;

    pub fn size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match toml::Value::deserialize(d)? {
            toml::Value::Integer(n) if n >= 0 => Ok(Some(n as u64)),
            toml::Value::Float(f) if f >= 0.0 => Ok(Some(f as u64)),
            toml::Value::String(s) => super::parse_size(&s).map(Some).map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "{other} is not a size like 512MiB"
            ))),
        }
    }

    pub fn parsed<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        let text = match toml::Value::deserialize(d)? {
            toml::Value::String(s) => s,
            other => other.to_string(),
        };
        text.parse()
            .map(Some)
            .map_err(|e| D::Error::custom(format!("'{text}': {e}")))
    }
}

impl ServeArgs {
    /// These options (flags and variables) over the file's.
    fn over(self, file: ServeArgs) -> ServeArgs {
        ServeArgs {
            root: self.root.or(file.root),
            listen: self.listen.or(file.listen),
            demo: self.demo || file.demo,
            config: self.config,
            cache_size: self.cache_size.or(file.cache_size),
            memory_budget: self.memory_budget.or(file.memory_budget),
            recheck_cached: self.recheck_cached.or(file.recheck_cached),
            json_limit: self.json_limit.or(file.json_limit),
            response_limit: self.response_limit.or(file.response_limit),
            log_format: self.log_format.or(file.log_format),
            read_only: self.read_only || file.read_only,
            allow_anonymous_writes: self.allow_anonymous_writes || file.allow_anonymous_writes,
            max_body_size: self.max_body_size.or(file.max_body_size),
            max_header_bytes: self.max_header_bytes.or(file.max_header_bytes),
            tokens_file: self.tokens_file.or(file.tokens_file),
            allow_anonymous_reads: self.allow_anonymous_reads.or(file.allow_anonymous_reads),
            max_concurrency: self.max_concurrency.or(file.max_concurrency),
            request_timeout: self.request_timeout.or(file.request_timeout),
            cors_origins: self.cors_origins,
            shutdown_timeout: self.shutdown_timeout.or(file.shutdown_timeout),
            header_timeout: self.header_timeout.or(file.header_timeout),
            body_timeout: self.body_timeout.or(file.body_timeout),
            max_image_pixels: self.max_image_pixels.or(file.max_image_pixels),
            viewer_dir: self.viewer_dir.or(file.viewer_dir),
            consolidated_v3: self.consolidated_v3.or(file.consolidated_v3),
            consolidated_v2: self.consolidated_v2.or(file.consolidated_v2),
            check_documents: self.check_documents.or(file.check_documents),
            cache_control: self.cache_control.or(file.cache_control),
            tls_cert: self.tls_cert.or(file.tls_cert),
            tls_key: self.tls_key.or(file.tls_key),
            reference_targets: self.reference_targets.or(file.reference_targets),
            cors: file.cors,
            mounts: file.mounts,
            tokens: file.tokens,
        }
    }
}

/// A timeout given in seconds, which must be positive (or, with
/// `zero_ok`, may be zero).
fn seconds(
    option: &'static str,
    given: Option<f64>,
    default: Duration,
    zero_ok: bool,
) -> Result<Duration, ConfigError> {
    match given {
        Some(s) if s.is_finite() && (s > 0.0 || (zero_ok && s == 0.0)) && s < 1e9 => {
            Ok(Duration::from_secs_f64(s))
        }
        Some(s) => Err(invalid(
            option,
            format!("{s} is not a positive number of seconds"),
        )),
        None => Ok(default),
    }
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

/// What a root or a mount serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A directory, or a store URL.
    Store(String),
    /// A kerchunk reference set (virtual Zarr), whose targets may lie
    /// under `targets` (none: the set's own folder).
    References { url: String, targets: Vec<String> },
    /// An Icechunk repository (versioned Zarr), whose virtual chunks are
    /// read from its declared containers under `virtual_chunks` only.
    Icechunk {
        url: String,
        virtual_chunks: Vec<String>,
    },
}

impl Source {
    /// A ROOT as given: a reference set when it names a `.json` file or a
    /// `.parq` folder, an Icechunk repository when it names a directory
    /// holding one (its `refs` and `snapshots` folders).
    pub fn root(location: &str, targets: &[String]) -> Source {
        let dir = std::path::Path::new(location.strip_prefix("file://").unwrap_or(location));
        // Clients of a writable directory can create folders of any name,
        // `refs` and `snapshots` included: a directory once served as a
        // store says so where no client can write, and stays one.
        let served_as_store = dir.join(STORE_MARKER).is_file();
        if !served_as_store && dir.join("refs").is_dir() && dir.join("snapshots").is_dir() {
            return Source::Icechunk {
                url: location.to_string(),
                virtual_chunks: targets.to_vec(),
            };
        }
        let path = location.split(['?', '#']).next().unwrap_or(location);
        let path = path.trim_end_matches('/').to_ascii_lowercase();
        if path.ends_with(".json") || path.ends_with(".parq") {
            Source::References {
                url: location.to_string(),
                targets: targets.to_vec(),
            }
        } else {
            Source::Store(location.to_string())
        }
    }
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

/// Where a directory served as a store is marked so, in the reserved
/// folder no client can read or write.
pub const STORE_MARKER: &str = "__zarrd/store";

/// Mark the directory at `location` (a path or `file://` URL) as served as a
/// store, so the folders clients create in it never make a later start take
/// it for an Icechunk repository. A directory that cannot be written (read
/// only, or not a directory) is left as it is: its clients cannot create
/// folders either.
pub fn mark_served_as_store(location: &str) {
    let dir = std::path::Path::new(location.strip_prefix("file://").unwrap_or(location));
    if !dir.is_dir() || dir.join(STORE_MARKER).is_file() {
        return;
    }
    let marker = dir.join(STORE_MARKER);
    let written = marker
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| {
            std::fs::write(
                &marker,
                "This directory is served by zarrd as a Zarr store, not as an Icechunk repository.\n",
            )
        });
    if let Err(e) = written {
        tracing::debug!(error = %e, "could not mark {} as served as a store", dir.display());
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
        }
    }
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
    pub max_concurrency: usize,
    pub request_timeout: Duration,
    pub shutdown_timeout: Duration,
    /// Deadline for a request's headers, and for an idle connection.
    pub header_timeout: Duration,
    /// Longest pause within a request body.
    pub body_timeout: Duration,
    /// Most pixels one image may have (413 beyond).
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
    pub cors: Cors,
    /// Stores mounted under top-level names.
    pub mounts: Vec<Mount>,
    /// Where the targets of a reference set given as ROOT may lie.
    pub reference_targets: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: "./data".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8000)),
            demo: false,
            cache_size: 512 << 20,
            memory_budget: default_memory_budget(512 << 20),
            recheck_cached: Recheck::Always,
            json_limit: 64 << 20,
            response_limit: 16 << 30,
            log_format: LogFormat::Text,
            read_only: false,
            allow_anonymous_writes: false,
            max_body_size: 256 << 20,
            max_header_bytes: 64 << 10,
            allow_anonymous_reads: None,
            tokens: Vec::new(),
            max_concurrency: 1024,
            request_timeout: Duration::from_secs(300),
            shutdown_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_image_pixels: 1 << 24,
            viewer_dir: None,
            consolidated_v3: true,
            consolidated_v2: true,
            check_documents: true,
            cache_control: "no-cache".into(),
            tls_cert: None,
            tls_key: None,
            cors: Cors::default(),
            mounts: Vec::new(),
            reference_targets: Vec::new(),
        }
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
        let o = args.over(file);
        let d = Config::default();
        Ok(Config {
            root: o.root.unwrap_or(d.root),
            listen: o.listen.unwrap_or(d.listen),
            demo: o.demo,
            cache_size: o.cache_size.unwrap_or(d.cache_size),
            memory_budget: o
                .memory_budget
                .unwrap_or_else(|| default_memory_budget(o.cache_size.unwrap_or(d.cache_size))),
            recheck_cached: o.recheck_cached.unwrap_or(d.recheck_cached),
            json_limit: o.json_limit.unwrap_or(d.json_limit),
            response_limit: o.response_limit.unwrap_or(d.response_limit),
            log_format: o.log_format.unwrap_or(d.log_format),
            read_only: o.read_only,
            // The demo store is in memory and disposable: it takes writes.
            allow_anonymous_writes: o.allow_anonymous_writes || o.demo,
            max_body_size: o.max_body_size.unwrap_or(d.max_body_size),
            max_header_bytes: o.max_header_bytes.unwrap_or(d.max_header_bytes),
            allow_anonymous_reads: o.allow_anonymous_reads,
            tokens: load_tokens(o.tokens, o.tokens_file.as_deref())?,
            max_concurrency: o.max_concurrency.unwrap_or(d.max_concurrency).max(1),
            request_timeout: seconds(
                "request_timeout",
                o.request_timeout,
                d.request_timeout,
                false,
            )?,
            shutdown_timeout: seconds(
                "shutdown_timeout",
                o.shutdown_timeout,
                d.shutdown_timeout,
                true,
            )?,
            header_timeout: seconds("header_timeout", o.header_timeout, d.header_timeout, false)?,
            body_timeout: seconds("body_timeout", o.body_timeout, d.body_timeout, false)?,
            max_image_pixels: o.max_image_pixels.unwrap_or(d.max_image_pixels),
            viewer_dir: o.viewer_dir,
            consolidated_v3: o.consolidated_v3.unwrap_or(d.consolidated_v3),
            consolidated_v2: o.consolidated_v2.unwrap_or(d.consolidated_v2),
            check_documents: o.check_documents.unwrap_or(d.check_documents),
            cache_control: header_value("cache_control", o.cache_control)?
                .unwrap_or(d.cache_control),
            tls_cert: o.tls_cert.clone(),
            tls_key: match (&o.tls_cert, o.tls_key) {
                (Some(_), Some(key)) => Some(key),
                (None, None) => None,
                _ => return Err(invalid("tls_cert", "--tls-cert and --tls-key go together")),
            },
            cors: Cors {
                origins: o.cors_origins.unwrap_or(o.cors.origins),
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

    #[test]
    fn recheck_values() {
        assert_eq!("never".parse::<Recheck>().unwrap(), Recheck::Never);
        assert_eq!(
            "2.5".parse::<Recheck>().unwrap(),
            Recheck::After(Duration::from_millis(2500))
        );
        assert!("-1".parse::<Recheck>().is_err());
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
}

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

/// `zarrd serve` flags; each also reads a `ZARRD_*` variable.
#[derive(Debug, Clone, Default, clap::Args)]
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
    pub config: Option<PathBuf>,
    /// Bytes of decoded chunks to cache, e.g. 512MiB [default: 512MiB]
    #[arg(long, env = "ZARRD_CACHE_SIZE", value_parser = parse_size)]
    pub cache_size: Option<u64>,
    /// Revalidate cached data: never, always, or after N seconds [default: always]
    #[arg(long, env = "ZARRD_RECHECK_CACHED")]
    pub recheck_cached: Option<Recheck>,
    /// Largest JSON data response, e.g. 64MiB [default: 64MiB]
    #[arg(long, env = "ZARRD_JSON_LIMIT", value_parser = parse_size)]
    pub json_limit: Option<u64>,
    /// Largest data response of any format [default: 16GiB]
    #[arg(long, env = "ZARRD_RESPONSE_LIMIT", value_parser = parse_size)]
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
    pub max_body_size: Option<u64>,
    /// Largest request line and headers together, e.g. 64KiB [default: 64KiB]
    #[arg(long, env = "ZARRD_MAX_HEADER_BYTES", value_parser = parse_size)]
    pub max_header_bytes: Option<u64>,
    /// TOML file of bearer tokens ([[tokens]] with token or token_sha256, scopes, prefixes)
    #[arg(long, env = "ZARRD_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Accept reads without a token even when tokens are configured
    #[arg(long, env = "ZARRD_ALLOW_ANONYMOUS_READS")]
    pub allow_anonymous_reads: bool,
    /// Requests served at once before new ones get 503 [default: 1024]
    #[arg(long, env = "ZARRD_MAX_CONCURRENCY")]
    pub max_concurrency: Option<usize>,
    /// Seconds a request may take to start its response (504 after) [default: 300]
    #[arg(long, env = "ZARRD_REQUEST_TIMEOUT")]
    pub request_timeout: Option<f64>,
    /// Origins browsers may read from, comma-separated, `*` for any [default: *]
    #[arg(long, env = "ZARRD_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Option<Vec<String>>,
    /// Seconds in-flight requests get to finish after SIGTERM [default: 30]
    #[arg(long, env = "ZARRD_SHUTDOWN_TIMEOUT")]
    pub shutdown_timeout: Option<f64>,
    /// Seconds a client has to send a request's headers; also how long an
    /// idle keep-alive connection stays open [default: 30]
    #[arg(long, env = "ZARRD_HEADER_TIMEOUT")]
    pub header_timeout: Option<f64>,
    /// Seconds a request body may stall (408), or a client stop reading a response [default: 30]
    #[arg(long, env = "ZARRD_BODY_TIMEOUT")]
    pub body_timeout: Option<f64>,
}

/// The config file's fields (all optional, same names as the flags).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
struct FileConfig {
    root: Option<String>,
    listen: Option<String>,
    demo: Option<bool>,
    cache_size: Option<SizeValue>,
    recheck_cached: Option<toml::Value>,
    json_limit: Option<SizeValue>,
    response_limit: Option<SizeValue>,
    log_format: Option<LogFormat>,
    read_only: Option<bool>,
    allow_anonymous_writes: Option<bool>,
    max_body_size: Option<SizeValue>,
    max_header_bytes: Option<SizeValue>,
    allow_anonymous_reads: Option<bool>,
    tokens_file: Option<PathBuf>,
    max_concurrency: Option<usize>,
    request_timeout: Option<SizeValue>,
    shutdown_timeout: Option<SizeValue>,
    header_timeout: Option<SizeValue>,
    body_timeout: Option<SizeValue>,
    #[serde(default)]
    cors: Cors,
    #[serde(default)]
    mounts: std::collections::BTreeMap<String, MountSpec>,
    #[serde(default)]
    tokens: Vec<TokenConfig>,
}

/// A size in the file: a number of bytes or a string like "512MiB".
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum SizeValue {
    Bytes(u64),
    Float(f64),
    Text(String),
}

/// A timeout given in seconds, which must be positive.
fn positive_seconds(
    option: &'static str,
    given: Option<f64>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match given {
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(invalid(
            option,
            format!("{s} is not a positive number of seconds"),
        )),
        None => Ok(default),
    }
}

/// Seconds in the file: a number, or a string holding one.
fn seconds(value: &Option<SizeValue>) -> Result<Option<f64>, ConfigError> {
    match value {
        None => Ok(None),
        Some(SizeValue::Bytes(n)) => Ok(Some(*n as f64)),
        Some(SizeValue::Float(f)) => Ok(Some(*f)),
        Some(SizeValue::Text(t)) => t.parse().map(Some).map_err(|_| {
            invalid(
                "request_timeout",
                format!("'{t}' is not a number of seconds"),
            )
        }),
    }
}

impl SizeValue {
    fn bytes(&self, option: &'static str) -> Result<u64, ConfigError> {
        match self {
            SizeValue::Bytes(n) => Ok(*n),
            SizeValue::Float(f) if *f >= 0.0 => Ok(*f as u64),
            SizeValue::Float(f) => Err(invalid(option, format!("{f} is negative"))),
            SizeValue::Text(s) => parse_size(s).map_err(|e| invalid(option, e)),
        }
    }
}

/// A mount in the config file: a URL, or `{ url = "...", read_only = true }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum MountSpec {
    Url(String),
    Full {
        url: String,
        #[serde(default)]
        read_only: bool,
    },
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
    pub cors: Cors,
    /// Stores mounted under top-level names: (name, URL, read-only).
    pub mounts: Vec<(String, String, bool)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: "./data".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8000)),
            demo: false,
            cache_size: 512 << 20,
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
            cors: Cors::default(),
            mounts: Vec::new(),
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
                toml::from_str::<FileConfig>(&text).map_err(|e| ConfigError::File {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?
            }
            None => FileConfig::default(),
        };
        let d = Config::default();
        let listen = match (args.listen, &file.listen) {
            (Some(l), _) => l,
            (None, Some(s)) => s.parse().map_err(|_| {
                invalid(
                    "listen",
                    format!("'{s}' is not an address like 127.0.0.1:8000"),
                )
            })?,
            (None, None) => d.listen,
        };
        let recheck_cached = match (args.recheck_cached, &file.recheck_cached) {
            (Some(r), _) => r,
            (None, Some(v)) => {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                text.parse().map_err(|e| invalid("recheck_cached", e))?
            }
            (None, None) => d.recheck_cached,
        };
        let size = |flag: Option<u64>,
                    file: &Option<SizeValue>,
                    option,
                    default|
         -> Result<u64, ConfigError> {
            match (flag, file) {
                (Some(n), _) => Ok(n),
                (None, Some(v)) => v.bytes(option),
                (None, None) => Ok(default),
            }
        };
        Ok(Config {
            root: args.root.or(file.root).unwrap_or(d.root),
            listen,
            demo: args.demo || file.demo.unwrap_or(false),
            cache_size: size(
                args.cache_size,
                &file.cache_size,
                "cache_size",
                d.cache_size,
            )?,
            recheck_cached,
            json_limit: size(
                args.json_limit,
                &file.json_limit,
                "json_limit",
                d.json_limit,
            )?,
            response_limit: size(
                args.response_limit,
                &file.response_limit,
                "response_limit",
                d.response_limit,
            )?,
            log_format: args.log_format.or(file.log_format).unwrap_or(d.log_format),
            read_only: args.read_only || file.read_only.unwrap_or(false),
            // The demo store is in memory and disposable: it takes writes.
            allow_anonymous_writes: args.allow_anonymous_writes
                || file.allow_anonymous_writes.unwrap_or(false)
                || args.demo
                || file.demo.unwrap_or(false),
            max_body_size: size(
                args.max_body_size,
                &file.max_body_size,
                "max_body_size",
                d.max_body_size,
            )?,
            max_header_bytes: size(
                args.max_header_bytes,
                &file.max_header_bytes,
                "max_header_bytes",
                d.max_header_bytes,
            )?,
            allow_anonymous_reads: if args.allow_anonymous_reads {
                Some(true)
            } else {
                file.allow_anonymous_reads
            },
            max_concurrency: args
                .max_concurrency
                .or(file.max_concurrency)
                .unwrap_or(d.max_concurrency)
                .max(1),
            request_timeout: positive_seconds(
                "request_timeout",
                args.request_timeout.or(seconds(&file.request_timeout)?),
                d.request_timeout,
            )?,
            header_timeout: positive_seconds(
                "header_timeout",
                args.header_timeout.or(seconds(&file.header_timeout)?),
                d.header_timeout,
            )?,
            body_timeout: positive_seconds(
                "body_timeout",
                args.body_timeout.or(seconds(&file.body_timeout)?),
                d.body_timeout,
            )?,
            tokens: load_tokens(
                file.tokens,
                args.tokens_file.or(file.tokens_file).as_deref(),
            )?,
            shutdown_timeout: match args.shutdown_timeout.or(seconds(&file.shutdown_timeout)?) {
                Some(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s),
                Some(s) => {
                    return Err(invalid(
                        "shutdown_timeout",
                        format!("{s} is not a number of seconds"),
                    ))
                }
                None => d.shutdown_timeout,
            },
            cors: Cors {
                origins: args.cors_origins.unwrap_or(file.cors.origins),
                ..file.cors
            },
            mounts: file
                .mounts
                .into_iter()
                .map(|(name, spec)| match spec {
                    MountSpec::Url(url) => (name, url, false),
                    MountSpec::Full { url, read_only } => (name, url, read_only),
                })
                .collect(),
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
        std::fs::write(&path, "[mounts]\nera5 = \"memory://\"\nscratch = { url = \"file:///tmp/x\", read_only = true }\n").unwrap();
        let c = Config::resolve(ServeArgs {
            config: Some(path.clone()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            c.mounts,
            vec![
                ("era5".to_string(), "memory://".to_string(), false),
                ("scratch".to_string(), "file:///tmp/x".to_string(), true)
            ]
        );
        std::fs::write(&path, "cache_sise = 1\n").unwrap();
        let err = Config::resolve(ServeArgs {
            config: Some(path),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("cache_sise"), "{err}");
    }
}

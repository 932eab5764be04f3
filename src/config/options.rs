//! `zarrd serve`'s options, each declared once (`options!`): flag,
//! `ZARRD_*` variable, file key, default and doc. `Config::resolve` is the
//! one step that merges and checks them.

pub use crate::size::parse_size;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use super::{invalid, ConfigError, Cors, LogFormat, MountSpec, Recheck};
use crate::auth::TokenConfig;

/// An option's default as `--help` and the README state it: a value,
/// parsed as the option's values are, or (`parsed: false`) what applies
/// when the option is not given.
#[derive(Debug, Clone, Copy)]
pub struct OptionDefault {
    /// Its key in the file, also its flag's name with `-` for `_`.
    pub key: &'static str,
    pub default: &'static str,
    pub parsed: bool,
}

/// Declares `zarrd serve`'s options, each once: its doc (the `--help`
/// text), its flag and `ZARRD_*` variable (clap), its key in the TOML file
/// (serde, the same name), and its default, `("512MiB" by parse)` parsed
/// by the parser of its flag, or `("off")`, a description of what applies
/// when it is not given. Generates [`ServeArgs`], [`OPTIONS`] and the merge
/// flag > variable > file > default.
macro_rules! options {
    ($(
        $(#[$attr:meta])*
        $name:ident: $ty:ty = ($default:literal $(by $parse:expr)?);
    )*) => {
        /// `zarrd serve`'s options (see `options!`): each a flag, a
        /// `ZARRD_*` variable and a key of the TOML config file.
        /// [`Config::resolve`] merges flag > variable > file > default.
        #[derive(Debug, Clone, Default, clap::Args, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct ServeArgs {
            $(
                $(#[$attr])*
                $(#[arg(value_parser = |s: &str| -> Result<$ty, String> { ($parse)(s) })])?
                pub $name: Option<$ty>,
            )*
            /// `[cors]` in the file (origins also from --cors-origins).
            #[arg(skip)]
            pub cors: Cors,
            /// `[mounts]` in the file.
            #[arg(skip)]
            pub mounts: std::collections::BTreeMap<String, MountSpec>,
            /// `[[tokens]]` in the file.
            #[arg(skip)]
            pub tokens: Vec<TokenConfig>,
            /// `[[oidc]]` in the file: the OpenID providers whose tokens are accepted.
            #[arg(skip)]
            pub oidc: Vec<crate::auth::oidc::OidcConfig>,
            /// `[[policy]]` in the file: who may do what where.
            #[arg(skip)]
            pub policy: Vec<crate::auth::RuleConfig>,
            /// `[[fair_use]]` in the file: the rates callers are held to.
            #[arg(skip)]
            pub fair_use: Vec<crate::auth::fair::FairUseConfig>,
        }

        /// Every option's default, in the order `--help` lists them.
        pub static OPTIONS: &[OptionDefault] = &[$(
            OptionDefault {
                key: stringify!($name),
                default: $default,
                parsed: options!(@parsed $($parse)?),
            },
        )*];

        impl ServeArgs {
            /// These options (flags and variables) over the file's.
            pub(super) fn over(self, file: ServeArgs) -> ServeArgs {
                ServeArgs {
                    $($name: self.$name.or(file.$name),)*
                    cors: file.cors,
                    mounts: file.mounts,
                    tokens: file.tokens,
                    oidc: file.oidc,
                    policy: file.policy,
                    fair_use: file.fair_use,
                }
            }

            /// What is unset here taken from the declared defaults.
            pub(super) fn or_defaults(self) -> Result<ServeArgs, ConfigError> {
                Ok(ServeArgs {
                    $($name: match self.$name {
                        Some(v) => Some(v),
                        None => options!(@default $name $ty, $default $(, $parse)?),
                    },)*
                    ..self
                })
            }
        }
    };
    (@parsed) => { false };
    (@parsed $parse:expr) => { true };
    (@default $name:ident $ty:ty, $default:literal) => { None };
    (@default $name:ident $ty:ty, $default:literal, $parse:expr) => {{
        let parsed: Result<$ty, String> = ($parse)($default);
        Some(parsed.map_err(|e| invalid(stringify!($name), format!("its default '{}': {e}", $default)))?)
    }};
}

/// A boolean as flags and variables spell it: `true`/`false`, `1`/`0`,
/// `yes`/`no`, `on`/`off` (any case), the same for every boolean option.
fn boolish(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "y" | "on" => Ok(true),
        "false" | "0" | "no" | "n" | "off" => Ok(false),
        _ => Err(format!("'{s}' is not true or false")),
    }
}

/// A value of a type that parses from text (`FromStr`), errors as text.
fn parsed<T: std::str::FromStr>(s: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    s.parse().map_err(|e: T::Err| e.to_string())
}

// A bare boolean flag (`--demo`) is on; `--demo=false` turns off what a
// file turned on. A value only after `=`, so a bare flag never takes the
// ROOT that follows it.
options! {
    /// Directory or store URL (file://, memory://) to serve
    #[arg(env = "ZARRD_ROOT")]
    root: String = ("./data" by parsed);
    /// Address to listen on
    #[arg(long, env = "ZARRD_LISTEN")]
    listen: SocketAddr = ("127.0.0.1:8000" by parsed);
    /// Serve an in-memory example hierarchy instead of ROOT
    #[arg(long, env = "ZARRD_DEMO", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolish)]
    demo: bool = ("off");
    /// TOML config file (flags and ZARRD_* variables override it)
    #[arg(long, env = "ZARRD_CONFIG")]
    #[serde(skip)]
    config: PathBuf = ("none");
    /// Bytes of decoded chunks to cache, e.g. 512MiB
    #[arg(long, env = "ZARRD_CACHE_SIZE")]
    #[serde(deserialize_with = "file::size")]
    cache_size: u64 = ("512MiB" by parse_size);
    /// Memory the answers that grow with a request (selections, images,
    /// thumbnails, consolidated metadata, request bodies) may hold at once,
    /// e.g. 2GiB, at least 256MiB; past it requests wait a second, then get
    /// 503
    #[arg(long, env = "ZARRD_MEMORY_BUDGET", value_parser = parse_size)]
    #[serde(deserialize_with = "file::size")]
    memory_budget: u64 = ("half the container's memory limit (else the machine's) less `--cache-size`, at least `256MiB`");
    /// Revalidate cached data: never, always, or after N seconds
    #[arg(long, env = "ZARRD_RECHECK_CACHED")]
    #[serde(deserialize_with = "file::parsed")]
    recheck_cached: Recheck = ("always" by parsed);
    /// Largest data response built in memory (JSON, CSV, NetCDF, GeoTIFF, Arrow, Parquet, reductions) and largest variable-length one in any format, e.g. 64MiB
    #[arg(long, env = "ZARRD_JSON_LIMIT")]
    #[serde(deserialize_with = "file::size")]
    json_limit: u64 = ("64MiB" by parse_size);
    /// Largest data response of any format
    #[arg(long, env = "ZARRD_RESPONSE_LIMIT")]
    #[serde(deserialize_with = "file::size")]
    response_limit: u64 = ("16GiB" by parse_size);
    /// Log format: text or json
    #[arg(long, env = "ZARRD_LOG_FORMAT")]
    #[serde(deserialize_with = "file::parsed")]
    log_format: LogFormat = ("text" by parsed);
    /// Refuse every write (PUT, PATCH, DELETE, POST append)
    #[arg(long, env = "ZARRD_READ_ONLY", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolish)]
    read_only: bool = ("off");
    /// Accept writes from clients without credentials
    #[arg(long, env = "ZARRD_ALLOW_ANONYMOUS_WRITES", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolish)]
    allow_anonymous_writes: bool = ("off (on with `--demo`)");
    /// Largest request body, e.g. 256MiB
    #[arg(long, env = "ZARRD_MAX_BODY_SIZE")]
    #[serde(deserialize_with = "file::size")]
    max_body_size: u64 = ("256MiB" by parse_size);
    /// Largest request line and headers together, e.g. 64KiB (431 above)
    #[arg(long, env = "ZARRD_MAX_HEADER_BYTES")]
    #[serde(deserialize_with = "file::size")]
    max_header_bytes: u64 = ("64KiB" by parse_size);
    /// TOML file of bearer tokens ([[tokens]] with token or token_sha256, scopes, prefixes)
    #[arg(long, env = "ZARRD_TOKENS_FILE")]
    tokens_file: PathBuf = ("none");
    /// Accept reads without a token even when tokens are configured
    #[arg(long, env = "ZARRD_ALLOW_ANONYMOUS_READS", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = boolish)]
    allow_anonymous_reads: bool = ("on without tokens");
    /// Requests served at once before new ones get 503
    #[arg(long, env = "ZARRD_MAX_CONCURRENCY")]
    max_concurrency: usize = ("1024" by parsed);
    /// Seconds a request may take to start its response (504 after)
    #[arg(long, env = "ZARRD_REQUEST_TIMEOUT")]
    #[serde(deserialize_with = "file::parsed")]
    request_timeout: f64 = ("300" by parsed);
    /// Origins browsers may read from, comma-separated, `*` for any
    #[arg(long, env = "ZARRD_CORS_ORIGINS", value_delimiter = ',')]
    #[serde(skip)]
    cors_origins: Vec<String> = ("`*`");
    /// Seconds in-flight requests get to finish after SIGTERM
    #[arg(long, env = "ZARRD_SHUTDOWN_TIMEOUT")]
    #[serde(deserialize_with = "file::parsed")]
    shutdown_timeout: f64 = ("30" by parsed);
    /// Seconds a client has to send a request's headers; also how long an
    /// idle keep-alive connection stays open
    #[arg(long, env = "ZARRD_HEADER_TIMEOUT")]
    #[serde(deserialize_with = "file::parsed")]
    header_timeout: f64 = ("30" by parsed);
    /// Seconds a request body may stall (408), or a client stop reading a response
    #[arg(long, env = "ZARRD_BODY_TIMEOUT")]
    #[serde(deserialize_with = "file::parsed")]
    body_timeout: f64 = ("30" by parsed);
    /// Most pixels one image (format=png) may have (422 above)
    #[arg(long, env = "ZARRD_MAX_IMAGE_PIXELS")]
    max_image_pixels: u64 = ("16777216" by parsed);
    /// Where the targets of a reference set given as ROOT (a `.json` file)
    /// may lie, or the virtual chunks of an Icechunk repository given as ROOT,
    /// comma-separated folders or URL prefixes
    #[arg(long, env = "ZARRD_REFERENCE_TARGETS", value_delimiter = ',')]
    reference_targets: Vec<String> = ("the set's folder; no virtual chunks");
    /// Serve the web viewer's page files from this directory instead of the
    /// copy built into the binary, read on every request (for working on the viewer)
    #[arg(long, env = "ZARRD_VIEWER_DIR")]
    viewer_dir: PathBuf = ("built in");
    /// Serve a Zarr v3 group's zarr.json that stores no consolidated_metadata
    /// with it added, describing the hierarchy below (`=false` serves stored bytes)
    #[arg(long, env = "ZARRD_CONSOLIDATED_V3", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    consolidated_v3: bool = ("true" by boolish);
    /// Check that metadata documents written as raw keys (`zarr.json`,
    /// `.zarray`, `.zgroup`, `.zattrs`, `.zmetadata`) are what their names say
    /// before storing them (`=false` stores any bytes, for trusted writers
    /// using zarrd as a plain key-value store)
    #[arg(long, env = "ZARRD_CHECK_DOCUMENTS", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    check_documents: bool = ("true" by boolish);
    /// Answer `.zmetadata` of a Zarr v2 group that stores none with one built
    /// from the hierarchy below (`=false`: 404, the group as stored)
    #[arg(long, env = "ZARRD_CONSOLIDATED_V2", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    consolidated_v2: bool = ("true" by boolish);
    /// PEM certificate chain (leaf first): serve HTTPS, HTTP/2 and HTTP/1.1 by ALPN (needs --tls-key)
    #[arg(long, env = "ZARRD_TLS_CERT")]
    tls_cert: PathBuf = ("none");
    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1)
    #[arg(long, env = "ZARRD_TLS_KEY")]
    tls_key: PathBuf = ("none");
    /// The URL browsers reach the server by (scheme and host, e.g.
    /// https://data.example.org), where the OpenID provider sends browsers
    /// back to after signing in
    #[arg(long, env = "ZARRD_PUBLIC_URL")]
    public_url: String = ("each request's own host");
    /// Cache-Control of stored values under /zarr/ (mounts may set their
    /// own), e.g. "public, max-age=600"; values read at an Icechunk
    /// snapshot id are always immutable
    #[arg(long, env = "ZARRD_CACHE_CONTROL")]
    cache_control: String = ("no-cache" by parsed);
}

/// `--help` with each option's declared default (see [`OPTIONS`]).
pub fn with_defaults_in_help(command: clap::Command) -> clap::Command {
    OPTIONS.iter().fold(command, |command, option| {
        command.mut_arg(option.key, |arg| {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(format!(
                "{help} [default: {}]",
                option.default.replace('`', "")
            ))
        })
    })
}

/// How the file's values become options: sizes as numbers or strings like
/// "512MiB", everything else as a TOML value or a string that parses.
pub(super) mod file {
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

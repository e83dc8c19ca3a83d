//! The proxy's settings: what `cutctx serve` takes on its command line and in its config
//! file, checked once at startup so that a bad setting stops it before it listens.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use cutctx_ops::Format;
use cutctx_ops::OpsError;
use cutctx_ops::details;
use cutctx_ops::session::{Breakpoints, SessionOptions, Tuning};
use hyper::Uri;
use serde::Deserialize;

use crate::auth::Tokens;
use crate::windows::Windows;

/// The policy the proxy compacts with when none is named: mask old tool results, then drop
/// the oldest turns. It needs no summarizer (the proxy has no model of its own to write
/// summaries with), and masking first keeps the conversation's turns while it can.
pub const DEFAULT_POLICY: &str = cutctx_ops::session::NO_SUMMARIZER_POLICY;

/// The OpenAI API, when neither the command line nor the config names an upstream.
const OPENAI_DEFAULT: &str = "https://api.openai.com";
/// The Anthropic API, likewise.
const ANTHROPIC_DEFAULT: &str = "https://api.anthropic.com";

/// Where the sessions' state is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateSpec {
    /// A SQLite database at this path (created when absent).
    Sqlite(PathBuf),
    /// In memory: gone when the proxy stops.
    Memory,
}

impl std::str::FromStr for StateSpec {
    type Err = OpsError;

    /// `sqlite:PATH` or `memory`.
    ///
    /// ```
    /// use cutctx_serve::StateSpec;
    /// assert_eq!("memory".parse::<StateSpec>()?, StateSpec::Memory);
    /// assert_eq!("sqlite:s.db".parse::<StateSpec>()?, StateSpec::Sqlite("s.db".into()));
    /// assert!("s.db".parse::<StateSpec>().is_err());
    /// # Ok::<(), cutctx_ops::OpsError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, OpsError> {
        if s == "memory" {
            return Ok(Self::Memory);
        }
        match s.strip_prefix("sqlite:") {
            Some(path) if !path.is_empty() => Ok(Self::Sqlite(PathBuf::from(path))),
            _ => Err(OpsError::validation(
                format!("--state must be sqlite:PATH or memory, not {s:?}"),
                details! { "state" => s },
            )),
        }
    }
}

/// When a SQLite commit is on disk (`--sqlite-sync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqliteSync {
    /// `synchronous=NORMAL` under WAL: a commit is in the write-ahead log when it returns, so
    /// a proxy that is killed (`SIGKILL`) keeps every call it answered; an operating-system
    /// crash or a power loss may lose the last few, whose conversations then start new
    /// sessions. No `fsync` per call.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is synced to disk before it returns, which survives a
    /// power loss too, at the price of an `fsync` per call.
    Full,
}

impl std::str::FromStr for SqliteSync {
    type Err = OpsError;

    /// `normal` or `full`.
    ///
    /// ```
    /// use cutctx_serve::SqliteSync;
    /// assert_eq!("full".parse::<SqliteSync>()?, SqliteSync::Full);
    /// assert!("off".parse::<SqliteSync>().is_err());
    /// # Ok::<(), cutctx_ops::OpsError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, OpsError> {
        match s {
            "normal" => Ok(Self::Normal),
            "full" => Ok(Self::Full),
            _ => Err(OpsError::validation(
                format!("--sqlite-sync must be normal or full, not {s:?}"),
                details! { "sqlite_sync" => s },
            )),
        }
    }
}

/// Everything `cutctx serve` is given, before it is checked.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `HOST:PORT` to listen on; port 0 picks a free one.
    pub listen: String,
    /// The OpenAI base URL (default `https://api.openai.com`, or the config's).
    pub openai_upstream: Option<String>,
    /// The Anthropic base URL (default `https://api.anthropic.com`, or the config's).
    pub anthropic_upstream: Option<String>,
    /// Where the sessions are kept (default `sqlite:cutctx-serve.db`).
    pub state: StateSpec,
    /// When a SQLite commit is on disk (default [`SqliteSync::Normal`]).
    pub sqlite_sync: SqliteSync,
    /// The window of every model, over the table and the config.
    pub window: Option<u64>,
    /// The config file's text: `{"windows": {...}, "openai_upstream", "anthropic_upstream"}`.
    pub config_text: Option<String>,
    /// Append a receipt of each firing to this ledger.
    pub ledger: Option<PathBuf>,
    /// The session settings; `policy` defaults to [`DEFAULT_POLICY`].
    pub tuning: Tuning,
    /// The largest request body read, in bytes; larger gets 413.
    pub max_body: usize,
    /// Connect-and-headers timeout, and the longest wait between two body chunks.
    pub upstream_timeout: Duration,
    /// Refuse (400) a request the proxy cannot read or compact instead of forwarding it.
    pub fail_closed: bool,
    /// Sessions unused for longer than this are forgotten.
    pub max_age_secs: u64,
    /// At most this many sessions are kept in all; a full store gives up only the calling
    /// tenant's own least recently used session.
    pub max_sessions: u64,
    /// At most this many sessions per tenant (per credential); past it the tenant's least
    /// recently used goes.
    pub max_sessions_per_tenant: u64,
    /// The proxy's own tokens (`--auth-token`); with any (here or in the file), every route
    /// but `/healthz` needs one.
    pub auth_tokens: Vec<String>,
    /// The text of the tokens file (`--auth-tokens-file`): one token per line.
    pub auth_tokens_text: Option<String>,
    /// At most this many client connections at once; more wait to be accepted. `None`: 1,024,
    /// or less where the descriptor limit is lower (half of it, for the upstream side).
    pub max_connections: Option<usize>,
    /// A connection that has not sent a whole request head within this long, since it opened
    /// or since its last response ended, is closed (an idle keep-alive connection too).
    pub idle_timeout: Duration,
    /// Once a request head has begun, it must be whole within this long; and a request body
    /// may pause at most this long between two chunks.
    pub header_timeout: Duration,
    /// `--summarizer`: `none` (the default: masking, then dropping), `auto` or `native` (the
    /// provider's own compaction where the format has one, else a cached-prefix request), or
    /// `cached` (a cached-prefix request for every format).
    pub summarizer: String,
    /// From this share of the trigger, a summary is made in the background; 1: at the firing
    /// call, which waits for it.
    pub summary_ahead: f64,
    /// The model of cached-prefix summaries (default: the conversation's own, whose cache they
    /// read).
    pub summary_model: Option<String>,
    /// The longest a summarizing call may take, its answer included.
    pub summary_timeout: Duration,
}

impl ServeOptions {
    /// The defaults, listening on `listen`.
    #[must_use]
    pub fn new(listen: &str) -> Self {
        Self {
            listen: listen.to_owned(),
            openai_upstream: None,
            anthropic_upstream: None,
            state: StateSpec::Sqlite(PathBuf::from("cutctx-serve.db")),
            sqlite_sync: SqliteSync::Normal,
            window: None,
            config_text: None,
            ledger: None,
            tuning: Tuning {
                trigger: None,
                target: None,
                policy: None,
                prompt_id: None,
                estimator: None,
                protected_recent: None,
                reserve_output: 0,
                reasoning: cutctx_ops::ReasoningMode::default(),
                fire_early: false,
                summarizes: false,
                front_end: cutctx_ops::summarizer::FrontEnd::Proxy,
            },
            max_body: 32 * 1024 * 1024,
            upstream_timeout: Duration::from_millis(600_000),
            fail_closed: false,
            max_age_secs: 86_400,
            max_sessions: 10_000,
            max_sessions_per_tenant: 1_000,
            auth_tokens: Vec::new(),
            auth_tokens_text: None,
            max_connections: None,
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            summarizer: "none".to_owned(),
            summary_ahead: DEFAULT_SUMMARY_AHEAD,
            summary_model: None,
            summary_timeout: Duration::from_secs(120),
        }
    }
}

/// Where a summary starts being made in the background, as a share of the trigger: early
/// enough that a loop's calls (a few thousand tokens each) leave it time to come back before
/// the trigger, late enough that few sessions that never fire pay for one.
pub const DEFAULT_SUMMARY_AHEAD: f64 = 0.8;

/// The config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    windows: BTreeMap<String, u64>,
    openai_upstream: Option<String>,
    anthropic_upstream: Option<String>,
}

/// An upstream base URL, checked.
#[derive(Debug, Clone)]
pub(crate) struct Base {
    /// `scheme://authority`.
    pub(crate) origin: String,
    /// The base's path without its trailing `/` (often empty).
    pub(crate) path: String,
}

impl Base {
    /// The URL of `path_and_query` under this base.
    pub(crate) fn join(&self, path_and_query: &str) -> String {
        format!("{}{}{path_and_query}", self.origin, self.path)
    }
}

/// The settings, checked.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) listen: String,
    pub(crate) openai: Base,
    pub(crate) anthropic: Base,
    pub(crate) state: StateSpec,
    pub(crate) sqlite_sync: SqliteSync,
    pub(crate) windows: Windows,
    pub(crate) ledger: Option<PathBuf>,
    pub(crate) tuning: Tuning,
    pub(crate) max_body: usize,
    pub(crate) upstream_timeout: Duration,
    pub(crate) fail_closed: bool,
    pub(crate) max_age_secs: u64,
    pub(crate) max_sessions: u64,
    pub(crate) max_sessions_per_tenant: u64,
    pub(crate) auth: Tokens,
    pub(crate) max_connections: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) header_timeout: Duration,
    pub(crate) summarizer: Option<crate::summaries::Summarizer>,
}

impl Settings {
    /// Checks `options`: the config file, the upstream URLs, the session settings.
    pub(crate) fn check(options: ServeOptions) -> Result<Self, OpsError> {
        let config: ConfigFile = match options.config_text.as_deref() {
            Some(text) => serde_json::from_str(text).map_err(|e| {
                OpsError::validation(
                    format!(
                        "the config file is not valid: {e}; expected {{\"windows\": {{MODEL: N}}, \"openai_upstream\": URL, \"anthropic_upstream\": URL}}"
                    ),
                    details! { "document" => "config", "line" => e.line(), "column" => e.column() },
                )
            })?,
            None => ConfigFile::default(),
        };
        for (model, n) in &config.windows {
            if *n == 0 {
                return Err(OpsError::validation(
                    format!("the config's window for {model:?} is 0"),
                    details! { "model" => model.as_str() },
                ));
            }
        }
        if options.window == Some(0) {
            return Err(OpsError::validation(
                "--window must be above 0",
                details! { "window" => 0 },
            ));
        }
        let zero = [
            ("--max-body", options.max_body == 0),
            ("--upstream-timeout-ms", options.upstream_timeout.is_zero()),
            ("--max-sessions", options.max_sessions == 0),
            (
                "--max-sessions-per-tenant",
                options.max_sessions_per_tenant == 0,
            ),
            ("--max-connections", options.max_connections == Some(0)),
            ("--idle-timeout-ms", options.idle_timeout.is_zero()),
            ("--header-timeout-ms", options.header_timeout.is_zero()),
            ("--summary-timeout-ms", options.summary_timeout.is_zero()),
        ];
        if let Some((flag, _)) = zero.iter().find(|(_, z)| *z) {
            return Err(OpsError::validation(
                format!("{flag} must be above 0"),
                details! { "setting" => *flag },
            ));
        }
        let summarizer = summarizer(&options)?;
        let auth = Tokens::new(&options.auth_tokens, options.auth_tokens_text.as_deref())
            .map_err(|why| OpsError::validation(why, details! { "setting" => "auth token" }))?;
        let openai = base(
            "openai",
            options
                .openai_upstream
                .or(config.openai_upstream)
                .as_deref()
                .unwrap_or(OPENAI_DEFAULT),
        )?;
        let anthropic = base(
            "anthropic",
            options
                .anthropic_upstream
                .or(config.anthropic_upstream)
                .as_deref()
                .unwrap_or(ANTHROPIC_DEFAULT),
        )?;
        let mut tuning = options.tuning;
        if tuning.policy.is_none() {
            tuning.policy = Some(DEFAULT_POLICY.to_owned());
        }
        let windows = Windows::new(config.windows, options.window)?;
        let settings = Self {
            listen: options.listen,
            openai,
            anthropic,
            state: options.state,
            sqlite_sync: options.sqlite_sync,
            windows,
            ledger: options.ledger,
            tuning,
            max_body: options.max_body,
            upstream_timeout: options.upstream_timeout,
            fail_closed: options.fail_closed,
            max_age_secs: options.max_age_secs,
            max_sessions: options.max_sessions,
            max_sessions_per_tenant: options.max_sessions_per_tenant,
            auth,
            max_connections: options
                .max_connections
                .unwrap_or_else(crate::connections::default_connections),
            idle_timeout: options.idle_timeout,
            header_timeout: options.header_timeout,
            summarizer,
        };
        // The policy, the estimator and the figures, refused now rather than at a first call.
        cutctx_ops::session::check_options(
            &settings.session_options(Format::OpenAiChat, u64::MAX),
        )?;
        Ok(settings)
    }

    /// The session's options for one call in `format` against `window`.
    pub(crate) fn session_options(&self, format: Format, window: u64) -> SessionOptions {
        SessionOptions {
            format,
            window,
            tuning: self.tuning.clone(),
            summarize_with: None,
            cache_breakpoints: Breakpoints::Off,
            repair: false,
            pin: Vec::new(),
        }
    }

    /// Whether any upstream is reached over TLS (and so needs root certificates).
    pub(crate) fn needs_tls(&self) -> bool {
        self.openai.origin.starts_with("https:") || self.anthropic.origin.starts_with("https:")
    }
}

/// `--summarizer` and its settings, checked: `None` for `none`.
fn summarizer(options: &ServeOptions) -> Result<Option<crate::summaries::Summarizer>, OpsError> {
    let native = crate::summaries::parse_mode(&options.summarizer)
        .map_err(|why| OpsError::validation(why, details! { "setting" => "--summarizer" }))?;
    let ahead = options.summary_ahead;
    if !(ahead > 0.0 && ahead <= 1.0) {
        return Err(OpsError::validation(
            format!(
                "--summary-ahead must be above 0 and at most 1 (a share of the trigger), not {ahead}"
            ),
            details! { "setting" => "--summary-ahead" },
        ));
    }
    Ok(native.map(|native| crate::summaries::Summarizer {
        native,
        ahead,
        model: options.summary_model.clone(),
        timeout: options.summary_timeout,
    }))
}

/// Checks one upstream base URL: `https://` anywhere, plain `http://` only to a loopback host
/// (a request's API key must never cross a network in clear).
fn base(which: &str, url: &str) -> Result<Base, OpsError> {
    let bad = |why: &str| {
        OpsError::validation(
            format!("the {which} upstream {url:?} {why}"),
            details! { "upstream" => which },
        )
    };
    let uri: Uri = url.parse().map_err(|_| bad("is not a URL"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(bad(
            "needs a scheme and a host, e.g. https://api.openai.com",
        ));
    };
    if uri.query().is_some() {
        return Err(bad("must not have a query"));
    }
    match scheme {
        "https" => {}
        "http" if is_loopback(authority.host()) => {}
        "http" => {
            return Err(bad(
                "is plain http to a host that is not loopback; use https (plain http is allowed only to localhost, 127.0.0.0/8 or [::1])",
            ));
        }
        _ => return Err(bad("must be http:// or https://")),
    }
    Ok(Base {
        origin: format!("{scheme}://{authority}"),
        path: uri.path().trim_end_matches('/').to_owned(),
    })
}

/// Whether `host` (as a URL or `--listen` spells it) is this machine.
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_refused_but_to_loopback() {
        assert!(base("openai", "http://127.0.0.1:9001").is_ok());
        assert!(base("openai", "http://localhost:9001/").is_ok());
        assert!(base("openai", "http://[::1]:9001").is_ok());
        let err = base("openai", "http://10.0.0.2:9001").expect_err("refused");
        assert!(err.message.contains("plain http"), "{}", err.message);
        assert!(base("openai", "https://api.openai.com").is_ok());
        assert!(base("openai", "ftp://x").is_err());
    }

    #[test]
    fn a_base_path_is_kept_before_the_request_path() {
        let b = base("openai", "https://example.com/proxy/").expect("ok");
        assert_eq!(
            b.join("/v1/chat/completions?x=1"),
            "https://example.com/proxy/v1/chat/completions?x=1"
        );
    }

    #[test]
    fn the_config_file_sets_windows_and_upstreams_and_the_command_line_wins() {
        let mut o = ServeOptions::new("127.0.0.1:0");
        o.config_text = Some(
            r#"{"windows": {"my-model": 5000}, "openai_upstream": "http://127.0.0.1:7001", "anthropic_upstream": "http://127.0.0.1:7002/base/"}"#
                .into(),
        );
        o.anthropic_upstream = Some("http://127.0.0.1:7003".into());
        let s = Settings::check(o).expect("valid");
        assert_eq!(s.windows.window_for(Some("my-model-v2")), 5000);
        assert_eq!(
            s.openai.join("/v1/responses"),
            "http://127.0.0.1:7001/v1/responses"
        );
        assert_eq!(
            s.anthropic.join("/v1/messages"),
            "http://127.0.0.1:7003/v1/messages"
        );
        assert_eq!(s.tuning.policy.as_deref(), Some(DEFAULT_POLICY));
        let mut o = ServeOptions::new("127.0.0.1:0");
        o.config_text = Some(r#"{"windows": {"m": 0}}"#.into());
        assert!(Settings::check(o).is_err());
    }

    #[test]
    fn bad_settings_stop_the_start() {
        let mut o = ServeOptions::new("127.0.0.1:0");
        o.tuning.policy = Some("newest_first".into());
        assert!(Settings::check(o).is_err());
        let mut o = ServeOptions::new("127.0.0.1:0");
        o.config_text = Some(r#"{"windowz": {}}"#.into());
        assert!(Settings::check(o).is_err());
        let o = ServeOptions::new("127.0.0.1:0");
        assert!(Settings::check(o).is_ok());
    }

    #[test]
    fn the_summarizer_settings_are_checked_at_the_start_and_name_their_flag() {
        let check = |edit: &dyn Fn(&mut ServeOptions)| {
            let mut o = ServeOptions::new("127.0.0.1:0");
            edit(&mut o);
            Settings::check(o)
        };
        let s = check(&|_| {}).expect("the default");
        assert_eq!(s.summarizer, None, "no summarizer by default");
        for (mode, native) in [("auto", true), ("native", true), ("cached", false)] {
            let s = check(&|o| o.summarizer = mode.to_owned()).expect("valid");
            let summarizer = s.summarizer.expect("set");
            assert_eq!(summarizer.native, native, "{mode}");
            assert!(!summarizer.at_firing(), "in the background by default");
        }
        let e = check(&|o| o.summarizer = "gpt".to_owned()).expect_err("unknown");
        assert!(e.message.contains("--summarizer"), "{}", e.message);
        for ahead in [0.0, -1.0, 1.5, f64::NAN] {
            let e = check(&|o| {
                o.summarizer = "auto".to_owned();
                o.summary_ahead = ahead;
            })
            .expect_err("out of range");
            assert!(e.message.contains("--summary-ahead"), "{}", e.message);
        }
        let s = check(&|o| {
            o.summarizer = "auto".to_owned();
            o.summary_ahead = 1.0;
        })
        .expect("valid");
        assert!(s.summarizer.expect("set").at_firing());
        let e = check(&|o| o.summary_timeout = Duration::ZERO).expect_err("zero");
        assert!(e.message.contains("--summary-timeout-ms"), "{}", e.message);
    }
}

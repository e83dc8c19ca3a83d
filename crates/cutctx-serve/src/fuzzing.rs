//! Entry points for the fuzz targets in `fuzz/`: the proxy's own parsers, reached from
//! untrusted bytes. Not part of the proxy's interface.
//!
//! Each item only calls the crate's private one it names: the usage read from a response
//! (`crate::usage::Tap`), a named session's last body and the history digests hashed from
//! it (`crate::prior`), and the settings checked at startup
//! (`crate::options::Settings::check`).

use std::sync::Arc;

use bytes::Bytes;
use cutctx_ops::Format;
use cutctx_ops::OpsError;
use cutctx_ops::session::SessionOptions;
use serde_json::Value;

use crate::ServeOptions;
use crate::options::Settings;
use crate::prior::{Budget, Prior, hash};
use crate::usage::{Tap, Usage};

/// The proxy's usage reader (`crate::usage::Tap`) over one response's body.
#[derive(Debug)]
pub struct UsageTap(Tap);

impl UsageTap {
    /// A reader for a response in `format`; `sse` for an event stream, `gzip` for a
    /// gzip-encoded body.
    #[must_use]
    pub const fn new(format: Format, sse: bool, gzip: bool) -> Self {
        Self(Tap::new(format, sse, gzip))
    }

    /// Takes the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.0.feed(chunk);
    }

    /// The usage read once the body has ended, as `(prompt, cached)`.
    #[must_use]
    pub fn finish(self) -> Option<(u64, u64)> {
        self.0.finish().map(pair)
    }

    /// The usage of a body cut short where it is, as `(prompt, cached)`.
    #[must_use]
    pub fn seen(self) -> Option<(u64, u64)> {
        self.0.seen().map(pair)
    }
}

/// A usage as `(prompt, cached)`.
const fn pair(u: Usage) -> (u64, u64) {
    (u.prompt, u.cached)
}

/// A named session's last body as the proxy remembers it (`crate::prior::Prior`).
#[derive(Debug)]
pub struct Remembered(Prior);

/// The chained digests of `messages`, the history of the `format` body `body` (already
/// parsed), as the proxy hashes them (`crate::prior::hash`) given the last body `prior`;
/// and this body remembered for the next, when the proxy would keep it.
#[must_use]
pub fn hash_history(
    format: Format,
    body: &[u8],
    messages: &[Value],
    prior: Option<&Remembered>,
) -> (Vec<String>, Option<Remembered>) {
    let body = Bytes::copy_from_slice(body);
    let hashed = hash(format, &body, messages, prior.map(|p| &p.0));
    let digests = hashed.digests.to_vec();
    let kept = Prior::keep(body, hashed, &Arc::new(Budget::default())).map(Remembered);
    (digests, kept)
}

/// The upstreams the proxy's checked settings hold, as `scheme://authority` and base path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstreams {
    /// The OpenAI upstream's `(origin, path)`.
    pub openai: (String, String),
    /// The Anthropic upstream's `(origin, path)`.
    pub anthropic: (String, String),
}

/// The proxy's settings checked at startup (`crate::options::Settings::check`) from the
/// defaults with the config file's text and the two upstream URLs given on the command line.
///
/// # Errors
///
/// The check's own: a config file or an upstream it refuses.
pub fn check_settings(
    config_text: Option<String>,
    openai: Option<String>,
    anthropic: Option<String>,
) -> Result<Upstreams, OpsError> {
    let mut options = ServeOptions::new("127.0.0.1:0");
    options.config_text = config_text;
    options.openai_upstream = openai;
    options.anthropic_upstream = anthropic;
    let settings = Settings::check(options)?;
    Ok(Upstreams {
        openai: (settings.openai.origin, settings.openai.path),
        anthropic: (settings.anthropic.origin, settings.anthropic.path),
    })
}

/// The session options the proxy builds for a call in `format` against `window`, with its
/// default settings (`crate::options::Settings::session_options`).
///
/// # Errors
///
/// The settings' check, should the defaults ever be refused.
pub fn session_options(format: Format, window: u64) -> Result<SessionOptions, OpsError> {
    Settings::check(ServeOptions::new("127.0.0.1:0"))
        .map(|settings| settings.session_options(format, window))
}

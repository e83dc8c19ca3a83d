//! Which requests the proxy handles: a path and method to a provider format (compacted), a
//! control endpoint of its own, or a pass-through to the provider that owns the path.

use cutctx_ops::Format;
use hyper::Method;

/// The provider an upstream request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI (and everything not under `/v1/messages`).
    OpenAi,
    /// Anthropic: `/v1/messages` and the paths under it.
    Anthropic,
}

impl Provider {
    /// The provider of requests in `format`.
    ///
    /// ```
    /// use cutctx_ops::Format;
    /// use cutctx_serve::Provider;
    /// assert_eq!(Provider::of(Format::Anthropic), Provider::Anthropic);
    /// assert_eq!(Provider::of(Format::OpenAiResponses), Provider::OpenAi);
    /// ```
    #[must_use]
    pub const fn of(format: Format) -> Self {
        match format {
            Format::Anthropic => Self::Anthropic,
            Format::OpenAiChat | Format::OpenAiResponses => Self::OpenAi,
        }
    }

    /// The provider that owns `path`: `/v1/messages*` is Anthropic's, every other path
    /// OpenAI's.
    #[must_use]
    pub fn owning(path: &str) -> Self {
        if path.starts_with("/v1/messages") {
            Self::Anthropic
        } else {
            Self::OpenAi
        }
    }
}

/// What the proxy does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /healthz`: 200 `ok`.
    Health,
    /// `GET /metrics`: the Prometheus text.
    Metrics,
    /// `POST /v1/compact`: the body that would be sent, without sending it.
    Compact,
    /// A model call in this format: the session decides what is sent.
    Handled(Format),
    /// Anything else: forwarded untouched to this provider.
    Pass(Provider),
}

/// The route of a request by its method and path (the query is not part of `path`).
///
/// ```
/// use cutctx_ops::Format;
/// use cutctx_serve::{Provider, Route, route};
/// use hyper::Method;
/// assert_eq!(route(&Method::POST, "/v1/messages"), Route::Handled(Format::Anthropic));
/// assert_eq!(route(&Method::POST, "/v1/messages/count_tokens"), Route::Pass(Provider::Anthropic));
/// assert_eq!(route(&Method::GET, "/v1/models"), Route::Pass(Provider::OpenAi));
/// ```
#[must_use]
pub fn route(method: &Method, path: &str) -> Route {
    match (method, path) {
        (&Method::GET, "/healthz") => Route::Health,
        (&Method::GET, "/metrics") => Route::Metrics,
        (&Method::POST, "/v1/compact") => Route::Compact,
        (&Method::POST, "/v1/chat/completions") => Route::Handled(Format::OpenAiChat),
        (&Method::POST, "/v1/responses") => Route::Handled(Format::OpenAiResponses),
        (&Method::POST, "/v1/messages") => Route::Handled(Format::Anthropic),
        _ => Route::Pass(Provider::owning(path)),
    }
}

//! `cutctx serve`: a compacting, cache-aware HTTP proxy in front of the OpenAI and Anthropic
//! APIs.
//!
//! A client (an SDK with its base URL pointed here, or an agent) sends its whole history at
//! every call, as it would to the provider. The proxy finds the conversation's cutctx session
//! (named by the `x-cutctx-session` header or by the session id the client already sends, or
//! else the stored session whose history the request extends, always in its caller's scope:
//! its credential, its format and its untouchable part), runs one step of it (the typed
//! [`cutctx_ops::session::Session`] it holds in memory), and forwards what the
//! session says to send: the request byte for byte while it fits the model's window, the
//! session's compacted request (prefix-stable from one firing to the next) once it does not.
//! The response comes back unchanged, streamed chunk by chunk; its `usage` calibrates the
//! session's estimate against the provider's count. See docs/SERVE.md.
//!
//! ```no_run
//! let options = cutctx_serve::ServeOptions::new("127.0.0.1:0");
//! // Blocks until SIGINT or SIGTERM, printing `cutctx serve: listening on ...` once bound.
//! cutctx_serve::run(options)?;
//! # Ok::<(), cutctx_ops::OpsError>(())
//! ```
#![forbid(unsafe_code)]

mod auth;
mod connections;
mod decide;
mod encoding;
mod forward;
#[doc(hidden)]
pub mod fuzzing;
mod metrics;
mod names;
mod options;
mod prior;
mod proxy;
mod read;
mod relay;
mod respond;
mod route;
mod server;
mod sessions;
mod store;
mod summaries;
mod tenant;
mod unreadable;
mod upstream;
mod usage;
mod windows;

pub use options::{DEFAULT_POLICY, DEFAULT_SUMMARY_AHEAD, ServeOptions, SqliteSync, StateSpec};
pub use route::{Provider, Route, route};
pub use server::{Running, run, start};
pub use windows::{DEFAULT_WINDOW, Windows};

//! The client to the providers: HTTPS with the platform's root certificates (plain http to
//! loopback only, checked at startup), a timeout on connecting and on the response's headers,
//! and a stall timeout between the chunks of a streamed body.
//!
//! A response body is pumped to the client through a channel by a task of its own; when the
//! client goes away the channel closes, the task ends and drops the upstream body, which
//! closes the upstream connection: the provider's generation is cancelled.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use cutctx_ops::OpsError;
use cutctx_ops::details;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;

/// Why no response came from the upstream.
#[derive(Debug)]
pub(crate) enum Failure {
    /// It could not be reached, or closed the connection before answering.
    Unreachable(String),
    /// It did not answer within the timeout.
    Timeout,
}

/// The pooled client.
pub(crate) struct Upstream {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl Upstream {
    /// A client whose every wait is bounded by `timeout`; `tls` when some upstream is https
    /// (the platform's root certificates are then required).
    pub(crate) fn new(timeout: Duration, tls: bool) -> Result<Self, OpsError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout));
        http.set_nodelay(true);
        #[expect(
            deprecated,
            reason = "ring is the provider that builds without a C++ toolchain or cmake"
        )]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match builder.with_provider_and_native_roots(Arc::clone(&provider)) {
            Ok(b) => b,
            Err(e) if tls => {
                return Err(OpsError::input(
                    format!(
                        "cannot load the platform's root certificates for https upstreams: {e}"
                    ),
                    details! {},
                ));
            }
            Err(_) => {
                // Only loopback http upstreams: no certificate is ever checked.
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| OpsError::internal(format!("TLS setup failed: {e}"), details! {}))?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
            }
        };
        let https = builder.https_or_http().enable_http1().wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(https);
        Ok(Self { client, timeout })
    }

    /// The stall timeout between body chunks.
    pub(crate) const fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends `request` and waits for the response's headers.
    pub(crate) async fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, Failure> {
        match tokio::time::timeout(self.timeout, self.client.request(request)).await {
            Err(_) => Err(Failure::Timeout),
            Ok(Err(e)) => {
                let why = if e.is_connect() {
                    "cannot connect"
                } else {
                    "the connection failed before the response"
                };
                Err(Failure::Unreachable(why.to_owned()))
            }
            Ok(Ok(r)) => Ok(r),
        }
    }
}

/// A response body fed by a pump task.
#[derive(Debug)]
pub(crate) struct Piped {
    rx: mpsc::Receiver<Result<Frame<Bytes>, io::Error>>,
}

impl Body for Piped {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.rx.poll_recv(cx)
    }
}

/// How a pumped body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Every chunk reached the client.
    Complete,
    /// The upstream failed or stalled; the client's response was cut.
    Failed,
    /// The client went away; the upstream was dropped.
    Cancelled,
}

/// Pumps `body` to the returned [`Piped`] body: every data chunk is shown to `tap` first
/// (with `state`), unchanged; `done` runs once with the state and how it ended. A wait of
/// more than `stall` for the next chunk cuts the response.
pub(crate) fn pump<S: Send + 'static>(
    mut body: Incoming,
    stall: Duration,
    mut state: S,
    mut tap: impl FnMut(&mut S, &[u8]) + Send + 'static,
    done: impl FnOnce(S, End) + Send + 'static,
) -> Piped {
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        let end = loop {
            let next = tokio::select! {
                () = tx.closed() => break End::Cancelled,
                next = tokio::time::timeout(stall, body.frame()) => next,
            };
            match next {
                Err(_) => {
                    let _ = tx
                        .send(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the upstream stalled",
                        )))
                        .await;
                    break End::Failed;
                }
                Ok(None) => break End::Complete,
                Ok(Some(Err(e))) => {
                    let _ = tx.send(Err(io::Error::other(e))).await;
                    break End::Failed;
                }
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        tap(&mut state, data);
                    }
                    if tx.send(Ok(frame)).await.is_err() {
                        break End::Cancelled;
                    }
                }
            }
        };
        drop(body);
        done(state, end);
    });
    Piped { rx }
}

//! The floor the proxy's added latency is measured against (scripts/serve-floor-bench.py): a
//! bare loopback pass-through proxy on the same hyper stack as `cutctx serve`, which reads each
//! request body whole, parses it and counts its prompt once (what any compacting proxy must do
//! at the least), and forwards the bytes as they came, streaming the answer back.
//!
//! ```text
//! cargo run --release -p cutctx-serve --example floor -- UPSTREAM_URL
//! ```
//!
//! It prints `floor: listening on 127.0.0.1:PORT` once bound; requests go to `UPSTREAM_URL`
//! (`http://127.0.0.1:PORT`, loopback only). Not a product: no limits, no TLS.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use cutctx::formats::Format;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

type Body = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// Parses and counts `body` once, as a proxy reading it must.
fn read_once(path: &str, body: &[u8]) -> u64 {
    let format = match path {
        "/v1/messages" => Format::Anthropic,
        "/v1/responses" => Format::OpenAiResponses,
        _ => Format::OpenAiChat,
    };
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(body) else {
        return 0;
    };
    let estimator = cutctx::CharRatioEstimator::default();
    cutctx::session::prompt_tokens(format, &request, &estimator).unwrap_or(0)
}

async fn pass(
    client: Arc<Client<HttpConnector, Full<Bytes>>>,
    upstream: Arc<str>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let body = bytes.clone();
    let counted = tokio::task::spawn_blocking(move || read_once(&path, &body)).await;
    std::hint::black_box(counted.ok());
    let mut out = Request::new(Full::new(bytes));
    *out.method_mut() = parts.method;
    *out.headers_mut() = parts.headers;
    out.headers_mut().remove(hyper::header::HOST);
    let uri = format!(
        "{upstream}{}",
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    *out.uri_mut() = uri.parse().expect("a loopback URL");
    Ok(match client.request(out).await {
        Ok(r) => r.map(BodyExt::boxed),
        Err(_) => {
            let mut r = Response::new(Full::new(Bytes::new()).map_err(|n| match n {}).boxed());
            *r.status_mut() = hyper::StatusCode::BAD_GATEWAY;
            r
        }
    })
}

#[tokio::main]
async fn main() {
    let upstream: Arc<str> = std::env::args().nth(1).expect("UPSTREAM_URL").into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    println!(
        "floor: listening on {}",
        listener.local_addr().expect("bound")
    );
    // As the proxy's: no Nagle delay on either side.
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    let client = Arc::new(Client::builder(TokioExecutor::new()).build(http));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (client, upstream) = (Arc::clone(&client), Arc::clone(&upstream));
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |r| {
                pass(Arc::clone(&client), Arc::clone(&upstream), r)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

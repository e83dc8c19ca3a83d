//! The server: binds, says where it listens (and warns when it listens beyond loopback with
//! no token of its own), accepts connections (each on a task of its own, so sessions run in
//! parallel, at most `--max-connections` at once, each under the timeouts of
//! [`crate::connections`]), and stops gracefully on SIGINT or SIGTERM, letting the calls in
//! flight finish (for at most [`DRAIN`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cutctx_ops::OpsError;
use cutctx_ops::details;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::connections::{Activity, Watched, backoff, tracked, watch};

use crate::metrics::{Metrics, add};
use crate::options::{ServeOptions, Settings};
use crate::proxy::{App, handle, log};
use crate::sessions::Locks;
use crate::store::Store;
use crate::upstream::Upstream;

/// How long a stop waits for the calls in flight.
const DRAIN: Duration = Duration::from_secs(10);

fn runtime() -> Result<tokio::runtime::Runtime, OpsError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| OpsError::internal(format!("cannot start the runtime: {e}"), details! {}))
}

/// A listener on `address` whose backlog holds a burst of new connections as large as the
/// connection cap (within 128 and 4,096; the system may cap it lower): connections past the cap
/// wait there to be accepted rather than being refused or retried.
async fn listen(address: &str, cap: usize) -> std::io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(address).await? {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        let backlog = u32::try_from(cap.clamp(128, 4096)).unwrap_or(128);
        match socket.bind(addr).and_then(|()| socket.listen(backlog)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the address names no host",
        )
    }))
}

/// Checks `options`, opens the store, builds the client and binds the listener.
async fn prepare(options: ServeOptions) -> Result<(TcpListener, Arc<App>), OpsError> {
    let settings = Settings::check(options)?;
    let store = Arc::new(Store::open(&settings.state, settings.sqlite_sync)?);
    let upstream = Upstream::new(settings.upstream_timeout, settings.needs_tls())?;
    let listener = listen(&settings.listen, settings.max_connections)
        .await
        .map_err(|e| {
            OpsError::input(
                format!("cannot listen on {}: {e}", settings.listen),
                details! { "listen" => settings.listen.as_str() },
            )
        })?;
    let app = Arc::new(App {
        settings,
        store,
        upstream,
        metrics: Metrics::default(),
        locks: Locks::default(),
        bodies: Arc::default(),
        summaries: crate::summaries::Shared::default(),
    });
    Ok((listener, app))
}

/// Whether a proxy listening on `listen` is reachable beyond this machine with no token of
/// its own to check (`tokens`): an address that is not loopback (`0.0.0.0`, `[::]`, a host's
/// own address, an empty host).
fn open_beyond_loopback(listen: &str, tokens: bool) -> bool {
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h);
    !tokens && !crate::options::is_loopback(host)
}

/// The warning when the proxy listens beyond loopback and checks no token of its own.
fn warn_if_open(app: &App) {
    let listen = &app.settings.listen;
    if !open_beyond_loopback(listen, app.settings.auth.required()) {
        return;
    }
    log(&serde_json::json!({
        "event": "warning", "warning": "unauthenticated",
        "message": format!("cutctx serve listens on {listen}, beyond loopback, and checks no token: anyone who can reach it can use it to call the provider with their key and fill its session store; set --auth-token or --auth-tokens-file"),
    }));
}

/// Serves one client connection, holding `permit` until it closes.
fn connection(
    app: &Arc<App>,
    graceful: &GracefulShutdown,
    stream: TcpStream,
    permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    add(&app.metrics.connections, 1);
    let activity = Activity::new();
    let service = {
        let (app, activity) = (Arc::clone(app), Arc::clone(&activity));
        service_fn(move |r| {
            let busy = activity.request();
            let app = Arc::clone(&app);
            async move { handle(app, r).await.map(|response| tracked(response, busy)) }
        })
    };
    let io = TokioIo::new(Watched::new(stream, Arc::clone(&activity)));
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(app.settings.idle_timeout)
        .serve_connection(io, service);
    let conn = graceful.watch(conn);
    let limit = app.settings.header_timeout;
    tokio::spawn(async move {
        watch(
            async move {
                let _ = conn.await;
            },
            &activity,
            limit,
        )
        .await;
        drop(permit);
    });
}

/// Accepts connections until `stop` resolves, then drains.
async fn serve(listener: TcpListener, app: Arc<App>, stop: impl Future<Output = ()>) {
    if let Some(line) = app.store.opening_note() {
        log(&line);
    }
    warn_if_open(&app);
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(app.settings.max_connections));
    let mut failures = 0_u32;
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            () = &mut stop => break,
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    failures = 0;
                    connection(&app, &graceful, stream, permit);
                }
                Err(e) => {
                    // The descriptor limit, most often: wait for connections to close rather
                    // than retry at once.
                    add(&app.metrics.accept_errors, 1);
                    if failures == 0 {
                        log(&serde_json::json!({"event": "accept_failed", "kind": format!("{:?}", e.kind())}));
                    }
                    let pause = backoff(failures);
                    failures = failures.saturating_add(1);
                    drop(permit);
                    tokio::select! {
                        () = &mut stop => break,
                        () = tokio::time::sleep(pause) => {}
                    }
                }
            }
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN) => {}
    }
}

/// Resolves at SIGINT or SIGTERM.
async fn signalled() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `cutctx serve`: runs the proxy until SIGINT or SIGTERM. Once bound it prints exactly one
/// line on standard error, `cutctx serve: listening on HOST:PORT` (the real port), then one
/// JSON object per line for what it does.
///
/// # Errors
///
/// A setting that does not check (`VALIDATION_ERROR`), a store or address that cannot be
/// opened (`INPUT_ERROR`).
pub fn run(options: ServeOptions) -> Result<(), OpsError> {
    let rt = runtime()?;
    rt.block_on(async {
        let (listener, app) = prepare(options).await?;
        let addr = listener.local_addr().map_err(|e| {
            OpsError::internal(format!("the listener has no address: {e}"), details! {})
        })?;
        {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr().lock(),
                "cutctx serve: listening on {addr}"
            );
        }
        serve(listener, app, signalled()).await;
        log(&serde_json::json!({"event": "stopped"}));
        Ok(())
    })
}

/// A proxy running on threads of its own, for a program (or a test) that embeds it.
/// Dropping it stops the proxy.
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// The address it listens on.
    #[must_use]
    pub const fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it gracefully and waits until it has.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Starts the proxy on a runtime of its own and returns once it listens.
///
/// # Errors
///
/// As [`run`].
///
/// ```
/// let mut options = cutctx_serve::ServeOptions::new("127.0.0.1:0");
/// options.state = cutctx_serve::StateSpec::Memory;
/// options.openai_upstream = Some("http://127.0.0.1:9".into());
/// options.anthropic_upstream = Some("http://127.0.0.1:9".into());
/// let running = cutctx_serve::start(options)?;
/// assert!(running.addr().port() > 0);
/// running.stop();
/// # Ok::<(), cutctx_ops::OpsError>(())
/// ```
pub fn start(options: ServeOptions) -> Result<Running, OpsError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = match runtime() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        rt.block_on(async move {
            let (listener, app) = match prepare(options).await {
                Ok(p) => p,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let addr = listener.local_addr();
            let _ = ready_tx.send(addr.map_err(|e| {
                OpsError::internal(format!("the listener has no address: {e}"), details! {})
            }));
            serve(listener, app, async {
                let _ = stop_rx.await;
            })
            .await;
        });
    });
    let addr = ready_rx.recv().map_err(|_| {
        OpsError::internal("the proxy's thread ended before it listened", details! {})
    })??;
    Ok(Running {
        addr,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use super::open_beyond_loopback;

    #[test]
    fn listening_beyond_loopback_without_tokens_is_what_warns() {
        for open in [
            "0.0.0.0:8080",
            "[::]:8080",
            ":8080",
            "192.168.1.4:80",
            "proxy.lan:80",
        ] {
            assert!(open_beyond_loopback(open, false), "{open}");
            assert!(!open_beyond_loopback(open, true), "{open} with tokens");
        }
        for local in [
            "127.0.0.1:8080",
            "127.3.4.5:1",
            "[::1]:8080",
            "localhost:8080",
        ] {
            assert!(!open_beyond_loopback(local, false), "{local}");
        }
    }
}

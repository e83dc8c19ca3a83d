//! Connection hygiene: what bounds a client connection's hold on the proxy.
//!
//! - **Idle**: hyper's head-read timer, set to `--idle-timeout-ms`, runs from the moment a
//!   connection opens or its last response ends until a whole request head has come; an idle
//!   keep-alive connection is closed when it runs out.
//! - **Slow head**: once a head has begun (its first byte read with no request in flight), it
//!   must be whole within `--header-timeout-ms`, or the connection is closed ([`watch`]).
//! - **How many**: at most `--max-connections` at once ([`default_connections`]); more wait in
//!   the listener's backlog, and a failed accept (the descriptor limit) backs off instead of
//!   spinning.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::respond::Body;

/// The most connections by default, where the descriptor limit allows.
const DEFAULT_CONNECTIONS: usize = 1024;

/// The default of `--max-connections`: [`DEFAULT_CONNECTIONS`], or, where the soft limit on
/// open descriptors is lower, half of what it leaves after a reserve for the store and the
/// listener (the other half is for the calls' upstream connections).
pub(crate) fn default_connections() -> usize {
    open_file_limit().map_or(DEFAULT_CONNECTIONS, |limit| {
        (limit.saturating_sub(32) / 2).clamp(1, DEFAULT_CONNECTIONS)
    })
}

/// The soft limit on open descriptors, where the system says (Linux's `/proc/self/limits`).
fn open_file_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// What one connection is doing: how many requests are in flight, and since when (in
/// milliseconds after `epoch`, 0 for not) a request head has been arriving.
#[derive(Debug)]
pub(crate) struct Activity {
    epoch: Instant,
    busy: AtomicUsize,
    head_since: AtomicU64,
}

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            busy: AtomicUsize::new(0),
            head_since: AtomicU64::new(0),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Bytes came in: with no request in flight, they begin a head.
    fn read(&self) {
        if self.busy.load(Ordering::Acquire) == 0 {
            let _ = self.head_since.compare_exchange(
                0,
                self.now(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }

    /// A request's head is whole: it is in flight until its response body is done with.
    pub(crate) fn request(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(0, Ordering::Release);
        Busy(Arc::clone(self))
    }

    /// How long until the head in progress is overdue (`None`: no head in progress).
    fn head_left(&self, limit: Duration) -> Option<Duration> {
        let since = self.head_since.load(Ordering::Acquire);
        if since == 0 || self.busy.load(Ordering::Acquire) > 0 {
            return None;
        }
        let limit = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
        let elapsed = self.now().saturating_sub(since);
        Some(Duration::from_millis(limit.saturating_sub(elapsed)))
    }
}

/// A request in flight; its end when dropped (with the response body that holds it).
#[derive(Debug)]
pub(crate) struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds its request's [`Busy`] until it has been sent or dropped.
struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `response` with its body holding `busy`.
pub(crate) fn tracked(response: hyper::Response<Body>, busy: Busy) -> hyper::Response<Body> {
    response.map(|inner| Tracked { inner, _busy: busy }.boxed())
}

/// A client's socket that tells its [`Activity`] when bytes come in.
pub(crate) struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    pub(crate) const fn new(inner: S, activity: Arc<Activity>) -> Self {
        Self { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.read();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Runs `conn` until it ends, or until a request head it has begun is overdue (`limit`):
/// then it is dropped, which closes the connection.
pub(crate) async fn watch(conn: impl Future<Output = ()>, activity: &Activity, limit: Duration) {
    tokio::pin!(conn);
    loop {
        let wait = activity.head_left(limit).unwrap_or(limit);
        if wait.is_zero() {
            return;
        }
        tokio::select! {
            () = &mut conn => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The pause after the `n`th accept failure in a row: 10 ms, doubled each time, at most 1 s.
pub(crate) fn backoff(n: u32) -> Duration {
    Duration::from_millis(10_u64.saturating_mul(1 << n.min(7)).min(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_timed_only_while_no_request_is_in_flight() {
        let a = Activity::new();
        let limit = Duration::from_secs(10);
        assert_eq!(a.head_left(limit), None);
        a.read();
        assert!(a.head_left(limit).is_some_and(|d| d <= limit));
        let busy = a.request();
        a.read();
        assert_eq!(a.head_left(limit), None, "a body, or a pipelined head");
        drop(busy);
        a.read();
        assert!(a.head_left(limit).is_some());
        assert_eq!(backoff(0), Duration::from_millis(10));
        assert_eq!(backoff(3), Duration::from_millis(80));
        assert_eq!(backoff(30), Duration::from_secs(1));
    }
}

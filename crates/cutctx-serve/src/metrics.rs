//! The proxy's counters, as Prometheus text at `GET /metrics`: every name `cutctx_serve_*`,
//! totals since the start, the two latencies as summaries (`_sum` and `_count`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    pub(crate) firings: AtomicU64,
    pub(crate) tokens_in: AtomicU64,
    pub(crate) tokens_out: AtomicU64,
    pub(crate) provider_cached: AtomicU64,
    pub(crate) provider_uncached: AtomicU64,
    pub(crate) saved_units: AtomicU64,
    pub(crate) passthrough: AtomicU64,
    pub(crate) fail_open: AtomicU64,
    upstream_micros: AtomicU64,
    upstream_count: AtomicU64,
    added_micros: AtomicU64,
    added_count: AtomicU64,
}

/// Adds `n` to a counter.
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Metrics {
    /// Counts one request of `format` (`openai-chat`, ..., or `other`) that ended in `outcome`.
    pub(crate) fn request(&self, format: &'static str, outcome: &'static str) {
        if let Ok(mut m) = self.requests.lock() {
            *m.entry((format, outcome)).or_insert(0) += 1;
        }
    }

    /// Observes the wait for the upstream's response headers.
    pub(crate) fn upstream(&self, d: Duration) {
        add(&self.upstream_micros, micros(d));
        add(&self.upstream_count, 1);
    }

    /// Observes the time the proxy itself added before forwarding (reading, compacting,
    /// committing the state).
    pub(crate) fn added(&self, d: Duration) {
        add(&self.added_micros, micros(d));
        add(&self.added_count, 1);
    }

    /// The Prometheus text exposition.
    pub(crate) fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# HELP cutctx_serve_requests_total Requests by format and outcome.\n# TYPE cutctx_serve_requests_total counter"
        );
        if let Ok(m) = self.requests.lock() {
            for ((format, outcome), n) in m.iter() {
                let _ = writeln!(
                    s,
                    "cutctx_serve_requests_total{{format=\"{format}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        let counters: [(&str, &str, &AtomicU64); 8] = [
            (
                "firings_total",
                "Calls whose session compacted.",
                &self.firings,
            ),
            (
                "tokens_in_total",
                "Estimated prompt tokens of the requests as received.",
                &self.tokens_in,
            ),
            (
                "tokens_out_total",
                "Estimated prompt tokens of the requests as forwarded.",
                &self.tokens_out,
            ),
            (
                "provider_cached_tokens_total",
                "Prompt tokens the provider reported read from its cache.",
                &self.provider_cached,
            ),
            (
                "provider_uncached_tokens_total",
                "Prompt tokens the provider reported not cached.",
                &self.provider_uncached,
            ),
            (
                "saved_units_total",
                "Estimated prompt tokens not sent (received minus forwarded).",
                &self.saved_units,
            ),
            (
                "passthrough_total",
                "Requests forwarded untouched (other paths, bypass, previous_response_id).",
                &self.passthrough,
            ),
            (
                "fail_open_total",
                "Requests the proxy could not read or compact, forwarded unchanged.",
                &self.fail_open,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                s,
                "# HELP cutctx_serve_{name} {help}\n# TYPE cutctx_serve_{name} counter\ncutctx_serve_{name} {}",
                v.load(Ordering::Relaxed)
            );
        }
        for (name, help, sum, count) in [
            (
                "upstream_seconds",
                "Wait for the upstream's response headers.",
                &self.upstream_micros,
                &self.upstream_count,
            ),
            (
                "added_seconds",
                "Time the proxy added before forwarding a request.",
                &self.added_micros,
                &self.added_count,
            ),
        ] {
            #[expect(clippy::cast_precision_loss, reason = "a latency sum in seconds")]
            let secs = sum.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                s,
                "# HELP cutctx_serve_{name} {help}\n# TYPE cutctx_serve_{name} summary\ncutctx_serve_{name}_sum {secs}\ncutctx_serve_{name}_count {}",
                count.load(Ordering::Relaxed)
            );
        }
        s
    }
}

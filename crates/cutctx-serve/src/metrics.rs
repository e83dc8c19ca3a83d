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
    unreadable: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    opaque: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    sessions: Mutex<BTreeMap<&'static str, u64>>,
    summaries: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    pub(crate) summary_input_tokens: AtomicU64,
    pub(crate) summary_cached_tokens: AtomicU64,
    pub(crate) summary_output_tokens: AtomicU64,
    pub(crate) session_restarts: AtomicU64,
    pub(crate) firings: AtomicU64,
    pub(crate) tokens_in: AtomicU64,
    pub(crate) tokens_out: AtomicU64,
    pub(crate) provider_cached: AtomicU64,
    pub(crate) provider_uncached: AtomicU64,
    pub(crate) saved_units: AtomicU64,
    pub(crate) passthrough: AtomicU64,
    pub(crate) fail_open: AtomicU64,
    pub(crate) quarantined: AtomicU64,
    pub(crate) store_full: AtomicU64,
    pub(crate) rolled_back: AtomicU64,
    pub(crate) unauthorized: AtomicU64,
    pub(crate) connections: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
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

    /// Counts one request of `format` the proxy could not read or compact, for `reason`
    /// (`not_json`, `encoding`, ...), whether it was then forwarded or refused.
    pub(crate) fn unreadable(&self, format: &'static str, reason: &'static str) {
        if let Ok(mut m) = self.unreadable.lock() {
            *m.entry((format, reason)).or_insert(0) += 1;
        }
    }

    /// Counts `n` items of a `format` request carried untouched for `reason` (a role, block
    /// or item type cutctx does not know, a provider compaction, ...).
    pub(crate) fn opaque(&self, format: &'static str, reason: &'static str, n: u64) {
        if let Ok(mut m) = self.opaque.lock() {
            *m.entry((format, reason)).or_insert(0) += n;
        }
    }

    /// Counts one session started, found by `source` (`x-cutctx-session`, ..., `history`).
    pub(crate) fn session(&self, source: &'static str) {
        if let Ok(mut m) = self.sessions.lock() {
            *m.entry(source).or_insert(0) += 1;
        }
    }

    /// Counts one summary made ahead of a firing, of `kind` (`native`, `cached`), by what became
    /// of it (`made`, `stale`, `failed`, `swapped`, `fallback`).
    pub(crate) fn summary(&self, kind: &'static str, outcome: &'static str) {
        if let Ok(mut m) = self.summaries.lock() {
            *m.entry((kind, outcome)).or_insert(0) += 1;
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
        self.render_labelled(&mut s);
        let counters: [(&str, &str, &AtomicU64); 18] = [
            (
                "summary_input_tokens_total",
                "Prompt tokens the provider reported for the summarizing calls.",
                &self.summary_input_tokens,
            ),
            (
                "summary_cached_tokens_total",
                "Of those, read from the provider's cache.",
                &self.summary_cached_tokens,
            ),
            (
                "summary_output_tokens_total",
                "Output tokens the provider reported for the summarizing calls.",
                &self.summary_output_tokens,
            ),
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
            (
                "session_restarts_total",
                "Calls whose session started over: the history was rewound or changed.",
                &self.session_restarts,
            ),
            (
                "sessions_quarantined_total",
                "Sessions whose stored state did not read, moved to the quarantine table.",
                &self.quarantined,
            ),
            (
                "store_full_total",
                "New sessions not stored: the store was full and their tenant had none to give up.",
                &self.store_full,
            ),
            (
                "rolled_back_total",
                "Calls whose state was rolled back because the provider refused their credential.",
                &self.rolled_back,
            ),
            (
                "unauthorized_total",
                "Requests refused for a missing or wrong proxy token.",
                &self.unauthorized,
            ),
            (
                "connections_total",
                "Client connections accepted.",
                &self.connections,
            ),
            (
                "accept_errors_total",
                "Failed accepts (such as the descriptor limit), each followed by a backoff.",
                &self.accept_errors,
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

    /// The counters with labels beside `requests_total`: unreadable requests and opaque items
    /// by format and reason, sessions started by what found them.
    fn render_labelled(&self, s: &mut String) {
        let by_format_and_reason = |m: &BTreeMap<(&str, &str), u64>| -> Vec<(String, u64)> {
            m.iter()
                .map(|((format, reason), n)| {
                    (format!("format=\"{format}\",reason=\"{reason}\""), *n)
                })
                .collect()
        };
        if let Ok(m) = self.unreadable.lock() {
            counter(
                s,
                "unreadable_total",
                "Requests the proxy could not read or compact, by format and reason.",
                &by_format_and_reason(&m),
            );
        }
        if let Ok(m) = self.opaque.lock() {
            counter(
                s,
                "opaque_items_total",
                "Items carried untouched while compaction went on around them, by format and reason, counted in each request that holds them.",
                &by_format_and_reason(&m),
            );
        }
        if let Ok(m) = self.summaries.lock() {
            let rows: Vec<(String, u64)> = m
                .iter()
                .map(|((kind, outcome), n)| (format!("kind=\"{kind}\",outcome=\"{outcome}\""), *n))
                .collect();
            counter(
                s,
                "summaries_total",
                "Summaries made ahead of a firing, by kind (native, cached) and what became of them (made, stale, failed, swapped; fallback: a firing that compacted with the policy instead).",
                &rows,
            );
        }
        if let Ok(m) = self.sessions.lock() {
            let rows: Vec<(String, u64)> = m
                .iter()
                .map(|(source, n)| (format!("source=\"{source}\""), *n))
                .collect();
            counter(
                s,
                "sessions_total",
                "Sessions started, by what named them.",
                &rows,
            );
        }
    }
}

/// One labelled counter `cutctx_serve_{name}`: its help and type, then a line per label set.
fn counter(s: &mut String, name: &str, help: &str, rows: &[(String, u64)]) {
    let _ = writeln!(
        s,
        "# HELP cutctx_serve_{name} {help}\n# TYPE cutctx_serve_{name} counter"
    );
    for (labels, n) in rows {
        let _ = writeln!(s, "cutctx_serve_{name}{{{labels}}} {n}");
    }
}

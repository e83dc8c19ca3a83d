//! `hindsight`: an offline reference strategy that knows the whole run and chooses the calls at
//! which to fire by dynamic programming, to see how far the session's online rule (fire when
//! the request would cross the window) is from the best firing schedule under the same
//! compaction.
//!
//! **What it may do.** Fire at any call whose whole request exceeds half the window (below
//! that a firing to the session's target saves little), compacting the whole history there
//! exactly as the session's firing does (the same policy, target and stand-in summaries,
//! with the same summarizing calls charged); between firings, send the last compaction's
//! prefix with the new messages appended, as the session does. Every call must fit the
//! window, except one whose untouchable part alone exceeds it: there the strategy keeps its
//! compacted prefix and appends (it never sends the whole history because of it).
//!
//! **How it chooses.** Over the firing points, `O(calls²)`: the cost of a stretch of calls
//! after a firing is estimated from token counts alone under the cache model (the stretch's
//! first call reads the tools and system prompt and writes the rest; each later one reads
//! the previous request and writes what it appends), plus the firing's summarizing calls; the
//! schedule of least estimated cost is then replayed and priced exactly by the same meter as
//! every strategy. With no schedule that keeps every call in the window it falls back to the
//! session's own calls. Ties go to the earliest firing, so the result is deterministic.

use cutctx_formats::{FormatError, message_list as history};

use cutctx_session::cache::SummaryCall;
use cutctx_session::compact_to;

use crate::replay::{Context, Sent, ask, plan_spans, stand_in, system_end};

/// A firing candidate: the compacted list and what the firing invalidated and asked.
struct Candidate {
    list: Vec<serde_json::Value>,
    tokens: u64,
    reasoning: cutctx_formats::ReasoningOutcome,
    /// The spans its summaries replace, and the summaries' tokens.
    spans: Vec<(u64, u64)>,
}

/// The hindsight strategy's calls over `context`'s run; `fallback` (the session's calls) when
/// no schedule fits.
///
/// # Errors
///
/// A compaction's failure other than an unsatisfiable budget or an open reasoning loop.
#[expect(
    clippy::cast_precision_loss,
    reason = "token counts are far below 2^52"
)]
pub(crate) fn plan(context: &Context<'_>, fallback: Vec<Sent>) -> Result<Vec<Sent>, FormatError> {
    let config = context.config;
    let format = context.format();
    let messages = context.messages();
    let points = &context.points;
    let n = points.len();
    let mut prefix = vec![0_u64; messages.len() + 1];
    for (i, t) in context.tokens.iter().enumerate() {
        prefix[i + 1] = prefix[i] + t;
    }
    let mut summarize = stand_in;
    let mut candidates: Vec<Option<Candidate>> = Vec::with_capacity(n);
    for &len in points {
        let full = context.fixed + prefix[len] + config.reserve_output;
        if full <= config.window / 2 {
            candidates.push(None);
            continue;
        }
        let request = crate::replay::request_at(format, context.run, len);
        match compact_to(config, &request, config.target, true, &mut summarize) {
            Ok(fitted) => {
                let list = history(format, &fitted.document).to_vec();
                let tokens = context.list_tokens(&list)?;
                candidates.push(Some(Candidate {
                    list,
                    tokens,
                    reasoning: fitted.reasoning,
                    spans: plan_spans(&fitted.input, &fitted.plan),
                }));
            }
            Err(e) if crate::replay::unsatisfiable(&e) || crate::replay::open_loop(&e) => {
                candidates.push(None);
            }
            Err(e) => return Err(e),
        }
    }
    let prices = context.prices;
    let read = prices.cache_read;
    let write = if prices.breakpoints {
        prices.cache_write
    } else {
        1.0
    };
    let system = context.fixed
        + prefix[system_end(
            format,
            &crate::replay::request_at(format, context.run, points.first().copied().unwrap_or(0)),
        )];
    // The estimated cost of the calls of the stretch starting at `start` (None: the run's
    // start, unfired), cumulated: cum[i - s] for calls s..i; and how far it stays valid.
    let stretch = |start: Option<usize>| -> (Vec<f64>, usize) {
        let (s, base, base_len) = match start {
            None => (0, 0, 0),
            Some(j) => {
                let c = candidates[j].as_ref();
                (j, c.map_or(0, |c| c.tokens), points[j])
            }
        };
        let mut cum = vec![0.0];
        let mut previous: Option<u64> = None;
        let mut reach = n;
        for i in s..n {
            let size = context.fixed + base + prefix[points[i]] - prefix[base_len];
            if size + config.reserve_output > config.window && !context.stuck[i] {
                reach = i;
                break;
            }
            let cost = match previous {
                Some(p) => p as f64 * read + size.saturating_sub(p) as f64 * write,
                None if start.is_none() && !context.options.warm_prefix => size as f64 * write,
                None => {
                    let held = system.min(size);
                    held as f64 * read + (size - held) as f64 * write
                }
            };
            cum.push(cum.last().copied().unwrap_or(0.0) + cost);
            previous = Some(size);
        }
        (cum, reach)
    };
    let firing_cost = |j: usize| -> f64 {
        candidates[j].as_ref().map_or(0.0, |c| {
            // An estimate for choosing the schedule alone (each span as a fresh prompt, the
            // instruction left out); the meter charges the schedule chosen by the one rule.
            c.spans
                .iter()
                .map(|&(input, output)| {
                    prices.summary_units(&SummaryCall {
                        input_tokens: input,
                        cached_tokens: 0,
                        output_tokens: output,
                    })
                })
                .sum()
        })
    };
    let (start_cum, start_reach) = stretch(None);
    let stretches: Vec<Option<(Vec<f64>, usize)>> = (0..n)
        .map(|j| candidates[j].as_ref().map(|_| stretch(Some(j))))
        .collect();
    // best[j]: the least estimated cost of calls 0..j with a firing at j, and where the
    // stretch before it started (None: the unfired start).
    let mut best: Vec<Option<(f64, Option<usize>)>> = vec![None; n];
    for j in 0..n {
        if candidates[j].is_none() {
            continue;
        }
        let mut choice: Option<(f64, Option<usize>)> = None;
        if j <= start_reach {
            choice = Some((start_cum[j], None));
        }
        for p in 0..j {
            let (Some((cost_p, _)), Some((cum, reach))) = (best[p], &stretches[p]) else {
                continue;
            };
            if j <= *reach {
                let c = cost_p + cum[j - p];
                if choice.is_none_or(|(b, _)| c < b) {
                    choice = Some((c, Some(p)));
                }
            }
        }
        best[j] = choice.map(|(c, from)| (c + firing_cost(j), from));
    }
    let mut end: Option<(f64, Option<usize>)> = None;
    if start_reach == n {
        end = start_cum.get(n).map(|&c| (c, None));
    }
    for p in 0..n {
        let (Some((cost_p, _)), Some((cum, reach))) = (best[p], &stretches[p]) else {
            continue;
        };
        if *reach == n {
            let c = cost_p + cum[n - p];
            if end.is_none_or(|(b, _)| c < b) {
                end = Some((c, Some(p)));
            }
        }
    }
    let Some((_, mut last)) = end else {
        return Ok(fallback);
    };
    let mut firings = Vec::new();
    while let Some(j) = last {
        firings.push(j);
        last = best[j].and_then(|(_, from)| from);
    }
    firings.reverse();
    let mut out: Vec<Sent> = Vec::with_capacity(n);
    let mut current: Option<usize> = None;
    let mut next = firings.iter().peekable();
    for (i, &len) in points.iter().enumerate() {
        let fires = next.peek().is_some_and(|&&j| j == i);
        if fires {
            next.next();
            current = Some(i);
        }
        let list = match current {
            None => messages.get(..len).unwrap_or(&[]).to_vec(),
            Some(j) => {
                let c = candidates[j].as_ref().map_or(&[][..], |c| &c.list[..]);
                let mut list = c.to_vec();
                list.extend_from_slice(messages.get(points[j]..len).unwrap_or(&[]));
                list
            }
        };
        let request = context.with_list(list);
        let marks = context.marks(&request);
        let mut sent = Sent::plain(request, marks, context.stuck[i]);
        if fires && let Some(c) = candidates[i].as_ref() {
            sent.compacted = true;
            sent.reasoning = Some(c.reasoning.clone());
            let previous = out
                .last()
                .map(|s| (&s.request, if i == 0 { 0 } else { points[i - 1] }));
            let whole = crate::replay::request_at(format, context.run, len);
            sent.summary = ask(
                context.summary_input,
                format,
                previous,
                &whole,
                c.spans.clone(),
            );
        }
        out.push(sent);
    }
    Ok(out)
}

//! `cutctx replay`: the replay of a recorded agent loop that prices strategies against each
//! other, with its table, its JSON line and its charts.
//!
//! It takes texts and returns texts; the binary reads the run and the price table, and writes
//! the SVGs.

use cutctx::formats::Format;
use cutctx::model::details;
use cutctx::replay::summaries::{SummaryCost, SummaryFiring};
use cutctx::replay::{Marking, Replay, ReplayOptions, StrategyReport};
use cutctx::session::PriceTable;
use serde_json::Value;

use crate::OpsError;
use crate::formats::from_format;
use crate::session::{Breakpoints, Tuning, config, estimator_spec};

/// How `cutctx replay` marks the requests it prices for a provider that caches at breakpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplayMarks {
    /// Every strategy marks the end of the system prefix and the last message.
    #[default]
    Shared,
    /// Only the session marks the end of the system prefix (and of its compacted prefix);
    /// none and stateless mark the last message alone. Favours the session.
    SessionOnly,
}

impl ReplayMarks {
    /// Every setting, in a fixed order.
    pub const ALL: [Self; 2] = [Self::Shared, Self::SessionOnly];

    /// The setting's name, as `--marks` spells it: `"shared"` or `"session-only"`.
    ///
    /// ```
    /// assert_eq!(cutctx_ops::replay::ReplayMarks::SessionOnly.as_str(), "session-only");
    /// ```
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::SessionOnly => "session-only",
        }
    }
}

impl From<ReplayMarks> for Marking {
    fn from(m: ReplayMarks) -> Self {
        match m {
            ReplayMarks::Shared => Self::Shared,
            ReplayMarks::SessionOnly => Self::SessionOnly,
        }
    }
}

/// The options of `cutctx replay`.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    /// The run's format.
    pub format: Format,
    /// The window, in tokens.
    pub window: Option<u64>,
    /// The window, as a fraction of the whole run's final size (default 0.7).
    pub window_fraction: Option<f64>,
    /// `auto` ([`AUTO_PRICING`]: the run's model's table, [`PriceTable::for_model`], else
    /// anthropic), anthropic, openai, deepseek, or a JSON price table file.
    pub pricing: String,
    /// Print the figures as one line of JSON instead of a table.
    pub json: bool,
    /// Where the requests carry cache breakpoints (Anthropic-style pricing): `shared` (the
    /// default) marks every strategy's system prefix and last message alike; `session-only`
    /// marks the system prefix of the session's requests alone.
    pub marks: ReplayMarks,
    /// Start the run with its tools and system prompt already cached, as when many
    /// conversations share them; every strategy (and the lower bound) starts equally warm.
    /// Off by default: nothing is shared between runs.
    pub warm_prefix: bool,
    /// Add the offline reference `hindsight` and the peer strategies.
    pub compare: bool,
    /// Strategies whose requests were produced elsewhere: name and the text of its JSONL file.
    pub external: Vec<(String, String)>,
    /// The `N` of "the last N tool results kept verbatim" (default 5).
    pub retention_last: usize,
    /// How compactions' summarizing calls are asked: `cached` (the default) or `span`.
    pub summary_input: cutctx::replay::SummaryInput,
    /// The settings shared with `session`.
    pub tuning: Tuning,
}

/// What `cutctx replay` produces: the table (or JSON line), the chart and the cost against
/// retention chart.
#[derive(Debug, Clone)]
pub struct ReplayOutput {
    /// For standard output.
    pub output: String,
    /// The chart of context per call and cumulative cost.
    pub svg: String,
    /// The chart of cost against retention, one point per strategy.
    pub frontier_svg: String,
}

/// One external strategy's calls from the text of its JSONL file: per line the whole request,
/// or an object `{"request", "summary_input_tokens", "summary_cached_tokens",
/// "summary_output_tokens"}` charging a summarizing call made before it.
///
/// # Errors
///
/// `INPUT_ERROR` for a line that is not JSON, naming the strategy and the line;
/// `VALIDATION_ERROR` for a figure that is not a count.
pub fn external_calls(
    name: &str,
    text: &str,
) -> Result<Vec<cutctx::replay::ExternalCall>, OpsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| {
            OpsError::input(
                format!(
                    "line {} of the external strategy {name:?} is not JSON: {e}",
                    i + 1
                ),
                details! { "strategy" => name, "line" => i + 1 },
            )
        })?;
        let wrapped = v.as_object().is_some_and(|m| {
            m.contains_key("request")
                && m.keys().all(|k| {
                    matches!(
                        k.as_str(),
                        "request"
                            | "summary_input_tokens"
                            | "summary_cached_tokens"
                            | "summary_output_tokens"
                    )
                })
        });
        if !wrapped {
            out.push(cutctx::replay::ExternalCall {
                request: v,
                summary: None,
            });
            continue;
        }
        let count = |key: &str| -> Result<u64, OpsError> {
            match v.get(key) {
                None => Ok(0),
                Some(x) => x.as_u64().ok_or_else(|| {
                    OpsError::validation(
                        format!(
                            "{key} on line {} of the external strategy {name:?} must be a count",
                            i + 1
                        ),
                        details! { "strategy" => name, "line" => i + 1, "field" => key },
                    )
                }),
            }
        };
        let summary = cutctx::session::cache::SummaryCall {
            input_tokens: count("summary_input_tokens")?,
            cached_tokens: count("summary_cached_tokens")?,
            output_tokens: count("summary_output_tokens")?,
        };
        let any = summary != cutctx::session::cache::SummaryCall::default();
        out.push(cutctx::replay::ExternalCall {
            request: v.get("request").cloned().unwrap_or(Value::Null),
            summary: any.then_some(summary),
        });
    }
    Ok(out)
}

/// The `--pricing` value that has the replay price the run by its model's table
/// ([`PriceTable::for_model`]), and by the anthropic table when no table covers the model.
pub const AUTO_PRICING: &str = "auto";

/// The price table `--pricing` names: a shipped one, or the text of a file (`file_text`).
/// For [`AUTO_PRICING`], the anthropic table, which [`replay`] replaces by the run's model's
/// when one covers it ([`run_prices`]).
///
/// ```
/// use cutctx_ops::replay::{AUTO_PRICING, prices};
/// assert_eq!(prices("openai", None).expect("shipped").name, "openai");
/// assert_eq!(prices(AUTO_PRICING, None).expect("shipped").name, "anthropic");
/// ```
///
/// # Errors
///
/// `VALIDATION_ERROR` for a table file that is not one.
pub fn prices(name: &str, file_text: Option<&str>) -> Result<PriceTable, OpsError> {
    if name == AUTO_PRICING {
        return Ok(PriceTable::anthropic());
    }
    if let Some(t) = PriceTable::named(name) {
        return Ok(t);
    }
    let Some(text) = file_text else {
        return Err(OpsError::validation(
            format!(
                "unknown price table {name:?}; expected {AUTO_PRICING}, {} or a JSON price table file",
                PriceTable::NAMES.join(", ")
            ),
            details! { "pricing" => name },
        ));
    };
    PriceTable::from_json(text).map_err(|why| {
        OpsError::validation(
            format!("the price table is not valid: {why}"),
            details! { "document" => "price table" },
        )
    })
}

/// The table a replay prices with, and why: under `--pricing auto` ([`AUTO_PRICING`]) the
/// table of the run's `model` ([`PriceTable::for_model`]) when one covers it, else `given`
/// (the default); under any other `--pricing`, `given`, the table it named.
///
/// ```
/// use cutctx_ops::replay::{AUTO_PRICING, run_prices};
/// use cutctx::session::PriceTable;
/// let fallback = PriceTable::anthropic();
/// let (t, why) = run_prices(AUTO_PRICING, Some("gpt-4.1-mini"), &fallback);
/// assert_eq!((t.name.as_str(), why.as_str()), ("openai/gpt-4.1", "picked for the run's model gpt-4.1-mini"));
/// let (t, why) = run_prices(AUTO_PRICING, Some("m"), &fallback);
/// assert_eq!(t, fallback);
/// assert_eq!(why, "the default: no table for the run's model m");
/// let (t, why) = run_prices("openai", Some("claude-opus-5-5"), &PriceTable::openai());
/// assert_eq!((t.name.as_str(), why.as_str()), ("openai", "named by --pricing openai"));
/// ```
#[must_use]
pub fn run_prices(pricing: &str, model: Option<&str>, given: &PriceTable) -> (PriceTable, String) {
    if pricing != AUTO_PRICING {
        return (given.clone(), format!("named by --pricing {pricing}"));
    }
    match model {
        Some(m) => PriceTable::for_model(m).map_or_else(
            || {
                (
                    given.clone(),
                    format!("the default: no table for the run's model {m}"),
                )
            },
            |t| (t, format!("picked for the run's model {m}")),
        ),
        None => (
            given.clone(),
            "the default: the run names no model".to_owned(),
        ),
    }
}

/// `cutctx replay`: the three strategies' figures over the run `run_text`, as a table (or one
/// line of JSON), and the SVG's text.
///
/// # Errors
///
/// `INPUT_ERROR` for text that is not JSON; `FORMAT_*` for a run its provider would refuse;
/// `VALIDATION_ERROR` for bad settings.
pub fn replay(
    args: &ReplayRun,
    run_text: &str,
    prices: &PriceTable,
) -> Result<ReplayOutput, OpsError> {
    let format = args.format;
    let run: Value = crate::error::parse_json("the run", run_text)?;
    let (chosen, chosen_by) = run_prices(
        &args.pricing,
        run.get("model").and_then(Value::as_str),
        prices,
    );
    let prices = &chosen;
    let window = match args.window {
        Some(w) => w,
        None => {
            let fraction = args.window_fraction.unwrap_or(0.7);
            if !(fraction > 0.0 && fraction.is_finite()) {
                return Err(OpsError::validation(
                    "--window-fraction must be above 0",
                    details! { "window_fraction" => fraction },
                ));
            }
            let estimator = estimator_spec(args.tuning.estimator.as_deref())?
                .estimator()
                .map_err(from_format)?;
            let full = cutctx::session::prompt_tokens(format, &run, estimator.as_ref())?
                + args.tuning.reserve_output;
            cutctx::session::fraction(full, fraction)
        }
    };
    // Under `--marks session-only` the session is priced as `cutctx session
    // --cache-breakpoints auto` marks it; under `shared` every strategy is marked alike.
    let mut config = config(format, window, &args.tuning, Breakpoints::Auto)?;
    if config.early.is_some() {
        config.early = Some(cutctx::session::EarlyFiring::from_prices(prices));
    }
    let options = ReplayOptions {
        marking: args.marks.into(),
        warm_prefix: args.warm_prefix,
    };
    let external = args
        .external
        .iter()
        .map(|(name, text)| {
            Ok(cutctx::replay::External {
                name: name.clone(),
                calls: external_calls(name, text)?,
            })
        })
        .collect::<Result<Vec<_>, OpsError>>()?;
    let extras = cutctx::replay::ReplayExtras {
        compare: args.compare,
        retention_last: args.retention_last,
        summary_input: args.summary_input,
        external,
    };
    let replay = cutctx::replay::replay_extended(&config, prices, &run, options, &extras)?;
    let output = if args.json {
        json_line(&replay, prices, args.warm_prefix)
    } else {
        table(&replay, prices, &chosen_by)
    };
    Ok(ReplayOutput {
        output,
        svg: crate::svg::chart(&replay, prices),
        frontier_svg: crate::svg::frontier(&replay, prices),
    })
}

#[expect(
    clippy::cast_precision_loss,
    reason = "token counts are far below 2^52"
)]
fn peak_share(r: &StrategyReport, window: u64) -> f64 {
    r.peak_tokens as f64 / window.max(1) as f64
}

fn table(replay: &Replay, prices: &PriceTable, chosen_by: &str) -> String {
    use std::fmt::Write as _;
    let calls = replay.strategies.first().map_or(0, |s| s.calls);
    let mut out = format!(
        "replay: {calls} calls; window {} tokens (the whole run is {}); prices {} ({}, {} {}/M input, cache read {}x, uncached {}x; {})\n",
        replay.window,
        replay.final_tokens,
        prices.name,
        prices.model,
        prices.currency,
        prices.input_per_million,
        prices.cache_read,
        prices.cache_write,
        chosen_by
    );
    let _ = writeln!(
        out,
        "{:<17} {:>5} {:>11} {:>9} {:>5} {:>11} {:>12} {:>12} {:>10} {:>11} {:>9} {:>15} {:>13} {:>11} {:>5} {:>6}",
        "strategy",
        "calls",
        "tokens_sent",
        "cache_hit",
        "busts",
        "compactions",
        "cost_units",
        format!("cost_{}", prices.currency),
        "peak_use",
        "over_window",
        "reasoning",
        "reasoning_units",
        "summary_units",
        "identifiers",
        "task",
        "recent"
    );
    for s in &replay.strategies {
        let _ = writeln!(
            out,
            "{:<17} {:>5} {:>11} {:>9.3} {:>5} {:>11} {:>12.1} {:>12.6} {:>10.3} {:>11} {:>9} {:>15} {:>13.1} {:>11.3} {:>5.3} {:>6.3}",
            s.name,
            s.calls,
            s.tokens_sent,
            s.hit_rate(),
            s.busts,
            s.compactions,
            s.cost_units,
            s.cost_money,
            peak_share(s, replay.window),
            s.over_window,
            s.reasoning_tokens,
            s.reasoning_units
                .map_or_else(|| "-".to_owned(), |u| format!("{u:.1}")),
            s.summary_units,
            s.retention.identifiers,
            s.retention.task_intact,
            s.retention.recent_results
        );
    }
    let _ = writeln!(
        out,
        "lower bound: no strategy that sends each call's untouchable part pays less than {:.1} units",
        replay.bound_units
    );
    summaries_block(&mut out, replay);
    let _ = writeln!(
        out,
        "reasoning: estimated tokens of the thinking and reasoning items compactions invalidated, each once; reasoning_units prices them at the output price ({}), as thought again, apart from cost_units",
        prices.output.map_or_else(
            || "none in this table".to_owned(),
            |o| format!("{o:.2}x input")
        )
    );
    out
}

/// `calls/input/cached/output units` of a firing's summaries asked one way.
fn cost_cell(c: Option<SummaryCost>) -> String {
    c.map_or_else(
        || "-".to_owned(),
        |c| {
            format!(
                "{:.1} ({}/{}/{})",
                c.units, c.input_tokens, c.cached_tokens, c.output_tokens
            )
        },
    )
}

/// The summaries' block of the table: per strategy that summarized, its summaries charged
/// against the same summaries asked as cached-prefix requests and fresh, and its cost with
/// the summaries charged against free; then the session's firings one by one.
fn summaries_block(out: &mut String, replay: &Replay) {
    use std::fmt::Write as _;
    let summarizing: Vec<&StrategyReport> = replay
        .strategies
        .iter()
        .filter(|s| !s.summary_firings.is_empty())
        .collect();
    if summarizing.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "summaries, in units: as charged (native and cached-prefix read the conversation as sent from the cache, fresh sends each span alone), as cached-prefix requests, as fresh; the cost with summaries charged and free"
    );
    let _ = writeln!(
        out,
        "{:<17} {:>7} {:<13} {:>12} {:>13} {:>12} {:>12} {:>14}",
        "strategy",
        "firings",
        "asked",
        "charged",
        "cached_prefix",
        "fresh",
        "cost_units",
        "summaries_free"
    );
    for s in &summarizing {
        let _ = writeln!(
            out,
            "{:<17} {:>7} {:<13} {:>12.1} {:>13.1} {:>12.1} {:>12.1} {:>14.1}",
            s.name,
            s.summary_firings.len(),
            s.summary_firings
                .first()
                .map_or("-", |f: &SummaryFiring| f.kind.as_str()),
            s.summary_units,
            s.summary_cached_prefix_units(),
            s.summary_fresh_units(),
            s.cost_units,
            s.summaries_free_units()
        );
    }
    if let Some(session) = summarizing.iter().find(|s| s.name == "session") {
        let _ = writeln!(
            out,
            "session firings, units (input/cached/output tokens):\n{:>6}  {:<13} {:>34} {:>34}",
            "call", "asked", "cached_prefix", "fresh"
        );
        for f in &session.summary_firings {
            let _ = writeln!(
                out,
                "{:>6}  {:<13} {:>34} {:>34}",
                f.call,
                f.kind.as_str(),
                cost_cell(f.cached_prefix),
                cost_cell(f.fresh)
            );
        }
    }
}

/// A firing's summaries asked one way, as JSON (`null` when not priced that way).
fn cost_json(c: Option<SummaryCost>) -> Value {
    c.map_or(Value::Null, |c| {
        serde_json::json!({
            "calls": c.calls, "input_tokens": c.input_tokens, "cached_tokens": c.cached_tokens,
            "output_tokens": c.output_tokens, "units": c.units,
        })
    })
}

fn json_line(replay: &Replay, prices: &PriceTable, warm: bool) -> String {
    let strategies: Vec<Value> = replay
        .strategies
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name, "calls": s.calls, "tokens_sent": s.tokens_sent,
                "cached_tokens": s.cached_tokens, "hit_rate": s.hit_rate(), "busts": s.busts,
                "compactions": s.compactions, "cost_units": s.cost_units, "cost_money": s.cost_money,
                "peak_tokens": s.peak_tokens, "over_window": s.over_window,
                "untouchable_over": s.fixed_over, "fitting_units": s.fitting_units,
                "fitting_tokens": s.fitting_tokens, "fitting_cached": s.fitting_cached,
                "reasoning_tokens": s.reasoning_tokens, "reasoning_units": s.reasoning_units,
                "fixed_over": s.fixed_over, "fitting_over": s.fitting_over, "summary_units": s.summary_units,
                "summaries": s.summaries,
                "summaries_free_units": s.summaries_free_units(),
                "summary_cached_prefix_units": s.summary_cached_prefix_units(),
                "summary_fresh_units": s.summary_fresh_units(),
                "summary_firings": s.summary_firings.iter().map(|f| serde_json::json!({
                    "call": f.call, "asked": f.kind.as_str(), "charged": cost_json(Some(f.charged)),
                    "cached_prefix": cost_json(f.cached_prefix), "fresh": cost_json(f.fresh),
                })).collect::<Vec<_>>(),
                "retention": {
                    "identifiers": s.retention.identifiers,
                    "task_intact": s.retention.task_intact,
                    "recent_results": s.retention.recent_results,
                    "needed": s.retention.needed,
                    "needed_behind_digest": s.retention.needed_behind_digest,
                    "latest_user": s.retention.latest_user,
                    "users_where_they_fit": s.retention.users_where_they_fit,
                    "users_cannot_fit": s.retention.users_cannot_fit,
                },
            })
        })
        .collect();
    let v = serde_json::json!({
        "window": replay.window, "final_tokens": replay.final_tokens,
        "bound_units": replay.bound_units, "warm_prefix": warm,
        "prices": prices.name, "currency": prices.currency, "strategies": strategies,
    });
    format!("{v}\n")
}

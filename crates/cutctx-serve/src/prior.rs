//! What the proxy remembers of a named conversation's last body, so that the next call's
//! history is hashed from where it grew: a client resends its whole history at every call, and
//! hashing it whole again costs about as much as parsing it.
//!
//! The memory is the body's bytes (shared with the buffer it was read into, not copied), where
//! each message of its list ends, and the chained digests of its history. The next body's
//! digests are the remembered ones wherever its bytes, up to the end of the last message
//! remembered, are the same bytes (the same bytes parse to the same messages, so their digests
//! are the same); only the messages after are hashed. Anything else (another shape, a rewound
//! or edited history, a walk that declines the text) hashes the history whole, as before.
//!
//! The bytes held by all sessions together stay under a budget: past it a session keeps no
//! body, and its calls hash whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use cutctx_ops::Format;
use cutctx_ops::provider::{history_digests, history_digests_after, message_spans};
use serde_json::Value;

/// The most body bytes all sessions together keep.
pub(crate) const BUDGET: usize = 256 * 1024 * 1024;

/// The bytes the sessions' bodies hold, against [`BUDGET`].
#[derive(Debug, Default)]
pub(crate) struct Budget {
    held: AtomicUsize,
}

impl Budget {
    /// Takes `n` bytes of the budget, when they fit.
    fn take(self: &Arc<Self>, n: usize) -> Option<Taken> {
        let mut held = self.held.load(Ordering::Relaxed);
        loop {
            let more = held.checked_add(n).filter(|m| *m <= BUDGET)?;
            match self
                .held
                .compare_exchange_weak(held, more, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Some(Taken {
                        budget: Arc::clone(self),
                        n,
                    });
                }
                Err(now) => held = now,
            }
        }
    }
}

/// Bytes of the budget, given back when dropped.
#[derive(Debug)]
struct Taken {
    budget: Arc<Budget>,
    n: usize,
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.n, Ordering::Relaxed);
    }
}

/// A session's last body.
#[derive(Debug)]
pub(crate) struct Prior {
    body: Bytes,
    /// Where each message of its list ends.
    ends: Vec<usize>,
    digests: Arc<[String]>,
    _taken: Taken,
}

/// A body's history digests, and where its messages end (`None` when the walk declined it).
pub(crate) struct Hashed {
    pub(crate) digests: Arc<[String]>,
    ends: Option<Vec<usize>>,
}

/// The chained digests of `messages`, the history of the `format` body `body` (already
/// parsed), hashed from where it grew past `prior` when it did.
pub(crate) fn hash(
    format: Format,
    body: &Bytes,
    messages: &[Value],
    prior: Option<&Prior>,
) -> Hashed {
    let ends = std::str::from_utf8(body)
        .ok()
        .and_then(|text| message_spans(format, text))
        .map(|spans| spans.into_iter().map(|s| s.end).collect::<Vec<_>>())
        .filter(|ends| ends.len() == messages.len());
    let grown = match (prior, &ends) {
        (Some(p), Some(ends)) => grown(p, format, body, ends, messages),
        _ => None,
    };
    let digests = grown.unwrap_or_else(|| history_digests(format, messages).into());
    Hashed { digests, ends }
}

/// The digests of a body whose first messages are `prior`'s, byte for byte.
fn grown(
    prior: &Prior,
    format: Format,
    body: &[u8],
    ends: &[usize],
    messages: &[Value],
) -> Option<Arc<[String]>> {
    let k = prior.ends.len();
    let end = match k.checked_sub(1) {
        Some(last) => *prior.ends.get(last)?,
        None => return None,
    };
    let same = ends.get(k - 1) == Some(&end) && body.get(..end)? == prior.body.get(..end)?;
    if !same {
        return None;
    }
    let last = prior.digests.get(k)?;
    let after = history_digests_after(format, last, messages.get(k..)?)?;
    Some(
        prior
            .digests
            .iter()
            .take(k + 1)
            .cloned()
            .chain(after)
            .collect(),
    )
}

impl Prior {
    /// The body `body`, hashed as `hashed`, to remember; `None` when its walk declined it or
    /// the budget has no room.
    pub(crate) fn keep(body: Bytes, hashed: Hashed, budget: &Arc<Budget>) -> Option<Self> {
        let ends = hashed.ends?;
        let taken = budget.take(body.len())?;
        Some(Self {
            body,
            ends,
            digests: hashed.digests,
            _taken: taken,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(messages: &[Value]) -> (Bytes, Value) {
        let request = serde_json::json!({"model": "m", "messages": messages});
        (Bytes::from(request.to_string()), request)
    }

    fn message(i: usize) -> Value {
        let role = if i.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        };
        serde_json::json!({"role": role, "content": format!("turn {i} \"quoted\" ]}}")})
    }

    fn hashed(messages: &[Value], prior: Option<&Prior>) -> Hashed {
        let (bytes, request) = body(messages);
        let list = cutctx_ops::provider::history(Format::OpenAiChat, &request);
        hash(Format::OpenAiChat, &bytes, list, prior)
    }

    #[test]
    fn a_grown_history_hashes_as_a_whole_one_and_an_edited_one_starts_over() {
        let budget = Arc::new(Budget::default());
        let all: Vec<Value> = (0..9).map(message).collect();
        let first = hashed(&all[..5], None);
        let prior = Prior::keep(body(&all[..5]).0, first, &budget).expect("kept");
        let grown = hashed(&all, Some(&prior));
        let whole = history_digests(Format::OpenAiChat, &all);
        assert_eq!(&*grown.digests, &whole[..]);
        // An edit inside the remembered part: the bytes differ, so the history is hashed whole.
        let mut edited = all.clone();
        edited[1] = serde_json::json!({"role": "assistant", "content": "changed"});
        let again = hashed(&edited, Some(&prior));
        assert_eq!(
            &*again.digests,
            &history_digests(Format::OpenAiChat, &edited)[..]
        );
        // Rewound: fewer messages than remembered.
        let rewound = hashed(&all[..3], Some(&prior));
        assert_eq!(
            &*rewound.digests,
            &history_digests(Format::OpenAiChat, &all[..3])[..]
        );
    }

    #[test]
    fn the_budget_is_given_back_when_a_body_is_forgotten() {
        let budget = Arc::new(Budget::default());
        let all: Vec<Value> = (0..3).map(message).collect();
        let kept = Prior::keep(body(&all).0, hashed(&all, None), &budget).expect("kept");
        assert!(budget.held.load(Ordering::Relaxed) > 0);
        drop(kept);
        assert_eq!(budget.held.load(Ordering::Relaxed), 0);
        assert!(budget.take(BUDGET + 1).is_none(), "over the budget");
    }
}

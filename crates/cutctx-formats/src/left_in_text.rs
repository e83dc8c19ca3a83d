//! Turn contents left in the request's text: a transcript read without copying what most
//! compactions never read.
//!
//! A large request is mostly tool output, and a compaction reads little of it: dropping turns
//! reads none, masking reads only the masked turns' contents, and then only to hash them; the
//! output copies every kept message from the request's text. So
//! [`ProviderTranscript::from_text_deferred`] leaves each turn made of one string of the
//! request (a tool result, a user's text) as written there: the turn shows an empty content,
//! its estimate counted from the string's length, and the string is read only when something
//! needs it. [`ProviderTranscript::plan`] lets a policy decide without the contents where it
//! can ([`CompactionPolicy::decide_with_digests`]: the shipped policies and chains of them),
//! the digests its stubs state hashed straight from the request's bytes (a string written as
//! the canonical writer writes it, as most are, is its own canonical literal); any other
//! policy is given the contents, read in first.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cutctx_invariants::{Analysis, CompactionPlan};
use cutctx_model::{
    CompactionBudget, CompactionError, Parallelism, Role, Slots, Transcript, TranscriptTurn,
    details,
};
use cutctx_policies::ahead::{Ahead, WithAhead};
use cutctx_policies::{CompactionPolicy, ContentDigests, TokenEstimator};

use crate::mapping::{LeftContent, Piece, Rendered};
use crate::{Format, FormatError, ProviderTranscript, Reading, not_the_text};

impl ProviderTranscript {
    /// As [`ProviderTranscript::from_text_with`], with the contents of the turns made of one
    /// string of the request (most tool results and prompts) left in `text`: those turns show
    /// an empty content until [`ProviderTranscript::read_deferred_contents`] reads them in,
    /// and their estimates are counted from the strings' lengths, as the estimator would
    /// count them decoded. Contents are left only with an estimator that counts length alone
    /// ([`TokenEstimator::estimate_chars`]); with any other this is `from_text_with`.
    ///
    /// Plan with [`ProviderTranscript::plan`], which reads what the policy needs, and render
    /// with [`ProviderTranscript::render_parts`] or [`ProviderTranscript::apply_text`], which
    /// copy kept messages from `text` and never read their contents.
    ///
    /// ```
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// use cutctx_policies::CharRatioEstimator;
    /// let text = r#"{"messages":[{"role":"user","content":"a \"quoted\" question"}]}"#;
    /// let estimator = CharRatioEstimator::default();
    /// let mut pt = ProviderTranscript::from_text_deferred(Format::OpenAiChat, text, &estimator)
    ///     .expect("a plain request");
    /// assert!(pt.has_deferred_contents());
    /// assert_eq!(pt.transcript().turns()[0].content(), "");
    /// assert_eq!(pt.transcript().turns()[0].token_estimate(), 5); // 19 characters
    /// pt.read_deferred_contents(text)?;
    /// assert_eq!(pt.transcript().turns()[0].content(), "a \"quoted\" question");
    /// # Ok::<(), cutctx_formats::FormatError>(())
    /// ```
    #[must_use]
    pub fn from_text_deferred(
        format: Format,
        text: &str,
        estimator: &dyn TokenEstimator,
    ) -> Option<Self> {
        let reading = if estimator.estimate_chars(0).is_some() {
            Reading::HandDeferring
        } else {
            Reading::Hand
        };
        Self::read_text(format, text, estimator, reading)
    }

    /// Whether some turn's content is left in the request's text.
    #[must_use]
    pub fn has_deferred_contents(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Reads every content left in `text`, the request this transcript was read from, into
    /// the transcript: it is then the transcript [`ProviderTranscript::from_text_with`] reads.
    ///
    /// # Errors
    ///
    /// `FORMAT_VIEW_MISMATCH` when `text` is not the text this transcript was read from.
    pub fn read_deferred_contents(&mut self, text: &str) -> Result<(), FormatError> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        self.require_text(text)?;
        let mut contents = Vec::with_capacity(self.deferred.len());
        for d in &self.deferred {
            contents.push((d.position, Arc::from(decoded(text, d, self.format)?)));
        }
        self.transcript.set_contents(contents)?;
        self.deferred = Vec::new();
        Ok(())
    }

    /// `policy`'s plan for this transcript under `budget`, reading from `text` (the request
    /// this transcript was read from) only what the policy reads: nothing for a policy of the
    /// shape alone, the masked turns' bytes for the digests of one that decides with digests
    /// ([`CompactionPolicy::decide_with_digests`]: masking, and chains of the shipped
    /// policies), and every content, read in first, for any other. The plan is the one
    /// `policy.decide` makes over the transcript [`ProviderTranscript::from_text_with`] reads.
    ///
    /// ```
    /// use cutctx_formats::{Format, ProviderTranscript};
    /// use cutctx_model::CompactionBudget;
    /// use cutctx_policies::{CharRatioEstimator, CompactionPolicy, ObservationMaskingPolicy};
    /// let text = r#"{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"a long\nresult"},{"role":"user","content":"ok"}]}"#;
    /// let estimator = CharRatioEstimator::default();
    /// let policy = ObservationMaskingPolicy::new(0)?;
    /// let budget = CompactionBudget::new(2).with_protected_recent_turns(1);
    /// let mut deferred =
    ///     ProviderTranscript::from_text_deferred(Format::OpenAiChat, text, &estimator).unwrap();
    /// let whole = ProviderTranscript::from_text_with(Format::OpenAiChat, text, &estimator).unwrap();
    /// let plan = deferred.plan(&policy, &budget, text)?;
    /// assert_eq!(plan, policy.decide(whole.transcript(), &budget)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The policy's errors; `FORMAT_VIEW_MISMATCH` when `text` is not the text this
    /// transcript was read from.
    pub fn plan(
        &mut self,
        policy: &dyn CompactionPolicy,
        budget: &CompactionBudget,
        text: &str,
    ) -> Result<CompactionPlan, FormatError> {
        let ahead = self.deferred.len() >= AHEAD_FROM_TURNS && Parallelism::Automatic.threads() > 1;
        let ahead = if ahead { HashAhead::Yes } else { HashAhead::No };
        self.plan_hashing(policy, budget, text, ahead)
    }

    /// [`ProviderTranscript::plan`], the tool results' digests hashed ahead as `mode` says.
    fn plan_hashing(
        &mut self,
        policy: &dyn CompactionPolicy,
        budget: &CompactionBudget,
        text: &str,
        mode: HashAhead,
    ) -> Result<CompactionPlan, FormatError> {
        if self.deferred.is_empty() {
            return Ok(policy.decide(&self.transcript, budget)?);
        }
        self.require_text(text)?;
        let digests = TextDigests::new(text, &self.deferred, &self.transcript, self.format);
        let stop = AtomicBool::new(false);
        let decided = std::thread::scope(|scope| {
            // The tool results' digests hashed on a second thread, oldest first (the order
            // observation masking masks them), while this one analyses and decides.
            let ahead = if mode == HashAhead::No {
                Ahead::none(&stop)
            } else {
                let turns = self.transcript.turns();
                let tools = self
                    .deferred
                    .iter()
                    .map(|d| d.position)
                    .filter(|&p| turns.get(p).map(TranscriptTurn::role) == Some(Role::Tool));
                // A failure is not noted: the turn may never be asked for. It is hashed (and
                // fails, noted) again if it is.
                let digests = &digests;
                Ahead::start(scope, &stop, tools, move |p| digests.hash(p).ok())
            };
            #[cfg(test)]
            while mode == HashAhead::ToTheEnd && !ahead.ran_out() {
                std::thread::yield_now();
            }
            let analysis = Analysis::of(&self.transcript, budget);
            let with_ahead = WithAhead::new(&digests, &ahead);
            let decided = policy.decide_with_digests(&self.transcript, &analysis, &with_ahead);
            // Stopped before the scope ends, even when no digest was asked for.
            ahead.hashed();
            decided
        });
        if let Some(plan) = decided {
            let failed = digests.failed.into_inner().ok().flatten();
            return match (plan, failed) {
                (Ok(plan), _) => Ok(plan),
                // A content of the text that did not read: said as the text's error.
                (Err(_), Some(e)) => Err(e),
                (Err(e), None) => Err(e.into()),
            };
        }
        self.read_deferred_contents(text)?;
        Ok(policy.decide(&self.transcript, budget)?)
    }

    /// `FORMAT_VIEW_MISMATCH` unless `text` is the text read (its length and hash).
    fn require_text(&self, text: &str) -> Result<(), FormatError> {
        match &self.layout {
            Some(layout) if layout.text.is(text) => Ok(()),
            _ => Err(not_the_text(self.format)),
        }
    }
}

/// The fewest left contents for [`ProviderTranscript::plan`] to hash digests ahead: below it,
/// a second thread costs more than it saves.
const AHEAD_FROM_TURNS: usize = 10_000;

/// Whether [`ProviderTranscript::plan_hashing`] hashes the tool results' digests ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HashAhead {
    No,
    Yes,
    /// Yes, and the policy decides only once every one is hashed: for the tests, which would
    /// otherwise not know how many digests were hashed ahead.
    #[cfg(test)]
    ToTheEnd,
}

impl ProviderTranscript {
    /// Notes on each patch of `rendered` that replaces the whole string value of a field this
    /// transcript left in the text where that value lies: the writer then copies the message
    /// around it without walking the message to find it.
    ///
    /// A patch is found by the position of the turn it stands for, among the left contents
    /// (in position order); the patches come in that order too, so each search starts with a
    /// few steps on from where the last one ended, which is where the next usually is.
    pub(crate) fn locate_patches(&self, rendered: &mut Rendered) {
        let Some(pieces) = &mut rendered.list else {
            return;
        };
        let deferred = &self.deferred[..];
        let mut next = 0_usize;
        for piece in pieces {
            let Piece::Masked { patches, .. } = piece else {
                continue;
            };
            for patch in patches {
                let Some(turn) = patch.turn else {
                    continue;
                };
                let Some(k) = find_from(deferred, next, turn) else {
                    continue;
                };
                next = k + 1;
                if let Some(d) = deferred.get(k)
                    && d.field == Some(patch.key)
                {
                    // The value with its quotes.
                    patch.at = Some(d.span.start.saturating_sub(1)..d.span.end + 1);
                }
            }
        }
    }
}

/// How many left contents [`find_from`] steps over before it searches.
const STEPS: usize = 4;

/// The index of the left content of the turn at `position` in `deferred` (in position
/// order): looked for in the few from `from` on, then searched for in the whole list.
fn find_from(deferred: &[LeftContent], from: usize, position: usize) -> Option<usize> {
    // Past the end, nothing is near: the whole list is searched below.
    let near = deferred.get(from..).unwrap_or_default().iter().take(STEPS);
    for (k, d) in near.enumerate() {
        if d.position == position {
            return Some(from + k);
        }
        if d.position > position {
            break;
        }
    }
    deferred
        .binary_search_by_key(&position, |d| d.position)
        .ok()
}

/// The digests of a transcript's contents, read from the request's text where they were left
/// there: a string written as the canonical writer writes it is hashed where it lies.
struct TextDigests<'a> {
    text: &'a str,
    deferred: &'a [LeftContent],
    /// The index in `deferred` of each position's left content: a masked turn's content is
    /// looked up twice (its length, to share the hashing out, then its digest), each time in
    /// one step. `None` when a position could not be noted (more contents than a slot counts),
    /// and contents are then searched for.
    slots: Option<Slots>,
    transcript: &'a Transcript,
    format: Format,
    /// The first content that could not be read, to report as itself once the policy fails.
    failed: Mutex<Option<FormatError>>,
}

impl<'a> TextDigests<'a> {
    /// The digests of `transcript`'s contents, those in `deferred` (by position, rising) read
    /// from `text`.
    fn new(
        text: &'a str,
        deferred: &'a [LeftContent],
        transcript: &'a Transcript,
        format: Format,
    ) -> Self {
        let mut slots = Slots::default();
        let noted = deferred
            .iter()
            .enumerate()
            .all(|(k, d)| slots.push(d.position, k));
        let slots = noted.then_some(slots);
        Self {
            text,
            deferred,
            slots,
            transcript,
            format,
            failed: Mutex::new(None),
        }
    }

    /// Where the content of the turn at `position` was left, if it was.
    fn left(&self, position: usize) -> Option<&LeftContent> {
        let k = match &self.slots {
            Some(slots) => slots.get(position)?,
            None => self
                .deferred
                .binary_search_by_key(&position, |d| d.position)
                .ok()?,
        };
        self.deferred.get(k)
    }
}

impl TextDigests<'_> {
    /// The digest of the content of the turn at `position` (see [`ContentDigests::digest`]),
    /// a failure to read it given as it is, not noted.
    fn hash(&self, position: usize) -> Result<[u8; 32], FormatError> {
        let Some(d) = self.left(position) else {
            let turn = self.transcript.turns().get(position);
            return Ok(cutctx_model::canonical::sha256_of_str_bytes(
                turn.map_or("", |t| t.content()),
            ));
        };
        if !d.canonical {
            let content = decoded(self.text, d, self.format)?;
            return Ok(cutctx_model::canonical::sha256_of_str_bytes(&content));
        }
        let written = self
            .text
            .get(d.span.clone())
            .ok_or_else(|| not_the_text(self.format))?;
        Ok(cutctx_model::canonical::sha256_of_written(written))
    }
}

impl ContentDigests for TextDigests<'_> {
    fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError> {
        self.hash(position).map_err(|e| self.unreadable(e))
    }

    fn content_len(&self, position: usize) -> usize {
        match self.left(position) {
            Some(d) => d.span.len(),
            None => self
                .transcript
                .turns()
                .get(position)
                .map_or(0, |t| t.content().len()),
        }
    }
}

impl TextDigests<'_> {
    /// `e`, kept to be reported as it is, as the error a policy's decision fails with.
    fn unreadable(&self, e: FormatError) -> CompactionError {
        let as_compaction = CompactionError::validation(e.message(), e.details());
        if let Ok(mut failed) = self.failed.lock() {
            failed.get_or_insert(e);
        }
        as_compaction
    }
}

/// The content left at `d` in `text`, decoded.
fn decoded(text: &str, d: &LeftContent, format: Format) -> Result<String, FormatError> {
    let written = text
        .get(d.span.clone())
        .ok_or_else(|| not_the_text(format))?;
    let mut out = String::with_capacity(written.len());
    // The string was checked to decode when it was read; one that does not now is another
    // text of the same length.
    cutctx_json::decode_written(written, &mut out).ok_or_else(|| {
        FormatError::view(
            "The text given is not the text this transcript was read from: a string read \
             there does not decode.",
            details! { "format" => format.as_str(), "position" => d.position },
        )
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use cutctx_model::{Action, CompactionBudget};
    use cutctx_policies::{CharRatioEstimator, ObservationMaskingPolicy};

    use super::*;
    use crate::mapping::Source;

    /// A request of `format` with three tool results, as a string, a string and a text block.
    fn request(format: Format) -> String {
        let long = "line \"one\"\n".repeat(40);
        match format {
            Format::OpenAiChat => serde_json::json!({"messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "a", "content": long},
                {"role": "tool", "tool_call_id": "b", "content": long},
                {"role": "user", "content": "thanks"}
            ]}),
            Format::OpenAiResponses => serde_json::json!({"input": [
                {"role": "user", "content": "go"},
                {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "a", "output": long},
                {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "b", "output": [{"type": "input_text", "text": long}]},
                {"role": "user", "content": "thanks"}
            ]}),
            Format::Anthropic => serde_json::json!({"max_tokens": 9, "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                    {"type": "tool_use", "id": "b", "name": "f", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": long},
                    {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": long}]}]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "thanks"}
            ]}),
        }
        .to_string()
    }

    #[test]
    fn a_patch_is_placed_where_the_writer_would_find_its_value_and_only_a_whole_string() {
        for format in Format::ALL {
            let text = request(format);
            let estimator = CharRatioEstimator::default();
            let mut pt =
                ProviderTranscript::from_text_deferred(format, &text, &estimator).expect("plain");
            let policy = ObservationMaskingPolicy::new(0).expect("a policy");
            let budget = CompactionBudget::new(20).with_protected_recent_turns(1);
            let plan = pt.plan(&policy, &budget, &text).expect("plans");
            let view = cutctx_executor::apply(pt.transcript(), &plan, &Default::default())
                .expect("applies")
                .transcript;
            let layout = pt.layout.clone().expect("read from text");
            let source = Source::Text {
                text: &text,
                spans: &layout.items,
            };
            let (mut rendered, _) = pt.pieces(&view, Some(source)).expect("renders");
            pt.locate_patches(&mut rendered);
            let (mut placed, mut left) = (0, 0);
            for piece in rendered.list.iter().flatten() {
                let Piece::Masked { index, patches } = piece else {
                    continue;
                };
                let message = &text[layout.items[*index].clone()];
                for patch in patches {
                    let Some(at) = &patch.at else {
                        left += 1;
                        continue;
                    };
                    placed += 1;
                    // Where the writer finds the value by reading the message.
                    let unplaced = crate::mapping::Patch {
                        at: None,
                        ..patch.clone()
                    };
                    let found = crate::text::patch_spans(message, 0, &[unplaced]).expect("found");
                    let start = layout.items[*index].start;
                    assert_eq!(at.clone(), start + found[0].start..start + found[0].end);
                }
            }
            // Two masked results: the string one placed, the one in a text block left to be
            // found (a Chat request has two strings).
            match format {
                Format::OpenAiChat => assert_eq!((placed, left), (2, 0)),
                _ => assert_eq!((placed, left), (1, 1), "{format:?}"),
            }
        }
    }

    /// A Chat request of `n` calls, each answered by a tool result longer than its stub (some
    /// spelled otherwise than the canonical writer spells them), between a first and a last
    /// user message.
    fn many_results(n: usize) -> String {
        let mut messages = vec![serde_json::json!({"role": "user", "content": "go"})];
        for k in 0..n {
            let id = format!("c{k}");
            messages.push(
                serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            );
            messages.push(serde_json::json!({"role": "tool", "tool_call_id": id,
                "content": format!("result {k} {}", "x".repeat(200 + k % 7))}));
        }
        messages.push(serde_json::json!({"role": "user", "content": "thanks"}));
        let text = serde_json::json!({ "messages": messages }).to_string();
        // Every fifth result escaped as the canonical writer never escapes a letter.
        text.replace("result 5", "\\u0072esult 5")
    }

    /// The digests a second thread hashes ahead, run to its end, are those the text gives when
    /// asked, for every turn; what it did not hash is hashed when asked.
    #[test]
    fn digests_hashed_ahead_are_those_hashed_when_asked() {
        let text = many_results(60);
        assert!(text.contains("\\u0072esult"), "both spellings");
        let estimator = CharRatioEstimator::default();
        let pt = ProviderTranscript::from_text_deferred(Format::OpenAiChat, &text, &estimator)
            .expect("plain");
        let whole = ProviderTranscript::from_text_with(Format::OpenAiChat, &text, &estimator)
            .expect("valid");
        let digests = TextDigests::new(&text, &pt.deferred, &pt.transcript, pt.format);
        let turns = pt.transcript.turns();
        let tools: Vec<usize> = (0..turns.len())
            .filter(|&p| turns[p].role() == Role::Tool)
            .collect();
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let positions = tools.iter().copied().filter(|p| p % 4 != 0);
            let ahead = Ahead::start(scope, &stop, positions, |p| digests.hash(p).ok());
            while !ahead.ran_out() {
                std::thread::yield_now();
            }
            assert_eq!(
                ahead.hashed().len(),
                tools.iter().filter(|p| *p % 4 != 0).count()
            );
            let with_ahead = WithAhead::new(&digests, &ahead);
            for (p, turn) in whole.transcript().turns().iter().enumerate() {
                let expected = cutctx_model::canonical::sha256_of_str_bytes(turn.content());
                assert_eq!(with_ahead.digest(p).expect("hashed"), expected, "{p}");
                assert_eq!(digests.digest(p).expect("hashed"), expected, "{p}");
            }
        });
    }

    /// A request large enough for its digests to be hashed ahead plans as the transcript with
    /// its contents read in does, however far the hashing ahead got.
    #[test]
    fn a_plan_hashing_ahead_is_the_plan_of_the_contents() {
        let text = many_results(AHEAD_FROM_TURNS);
        let estimator = CharRatioEstimator::default();
        let mut pt = ProviderTranscript::from_text_deferred(Format::OpenAiChat, &text, &estimator)
            .expect("plain");
        assert!(pt.deferred.len() >= AHEAD_FROM_TURNS);
        let whole = ProviderTranscript::from_text_with(Format::OpenAiChat, &text, &estimator)
            .expect("valid");
        let policy = ObservationMaskingPolicy::new(0).expect("a policy");
        let budget = CompactionBudget::new(whole.transcript().token_estimate() / 3)
            .with_protected_recent_turns(2);
        let expected = policy.decide(whole.transcript(), &budget).expect("plans");
        let masked = expected
            .actions
            .iter()
            .filter(|a| a.action() == Action::Mask)
            .count();
        assert!(masked > AHEAD_FROM_TURNS / 2, "{masked}");
        for ahead in [HashAhead::No, HashAhead::Yes, HashAhead::ToTheEnd] {
            let plan = pt
                .plan_hashing(&policy, &budget, &text, ahead)
                .expect("plans");
            // Compared whole but not printed: a plan of 20,000 actions.
            assert!(plan == expected, "{ahead:?}: another plan");
        }
        assert!(pt.plan(&policy, &budget, &text).expect("plans") == expected);
    }
}

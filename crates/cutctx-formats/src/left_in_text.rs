//! Turn contents left in the request's text: a transcript read without copying what most
//! compactions never read, and the one place such a transcript is planned.
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
//!
//! The planning is written once, for any text the contents were left in: [`plan_left`] takes
//! where each content lies ([`LeftSpan`]) and a text read again where it lies ([`ReadAgain`]:
//! a provider request held whole here, a request document held whole or read from its file by
//! the operations library), hashes digests there ([`LeftDigests`], the tool results' ahead on
//! a second thread for a large transcript) and reads every content in ([`read_left_in`]) only
//! for a policy that needs them.

use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::Scope;

use cutctx_invariants::{Analysis, CompactionPlan};
use cutctx_model::canonical::{sha256_of_str_bytes, sha256_of_written};
use cutctx_model::{
    CompactionBudget, CompactionError, Parallelism, Role, Slots, Transcript, TranscriptTurn,
    details,
};
use cutctx_policies::ahead::{Ahead, WithAhead};
use cutctx_policies::{CompactionPolicy, ContentDigests, TokenEstimator};

use crate::mapping::{LeftContent, Piece, Rendered};
use crate::{Format, FormatError, ProviderTranscript, Reading, not_the_text};

/// Where one turn's content was left in a text: read as a JSON string there, not decoded.
pub trait LeftSpan {
    /// The turn's position in the transcript.
    fn position(&self) -> usize;

    /// Where the content lies in the text, as written between its quotes.
    fn span(&self) -> Range<usize>;

    /// Whether the written content is its own canonical JSON spelling (every escape the one
    /// the canonical writer uses), so that it is hashed as it stands.
    fn is_canonical(&self) -> bool;
}

/// A text that turns' contents were left in, read again where they lie: held whole, or read
/// from where it is kept (a file, by a caller that may do I/O), which may fail.
pub trait ReadAgain: Sync {
    /// What a read that failed is, or a content that no longer decodes; a policy's own
    /// errors become one too.
    type Error: From<CompactionError> + Send;

    /// `f` of the text at `span` (a span a reading of the text found).
    ///
    /// # Errors
    ///
    /// The text cannot be read there again (it is not the text read, or its file changed).
    fn read<R>(&self, span: Range<usize>, f: impl FnOnce(&str) -> R) -> Result<R, Self::Error>;

    /// The error for the content of the turn at `position`, which decoded when the text was
    /// read and no longer does.
    fn undecodable(&self, position: usize) -> Self::Error;
}

/// Whether [`plan_left`] hashes the tool results' digests ahead, on a second thread, while
/// the policy analyses and decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAhead {
    /// When the transcript left enough contents in the text for a second thread to pay, and a
    /// second core is to be had.
    Auto,
    /// Never: every digest is hashed when asked for.
    Never,
    /// Always (when a thread can be started).
    Always,
    /// Always, and the policy decides only once every one is hashed: for the tests, which
    /// would otherwise not know how many digests were hashed ahead.
    #[cfg(test)]
    ToTheEnd,
}

/// The fewest left contents for [`HashAhead::Auto`] to hash digests ahead: below it, a second
/// thread costs more than it saves.
const AHEAD_FROM_TURNS: usize = 10_000;

impl HashAhead {
    /// Whether to hash ahead with `left` contents left in the text.
    fn starts(self, left: usize) -> bool {
        match self {
            Self::Auto => left >= AHEAD_FROM_TURNS && Parallelism::Automatic.threads() > 1,
            Self::Never => false,
            Self::Always => true,
            #[cfg(test)]
            Self::ToTheEnd => true,
        }
    }
}

/// `policy`'s plan for `transcript` under `budget`, the turns' contents left in `text` where
/// `left` says (by position, rising), reading from the text only what the policy reads:
/// nothing for a policy of the shape alone, the masked turns' bytes for the digests of one that
/// decides with digests ([`CompactionPolicy::decide_with_digests`]: masking, and chains of the
/// shipped policies), the tool results' hashed ahead as `ahead` says; and for any other policy
/// every content, read into the transcript first ([`read_left_in`], which empties `left`). The
/// plan is the one `policy.decide` makes over the transcript with its contents read in.
///
/// # Errors
///
/// The policy's errors; a content of the text that could not be read again (the text's own
/// error, rather than the policy's account of it).
pub fn plan_left<T, L>(
    policy: &dyn CompactionPolicy,
    transcript: &mut Transcript,
    budget: &CompactionBudget,
    text: &T,
    left: &mut Vec<L>,
    ahead: HashAhead,
) -> Result<CompactionPlan, T::Error>
where
    T: ReadAgain + ?Sized,
    L: LeftSpan + Sync,
{
    if let Some(plan) = decide_with_digests(policy, transcript, budget, text, left, ahead) {
        return plan;
    }
    read_left_in(transcript, text, left)?;
    Ok(policy.decide(transcript, budget)?)
}

/// [`plan_left`] for a policy that decides with digests, `None` for any other.
fn decide_with_digests<T, L>(
    policy: &dyn CompactionPolicy,
    transcript: &Transcript,
    budget: &CompactionBudget,
    text: &T,
    left: &[L],
    ahead: HashAhead,
) -> Option<Result<CompactionPlan, T::Error>>
where
    T: ReadAgain + ?Sized,
    L: LeftSpan + Sync,
{
    let digests = LeftDigests::new(text, left, transcript);
    let stop = AtomicBool::new(false);
    let decided = std::thread::scope(|scope| {
        let hashing = if ahead.starts(left.len()) {
            digests.hash_tools_ahead(scope, &stop)
        } else {
            Ahead::none(&stop)
        };
        #[cfg(test)]
        while ahead == HashAhead::ToTheEnd && !hashing.ran_out() {
            std::thread::yield_now();
        }
        let analysis = Analysis::of(transcript, budget);
        let with_ahead = WithAhead::new(&digests, &hashing);
        let decided = policy.decide_with_digests(transcript, &analysis, &with_ahead);
        // Stopped before the scope ends, even when no digest was asked for.
        hashing.hashed();
        decided
    });
    let failed = digests.into_failed();
    decided.map(|plan| match (plan, failed) {
        (Ok(plan), _) => Ok(plan),
        // A content of the text that did not read: said as the text's error.
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(e.into()),
    })
}

/// Reads every content `left` (by position, rising) says was left in `text` into
/// `transcript`, which then shows its contents, and empties `left`.
///
/// # Errors
///
/// A content that cannot be read again or no longer decodes; the transcript's own refusal
/// of a position (never, for the positions a reading of the text noted).
pub fn read_left_in<T, L>(
    transcript: &mut Transcript,
    text: &T,
    left: &mut Vec<L>,
) -> Result<(), T::Error>
where
    T: ReadAgain + ?Sized,
    L: LeftSpan,
{
    let mut contents = Vec::with_capacity(left.len());
    for l in left.iter() {
        contents.push((l.position(), Arc::from(decoded(text, l)?)));
    }
    transcript.set_contents(contents)?;
    *left = Vec::new();
    Ok(())
}

/// The content left at `l` in `text`, decoded: it was checked to decode when it was read.
///
/// # Errors
///
/// The text cannot be read there again, or what it holds there no longer decodes.
pub fn decoded<T, L>(text: &T, l: &L) -> Result<String, T::Error>
where
    T: ReadAgain + ?Sized,
    L: LeftSpan + ?Sized,
{
    let mut out = String::with_capacity(l.span().len());
    let ok = text.read(l.span(), |written| {
        cutctx_json::decode_written(written, &mut out)
    })?;
    ok.ok_or_else(|| text.undecodable(l.position()))?;
    Ok(out)
}

/// The digests of a transcript's contents, those left in a text read from there: a string
/// written as the canonical writer writes it is hashed where it lies. The first read that
/// fails is kept, to be reported as itself once the policy fails ([`LeftDigests::into_failed`]).
pub struct LeftDigests<'a, T: ReadAgain + ?Sized, L> {
    text: &'a T,
    /// By position, rising.
    left: &'a [L],
    /// Where in `left` each position's content lies.
    lookup: Lookup,
    transcript: &'a Transcript,
    failed: Mutex<Option<T::Error>>,
}

/// How [`LeftDigests`] finds a position's left content: a masked turn's content is looked up
/// twice (its length, to share the hashing out, then its digest), each time in one step.
enum Lookup {
    /// Every turn up to the last left its content: position `p` is at index `p`.
    Dense,
    /// The index of each position's left content.
    Slots(Slots),
    /// Positions that could not be noted (more contents than a slot counts): searched for.
    Search,
}

impl Lookup {
    fn new<L: LeftSpan>(left: &[L]) -> Self {
        // Positions rise, so they are `0..len` exactly when the last is `len - 1`.
        if left.last().is_none_or(|l| l.position() + 1 == left.len()) {
            return Self::Dense;
        }
        let mut slots = Slots::default();
        let noted = left
            .iter()
            .enumerate()
            .all(|(k, l)| slots.push(l.position(), k));
        if noted {
            Self::Slots(slots)
        } else {
            Self::Search
        }
    }
}

impl<'a, T: ReadAgain + ?Sized, L: LeftSpan> LeftDigests<'a, T, L> {
    /// The digests of `transcript`'s contents, those at `left` (by position, rising) read
    /// from `text`.
    pub fn new(text: &'a T, left: &'a [L], transcript: &'a Transcript) -> Self {
        Self {
            text,
            left,
            lookup: Lookup::new(left),
            transcript,
            failed: Mutex::new(None),
        }
    }

    /// Where the content of the turn at `position` was left, if it was.
    pub fn left(&self, position: usize) -> Option<&'a L> {
        let k = match &self.lookup {
            Lookup::Dense => position,
            Lookup::Slots(slots) => slots.get(position)?,
            Lookup::Search => self
                .left
                .binary_search_by_key(&position, LeftSpan::position)
                .ok()?,
        };
        self.left.get(k)
    }

    /// The SHA-256 of the content of the turn at `position` (see [`ContentDigests::digest`]),
    /// a failure to read it given as it is, not kept.
    ///
    /// # Errors
    ///
    /// The content cannot be read again, or no longer decodes.
    pub fn hash(&self, position: usize) -> Result<[u8; 32], T::Error> {
        match self.left(position) {
            Some(l) if l.is_canonical() => self.text.read(l.span(), sha256_of_written),
            Some(l) => decoded(self.text, l).map(|c| sha256_of_str_bytes(&c)),
            None => {
                let turn = self.transcript.turns().get(position);
                Ok(sha256_of_str_bytes(turn.map_or("", |t| t.content())))
            }
        }
    }

    /// The first read that failed when a digest was asked for, if any did.
    pub fn into_failed(self) -> Option<T::Error> {
        self.failed.into_inner().ok().flatten()
    }
}

impl<'a, T: ReadAgain + ?Sized, L: LeftSpan + Sync> LeftDigests<'a, T, L> {
    /// Starts hashing, in `scope` until `stop`, the digests of the tool results whose contents
    /// were left in the text, oldest first: the turns observation masking masks, in the order
    /// it masks them.
    pub fn hash_tools_ahead<'scope>(
        &'scope self,
        scope: &'scope Scope<'scope, '_>,
        stop: &'scope AtomicBool,
    ) -> Ahead<'scope> {
        let turns = self.transcript.turns();
        let tools = self
            .left
            .iter()
            .map(LeftSpan::position)
            .filter(|&p| turns.get(p).map(TranscriptTurn::role) == Some(Role::Tool));
        // A failure is not kept: the turn may never be asked for. It is hashed (and fails,
        // kept) again if it is.
        Ahead::start(scope, stop, tools, move |p| self.hash(p).ok())
    }
}

impl<T: ReadAgain + ?Sized, L: LeftSpan + Sync> ContentDigests for LeftDigests<'_, T, L> {
    fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError> {
        self.hash(position).map_err(|e| {
            if let Ok(mut failed) = self.failed.lock() {
                failed.get_or_insert(e);
            }
            CompactionError::validation(
                "A content left in the request's text could not be read again.",
                details! { "position" => position },
            )
        })
    }

    fn content_len(&self, position: usize) -> usize {
        match self.left(position) {
            Some(l) => l.span().len(),
            None => self
                .transcript
                .turns()
                .get(position)
                .map_or(0, |t| t.content().len()),
        }
    }
}

impl LeftSpan for LeftContent {
    fn position(&self) -> usize {
        self.position
    }

    fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    fn is_canonical(&self) -> bool {
        self.canonical
    }
}

/// The text a provider request was read from, read again by its own transcript.
struct RequestText<'a> {
    text: &'a str,
    format: Format,
}

impl ReadAgain for RequestText<'_> {
    type Error = FormatError;

    fn read<R>(&self, span: Range<usize>, f: impl FnOnce(&str) -> R) -> Result<R, FormatError> {
        self.text
            .get(span)
            .map(f)
            .ok_or_else(|| not_the_text(self.format))
    }

    fn undecodable(&self, position: usize) -> FormatError {
        // The string was checked to decode when it was read; one that does not now is another
        // text of the same length.
        FormatError::view(
            "The text given is not the text this transcript was read from: a string read \
             there does not decode.",
            details! { "format" => self.format.as_str(), "position" => position },
        )
    }
}

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
        let text = RequestText {
            text,
            format: self.format,
        };
        read_left_in(&mut self.transcript, &text, &mut self.deferred)
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
        self.plan_hashing(policy, budget, text, HashAhead::Auto)
    }

    /// [`ProviderTranscript::plan`], the tool results' digests hashed ahead as `ahead` says.
    fn plan_hashing(
        &mut self,
        policy: &dyn CompactionPolicy,
        budget: &CompactionBudget,
        text: &str,
        ahead: HashAhead,
    ) -> Result<CompactionPlan, FormatError> {
        if self.deferred.is_empty() {
            return Ok(policy.decide(&self.transcript, budget)?);
        }
        self.require_text(text)?;
        let text = RequestText {
            text,
            format: self.format,
        };
        plan_left(
            policy,
            &mut self.transcript,
            budget,
            &text,
            &mut self.deferred,
            ahead,
        )
    }

    /// `FORMAT_VIEW_MISMATCH` unless `text` is the text read (its length and hash).
    fn require_text(&self, text: &str) -> Result<(), FormatError> {
        match &self.layout {
            Some(layout) if layout.text.is(text) => Ok(()),
            _ => Err(not_the_text(self.format)),
        }
    }
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
        let request = RequestText {
            text: &text,
            format: pt.format,
        };
        let digests = LeftDigests::new(&request, &pt.deferred, &pt.transcript);
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
        for ahead in [HashAhead::Never, HashAhead::Always, HashAhead::ToTheEnd] {
            let plan = pt
                .plan_hashing(&policy, &budget, &text, ahead)
                .expect("plans");
            // Compared whole but not printed: a plan of 20,000 actions.
            assert!(plan == expected, "{ahead:?}: another plan");
        }
        assert!(pt.plan(&policy, &budget, &text).expect("plans") == expected);
    }

    /// Where contents were left at `positions` (rising), each a byte of a text as long.
    fn spans(positions: &[usize]) -> Vec<LeftContent> {
        positions
            .iter()
            .map(|&p| LeftContent {
                position: p,
                span: p..p + 1,
                canonical: true,
                field: None,
            })
            .collect()
    }

    proptest::proptest! {
        /// Whichever turns left their contents (all, none, runs, gaps), the digests find each
        /// turn's left content as a search through the list does, and none for the others.
        #[test]
        fn the_digests_find_each_left_content_by_its_position(
            leaves in proptest::collection::vec(proptest::bool::weighted(0.8), 0..60),
        ) {
            let n = leaves.len();
            let turns = (0..n.max(1))
                .map(|i| TranscriptTurn::new(format!("t{i}"), Role::User, "x", 1).expect("a turn"))
                .collect();
            let transcript = Transcript::new(turns).expect("unique ids");
            let positions: Vec<usize> = (0..n).filter(|&p| leaves[p]).collect();
            let left = spans(&positions);
            let text = "x".repeat(n + 1);
            let request = RequestText { text: &text, format: Format::OpenAiChat };
            let digests = LeftDigests::new(&request, &left, &transcript);
            for p in 0..n + 3 {
                let searched = left.iter().find(|l| l.position == p);
                proptest::prop_assert_eq!(
                    digests.left(p).map(|l| l.position),
                    searched.map(|l| l.position)
                );
            }
        }
    }
}

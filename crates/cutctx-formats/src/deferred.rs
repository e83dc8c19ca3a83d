//! Turn contents left in the request's text: a transcript read without copying what most
//! compactions never read.
//!
//! A large request is mostly tool output, and a compaction reads little of it: dropping turns
//! reads none, masking reads only the masked turns' contents, and then only to hash them; the
//! output copies every kept message from the request's text. So
//! [`ProviderTranscript::from_text_deferred`] leaves each turn made of one string of the
//! request (a tool result, a user's text) as written there: the turn shows an empty content,
//! its estimate counted from the string's length, and the string is read only when something
//! needs it. [`ProviderTranscript::plan`] decides with a policy by what it reads
//! ([`Reads`]): over the structure alone, with the masks' digests hashed straight from the
//! request's bytes (a string written as the canonical writer writes it, as most are, is its
//! own canonical literal), or over the contents, read in first.

use std::sync::Arc;

use cutctx_invariants::{Analysis, CompactionPlan};
use cutctx_model::{CompactionBudget, Parallelism, details};
use cutctx_policies::{CompactionPolicy, DeferredMasks, Reads, TokenEstimator};
use sha2::{Digest, Sha256};

use crate::mapping::Deferred;
use crate::quick::decode_into;
use crate::{Format, FormatError, ProviderTranscript, Reading, not_the_text};

/// Below this many bytes to hash, a second thread costs more than it saves.
const PARALLEL_BYTES: usize = 1 << 20;

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
    /// this transcript was read from) only what the policy reads: nothing for a policy that
    /// reads the shape or the structure, the masked turns' bytes for the masks' digests of
    /// one that defers them ([`CompactionPolicy::decide_masks`]), and every content, read in
    /// first, for one that reads contents. The plan is the one `policy.decide` makes over the
    /// transcript [`ProviderTranscript::from_text_with`] reads.
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
        if self.deferred.is_empty() {
            return Ok(policy.decide(&self.transcript, budget)?);
        }
        self.require_text(text)?;
        match policy.reads() {
            Reads::Shape => Ok(policy.decide(&self.transcript, budget)?),
            Reads::Structure => {
                let analysis = Analysis::of(&self.transcript, budget);
                match policy.decide_masks(&self.transcript, &analysis) {
                    Some(masks) => {
                        let masks = masks?;
                        let digests = self.digests(&masks, text)?;
                        Ok(masks.plan(&self.transcript, &analysis, policy, &digests)?)
                    }
                    // A policy of the structure alone reads no content.
                    None => Ok(policy.decide_with_analysis(&self.transcript, &analysis)?),
                }
            }
            Reads::Content => {
                self.read_deferred_contents(text)?;
                Ok(policy.decide(&self.transcript, budget)?)
            }
        }
    }

    /// The digest of each masked turn's content: hashed from the request's bytes where the
    /// content is left there, from the transcript's content otherwise.
    fn digests(&self, masks: &DeferredMasks, text: &str) -> Result<Vec<[u8; 32]>, FormatError> {
        let turns = self.transcript.turns();
        // Where each masked turn's content is, by a walk of both position-ordered lists.
        let mut deferred = self.deferred.iter().peekable();
        let mut sources = Vec::with_capacity(masks.masks.len());
        for m in &masks.masks {
            while deferred.next_if(|d| d.position < m.position).is_some() {}
            let source = match deferred.next_if(|d| d.position == m.position) {
                Some(d) => Source::Text(d),
                None => Source::Turn(turns.get(m.position).map_or("", |t| t.content())),
            };
            sources.push(source);
        }
        let digest = |source: &Source<'_>| -> Result<[u8; 32], FormatError> {
            match source {
                Source::Text(d) if d.canonical => {
                    let written = text
                        .get(d.span.clone())
                        .ok_or_else(|| not_the_text(self.format))?;
                    let mut hasher = Sha256::new();
                    hasher.update(b"\"");
                    hasher.update(written.as_bytes());
                    hasher.update(b"\"");
                    Ok(hasher.finalize().into())
                }
                Source::Text(d) => Ok(canonical_digest(&decoded(text, d, self.format)?)),
                Source::Turn(content) => Ok(canonical_digest(content)),
            }
        };
        let bytes: usize = sources.iter().map(Source::len).sum();
        let threads = if bytes < PARALLEL_BYTES {
            1
        } else {
            Parallelism::Automatic.threads()
        };
        if threads < 2 {
            return sources.iter().map(digest).collect();
        }
        // Split by bytes, so that one thread does not get all the large results.
        let share = bytes.div_ceil(threads);
        let mut chunks: Vec<&[Source<'_>]> = Vec::with_capacity(threads);
        let (mut start, mut acc) = (0, 0);
        for (i, source) in sources.iter().enumerate() {
            acc += source.len();
            if acc >= share {
                chunks.push(&sources[start..=i]);
                (start, acc) = (i + 1, 0);
            }
        }
        if start < sources.len() {
            chunks.push(&sources[start..]);
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .iter()
                .map(|chunk| {
                    scope.spawn(|| chunk.iter().map(digest).collect::<Result<Vec<_>, _>>())
                })
                .collect();
            let mut all = Vec::with_capacity(sources.len());
            for (handle, chunk) in handles.into_iter().zip(&chunks) {
                // Hashing cannot panic; were a thread lost anyway, its share is hashed here.
                let part = handle
                    .join()
                    .unwrap_or_else(|_| chunk.iter().map(digest).collect())?;
                all.extend(part);
            }
            Ok(all)
        })
    }

    /// `FORMAT_VIEW_MISMATCH` unless `text` has the length of the text read.
    fn require_text(&self, text: &str) -> Result<(), FormatError> {
        match &self.layout {
            Some(layout) if layout.text_len == text.len() => Ok(()),
            _ => Err(not_the_text(self.format)),
        }
    }
}

/// Where a masked turn's content is.
enum Source<'a> {
    /// Left in the request's text.
    Text(&'a Deferred),
    /// In the transcript.
    Turn(&'a str),
}

impl Source<'_> {
    /// The bytes to hash, about.
    fn len(&self) -> usize {
        match self {
            Source::Text(d) => d.span.len(),
            Source::Turn(content) => content.len(),
        }
    }
}

/// The content left at `d` in `text`, decoded.
fn decoded(text: &str, d: &Deferred, format: Format) -> Result<String, FormatError> {
    let written = text
        .get(d.span.clone())
        .ok_or_else(|| not_the_text(format))?;
    let mut out = String::with_capacity(written.len());
    // The string was checked to decode when it was read; one that does not now is another
    // text of the same length.
    decode_into(written, &mut out).ok_or_else(|| {
        FormatError::view(
            "The text given is not the text this transcript was read from: a string read \
             there does not decode.",
            details! { "format" => format.as_str(), "position" => d.position },
        )
    })?;
    Ok(out)
}

/// The SHA-256 of `content`'s canonical JSON string literal, as a stub states it.
fn canonical_digest(content: &str) -> [u8; 32] {
    let literal = cutctx_model::canonical::canonical_json_value(&content.into());
    Sha256::digest(literal.as_bytes()).into()
}

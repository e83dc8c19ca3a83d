//! The turns of a run of transcript elements, built as they are read: each element by the
//! quick record reader, or strictly when that reader does not take it, and where each content
//! left in the text lies.

use std::sync::Arc;

use cutctx::TranscriptTurn;
use cutctx::model::SharedTurnRecord;
use cutctx::model::wire::{ObjectOnly, WireInt, WireText};

use super::left::Left;
use super::{record, scan};

/// The turns of a run of elements, built as they are read.
///
/// Each element is read by [`record::record_at`], or strictly when that reader does not take
/// it. The ids of the run's records are made into shared strings last, one after another,
/// so that they sit together apart from the contents (see
/// [`Transcript::with_packed_ids`](cutctx::Transcript::with_packed_ids)).
#[derive(Default)]
pub(super) struct Builder {
    /// The text of every quickly read record's ids, one after another.
    ids: String,
    /// Room for decoding a string's escapes.
    scratch: String,
    /// The keys of the record read last, in their order.
    keys: record::KeyOrder,
    read: Vec<Element>,
    /// When contents are left in the text: the content every such turn shows, one string
    /// per builder (a shared one would have every thread count references to it).
    pub(super) placeholder: Option<Arc<str>>,
    /// Where the text this builder reads starts in the request (for [`Left::span`]).
    pub(super) base: usize,
}

/// An element read quickly, its ids still in [`Builder::ids`], or a turn built strictly.
enum Element {
    Quick(record::Record),
    Strict(TranscriptTurn),
}

impl Builder {
    /// A builder that leaves contents in the text.
    pub(super) fn leaving() -> Self {
        Self {
            placeholder: Some(Arc::from("")),
            ..Self::default()
        }
    }

    /// Reads the element of `text` opening at or after `i`; just after it. `None` when the
    /// element is not a turn record, ends before `text` does, or breaks a turn's rule.
    pub(super) fn element(&mut self, text: &str, i: usize) -> Option<usize> {
        if let Some((r, end)) = record::record_at(
            text,
            i,
            &mut self.ids,
            &mut self.scratch,
            &mut self.keys,
            self.placeholder.as_ref(),
        ) {
            self.read.push(Element::Quick(r));
            return Some(end);
        }
        let i = scan::ws(text.as_bytes(), i);
        let end = scan::value_end(text.as_bytes(), i)?;
        let ObjectOnly(r): ObjectOnly<SharedTurnRecord> =
            serde_json::from_str(&text[i..end]).ok()?;
        self.read
            .push(Element::Strict(TranscriptTurn::try_from(r).ok()?));
        Some(end)
    }

    /// Forgets the element read last.
    pub(super) fn unread(&mut self) {
        self.read.pop();
    }

    /// Forgets every element read, keeping the room.
    pub(super) fn clear(&mut self) {
        self.read.clear();
        self.ids.clear();
    }

    /// Appends the turns to `turns`, in the order their elements were read, and where their
    /// contents were left to `left`, and empties the builder for the next run, its buffers
    /// kept. On `None` (a turn that breaks a rule) `turns` may hold some of the run's turns:
    /// the caller discards them.
    pub(super) fn finish_into(
        &mut self,
        turns: &mut Vec<TranscriptTurn>,
        left: &mut Vec<Left>,
    ) -> Option<()> {
        turns.reserve(self.read.len());
        // A result's `tool_call_id` shares its call's string, as `Transcript::new` packs them.
        let mut last_call: Option<Arc<str>> = None;
        let mut built = Some(());
        let mut read = std::mem::take(&mut self.read);
        for r in read.drain(..) {
            if built.is_none() {
                // Drained all the same, so the builder is empty for its next run.
                continue;
            }
            let r = match r {
                Element::Quick(r) => r,
                Element::Strict(turn) => {
                    turns.push(turn);
                    continue;
                }
            };
            if self.push_quick(r, &mut last_call, turns, left).is_none() {
                built = None;
            }
        }
        self.read = read;
        self.ids.clear();
        built
    }

    /// The turn of a record read quickly, pushed onto `turns`, and where its content was left
    /// onto `left`; `last_call` the call id shared with the record after it. `None` when the
    /// turn breaks a rule, or its content lies past what 32 bits hold.
    fn push_quick(
        &self,
        r: record::Record,
        last_call: &mut Option<Arc<str>>,
        turns: &mut Vec<TranscriptTurn>,
        left: &mut Vec<Left>,
    ) -> Option<()> {
        let turn_id = Arc::from(&self.ids[r.id]);
        let call = r.call.map(|c| {
            let text = &self.ids[c];
            match &*last_call {
                Some(prev) if **prev == *text => Arc::clone(prev),
                _ => Arc::from(text),
            }
        });
        if call.is_some() {
            last_call.clone_from(&call);
        }
        let turn = TranscriptTurn::try_from(SharedTurnRecord {
            turn_id: WireText(turn_id),
            role: r.role,
            content: WireText(r.content),
            token_estimate: WireInt(i128::from(r.estimate)),
            tool_call_id: call.map(WireText),
            pinned: r.pinned,
            metadata: r.metadata,
        })
        .ok()?;
        if let Some((span, canonical)) = r.left {
            left.push(Left::of(
                turns.len(),
                self.base,
                span,
                canonical,
                r.verbatim,
            )?);
        }
        turns.push(turn);
        Some(())
    }
}

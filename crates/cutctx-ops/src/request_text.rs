//! A request document compacted with its turns' contents left in its text.
//!
//! Most of a large request is contents, and a compaction reads little of them: a dropped
//! turn's content is never read, a masked one is read only to hash it, and a kept one is
//! written out again as it came in. So the request is read with each content that its quick
//! reader takes left where it lies ([`crate::request::parse_leaving`]); the policy decides with
//! digests hashed from the text by the one planner of contents left in a text,
//! `cutctx::formats::left_in_text::plan_left` (a content spelled as the canonical writer spells
//! it hashed as it stands; a policy that reads contents gets them all decoded first); this file
//! then finds where the compacted view's kept contents lie ([`RequestText::locate`]), and
//! `view.rs` writes the view with each kept content copied from the text, or decoded and
//! written again when it is spelled otherwise. The bytes are those of the path that decodes
//! every content (the tests, in `tests.rs`, hold them to it).

use std::io;
use std::sync::Arc;

use cutctx::formats::left_in_text::{HashAhead, plan_left};
use cutctx::model::details;
use cutctx::{Action, CompactionPlan, Transcript};

use crate::OpsError;
use crate::input::RequestFile;
use crate::request::{Leaving, Left, Request};
use crate::text::Text;

#[cfg(test)]
mod tests;
mod view;

pub(crate) use view::{COPIED_RUN_BYTES, CopyRun};

/// The text a request was read from, with where its turns' contents were left in it.
pub(crate) struct RequestText {
    text: Text<'static>,
    left: Vec<Left>,
    placeholders: Vec<Arc<str>>,
}

/// Where the kept contents of one view lie among a [`RequestText`]'s left contents, found by
/// [`RequestText::locate`] once the view is made and read by [`RequestText::write_view`].
pub(crate) struct Located {
    /// For each turn of the view, by position: the index of its content among the left
    /// ones and whether the turn is written by copying its input's record whole, or `None`
    /// when it shows its own content.
    found: Vec<Option<(u32, bool)>>,
}

/// How the view's turn at a position is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// Its input's record copied whole: the turn is its input's unchanged, and the record
    /// is written as the canonical writer writes it.
    Record(usize),
    /// Its fields written, the content copied or decoded from the left content at this index.
    Content(usize),
}

impl Located {
    /// How the view's turn at `at` is written from the text; `None` when it shows its own
    /// content.
    fn at(&self, at: usize) -> Option<Kept> {
        let (k, whole) = self.found.get(at).copied().flatten()?;
        let k = usize::try_from(k).ok()?;
        Some(if whole {
            Kept::Record(k)
        } else {
            Kept::Content(k)
        })
    }

    /// How many turns the view holds.
    fn len(&self) -> usize {
        self.found.len()
    }
}

impl RequestText {
    /// The request `leaving` read from `text`, and the text with where its contents lie.
    pub(crate) fn new(leaving: Leaving, text: String) -> (Request, Self) {
        Self::of(leaving, Text::Whole(text.into()))
    }

    /// The request `leaving` read from `file` where it lies, and the file with where its
    /// contents lie.
    pub(crate) fn in_file(leaving: Leaving, file: RequestFile) -> (Request, Self) {
        Self::of(leaving, Text::File(file))
    }

    /// Whether the text is still what was read (see [`Text::unchanged`]).
    ///
    /// # Errors
    ///
    /// As [`Text::unchanged`].
    pub(crate) fn unchanged(&self) -> io::Result<()> {
        self.text.unchanged()
    }

    fn of(leaving: Leaving, text: Text<'static>) -> (Request, Self) {
        let Leaving {
            request,
            left,
            placeholders,
        } = leaving;
        let text = Self {
            text,
            left,
            placeholders,
        };
        (request, text)
    }

    /// `req`'s plan (see [`plan`]).
    pub(crate) fn plan(&mut self, req: &mut Request) -> Result<CompactionPlan, OpsError> {
        plan(req, &self.text, &mut self.left)
    }

    /// Finds, for every turn of `view` (the compaction of this text's request by `plan`) that
    /// kept a content left in the text, where it lies: [`RequestText::write_view`] then writes
    /// every one from there. (Each decodes: the reading checked it with
    /// `cutctx_json::check_string`, which accepts what decoding accepts.) A view turn shows a
    /// left content only when the plan keeps its turn as it is, and the view keeps turns in
    /// their order: each is the next left content whose turn the plan keeps. One pass, made
    /// once: the writer reads its result instead of walking the view again.
    ///
    /// # Errors
    ///
    /// `INTERNAL_ERROR` for a view turn showing a placeholder that no kept turn of the
    /// request left, or left under another id (the view is not this plan's), never expected.
    pub(crate) fn locate(
        &self,
        plan: &CompactionPlan,
        view: &Transcript,
    ) -> Result<Located, OpsError> {
        let mut next = 0;
        let mut found = Vec::with_capacity(view.turns().len());
        for turn in view.turns() {
            let shows_placeholder = self
                .placeholders
                .iter()
                .any(|p| std::ptr::eq(turn.content(), &**p));
            if !shows_placeholder {
                found.push(None);
                continue;
            }
            let kept = self.next_kept(plan, turn, &mut next);
            // An index fits 32 bits as the positions do (see `Left`).
            let Some((k, Ok(index))) = kept.map(|k| (k, u32::try_from(k))) else {
                return Err(not_found(turn.turn_id()));
            };
            // Kept as it is: its record is the turn's canonical JSON when the record is
            // written as the canonical writer writes it, which holds no metadata.
            let whole = self.left[k].record().is_some() && turn.metadata().is_empty();
            found.push(Some((index, whole)));
        }
        Ok(Located { found })
    }

    /// The index of the next left content from `next` on whose turn `plan` keeps: `turn`'s,
    /// when the plan's action names it; `None` when none is left, or the next names another.
    fn next_kept(
        &self,
        plan: &CompactionPlan,
        turn: &cutctx::TranscriptTurn,
        next: &mut usize,
    ) -> Option<usize> {
        loop {
            let l = self.left.get(*next)?;
            *next += 1;
            if let Some(action) = plan.actions.get(l.position())
                && action.action() == Action::Keep
            {
                return action.names_id(turn.turn_id_arc()).then_some(*next - 1);
            }
        }
    }
}

/// The `INTERNAL_ERROR` of a view turn whose kept content was not found where it was left.
fn not_found(turn_id: &str) -> OpsError {
    OpsError {
        code: crate::INTERNAL_ERROR,
        message: "a kept turn's content was not found where the request was read: a defect \
                  of cutctx, not of the request"
            .to_owned(),
        details: details! { "turn_id" => turn_id },
    }
}

/// `req`'s plan, `req` read from `text` with its contents left at `left`, reading only what
/// its policy reads (see `cutctx::formats::left_in_text::plan_left`): the masked turns'
/// digests for a policy that decides with digests (for a large transcript, the tool results'
/// digests hashed ahead while the policy decides), every content for any other, decoded into
/// the transcript first (`left` is then emptied: no turn shows a placeholder any more).
///
/// # Errors
///
/// The policy's errors; a text that cannot be read again (an `INPUT_ERROR`).
pub(crate) fn plan(
    req: &mut Request,
    text: &Text<'_>,
    left: &mut Vec<Left>,
) -> Result<CompactionPlan, OpsError> {
    plan_hashing(req, text, left, HashAhead::Auto)
}

/// [`plan`], the tool results' digests hashed ahead as `ahead` says.
fn plan_hashing(
    req: &mut Request,
    text: &Text<'_>,
    left: &mut Vec<Left>,
    ahead: HashAhead,
) -> Result<CompactionPlan, OpsError> {
    plan_left(
        req.policy.as_ref(),
        &mut req.transcript,
        &req.budget,
        text,
        left,
        ahead,
    )
}

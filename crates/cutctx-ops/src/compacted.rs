//! A request document's compaction done, its output not yet written ([`Compacted`]): the plan
//! applied to the request, the plan hashed beside that for a large plan, and the view's kept
//! contents located in the request's text when they were left there. `write.rs` writes the
//! output, whole or a part at a time.

use std::sync::Arc;
use std::thread::JoinHandle;

use cutctx::{CompactedTranscript, CompactionPlan, Parallelism};

use crate::OpsError;
use crate::request::Request;
use crate::request_text::{Located, RequestText};

mod write;

#[cfg(test)]
pub(crate) use write::WRITE_PART_BYTES;
pub(crate) use write::copy_from_file;

/// A compaction done, its output not yet written: everything that could fail but the writing
/// has been checked. It holds the request, the plan and the compacted view the output is made
/// from, hundreds of thousands of small allocations for a large request, so that a process
/// about to exit can leave them to the operating system rather than free them piece by piece.
pub struct Compacted {
    /// The output from the report up to the transcript, `"report":…,"transcript":`, once the
    /// plan's hash is known (see [`Compacted::report`]).
    report: Option<String>,
    /// The report's first part, `"report":` and the report up to its `plan_hash` value, when
    /// it was written beside the view's contents being located (see [`compacted_with`]).
    report_head: Option<String>,
    _request: Request,
    /// The plan, written as the output's first part, `{"plan":…,`, unless `head` is false
    /// (`cutctx apply`, whose plan is the caller's own, prints only `{"report", "transcript"}`).
    plan: Arc<CompactionPlan>,
    /// The thread hashing a large plan, when one was started: it hashes on while the plan is
    /// applied and written out, and is waited for only when the report needs its hash.
    hashing: Option<JoinHandle<String>>,
    head: bool,
    pub(crate) out: CompactedTranscript,
    /// The request's text, when the view's kept contents are written from it, with where
    /// they lie.
    pub(crate) left: Option<(RequestText, Located)>,
}

/// The fewest turns in a view whose report is written beside its contents being located.
pub(crate) const PARALLEL_REPORT_TURNS: usize = 20_000;

/// The fewest actions whose plan is written and hashed on other threads while the plan is
/// applied (as the executor hashes a plan of as many actions on its own).
pub(crate) const PARALLEL_PLAN_ACTIONS: usize = 20_000;

impl Compacted {
    /// This compaction, written as `cutctx apply` prints it: without the plan, which is the
    /// caller's.
    pub(crate) fn without_plan(mut self) -> Self {
        self.head = false;
        self
    }
}

/// Plans and applies `req`.
///
/// The report's `plan_hash` is the SHA-256 of the plan's canonical JSON, streamed through the
/// hash (the output writes the plan again, see `crate::plan_head`): for a large plan, on a
/// second thread while this one applies it and writes it out.
///
/// # Errors
///
/// The policy's errors, and those of applying its plan.
pub(crate) fn compacted(req: Request) -> Result<Compacted, OpsError> {
    let plan = req.policy.decide(&req.transcript, &req.budget)?;
    compacted_with(req, plan, None)
}

/// [`compacted`] of `req` with its `plan` made, the view's kept contents written from `text`
/// where the request's were left there.
///
/// # Errors
///
/// Those of applying `plan`; a view whose kept contents are not where `text` left them (an
/// `INTERNAL_ERROR`, never expected).
pub(crate) fn compacted_with(
    mut req: Request,
    plan: CompactionPlan,
    text: Option<RequestText>,
) -> Result<Compacted, OpsError> {
    let plan = Arc::new(plan);
    let threads = Parallelism::Automatic.threads();
    let hashing = hash_beside(&plan, threads);
    let out = apply(&mut req, &plan)?;
    let (left, report_head) = match text {
        Some(text) => {
            let (located, head) = locate(&text, &plan, &out, threads);
            (Some((text, located?)), head)
        }
        None => (None, None),
    };
    Ok(Compacted {
        report: None,
        report_head,
        _request: req,
        plan,
        hashing,
        head: true,
        out,
        left,
    })
}

/// A thread hashing `plan` when it is large and a second core is to be had: one thread
/// hashing beside this one, no third. Were it not started, the report hashes the plan itself.
fn hash_beside(plan: &Arc<CompactionPlan>, threads: usize) -> Option<JoinHandle<String>> {
    if plan.actions.len() < PARALLEL_PLAN_ACTIONS || threads <= 1 {
        return None;
    }
    let plan = Arc::clone(plan);
    std::thread::Builder::new()
        .spawn(move || plan.plan_hash_with(Parallelism::Sequential))
        .ok()
}

/// `plan` applied to `req`'s transcript, its hash left to the report.
///
/// Applied in place when the view keeps most of the turns: the request's transcript is not
/// read again, and its list becomes the view's, the kept turns moved rather than shared
/// (cloning a turn counts four references, and the view's list is pages touched afresh).
/// When most are left out, each would be freed one by one, which costs more than sharing
/// the few kept: the view then shares them, and the request's turns are left to the exit.
fn apply(req: &mut Request, plan: &CompactionPlan) -> Result<CompactedTranscript, OpsError> {
    let left_out = plan
        .actions
        .iter()
        .filter(|a| matches!(a.action(), cutctx::Action::Drop | cutctx::Action::Summarize))
        .count();
    let out = if 2 * left_out <= plan.actions.len() {
        let input = std::mem::take(&mut req.transcript);
        cutctx::executor::apply_unhashed_in_place(input, plan, &req.summaries)?
    } else {
        cutctx::executor::apply_unhashed(&req.transcript, plan, &req.summaries)?
    };
    Ok(out)
}

/// Where the view's kept contents lie in `text`, and the report written up to its hash beside
/// that (its lists of ids are most of it) when the view is large.
fn locate(
    text: &RequestText,
    plan: &CompactionPlan,
    out: &CompactedTranscript,
    threads: usize,
) -> (Result<Located, OpsError>, Option<String>) {
    if out.transcript.len() < PARALLEL_REPORT_TURNS || threads <= 1 {
        return (text.locate(plan, &out.transcript), None);
    }
    let (located, head) = cutctx::model::beside::beside_one(
        || text.locate(plan, &out.transcript),
        || write::report_head(&out.report),
    );
    // Writing a report cannot panic; were the job lost anyway, the report is written when it
    // is needed.
    (located, head.ok())
}

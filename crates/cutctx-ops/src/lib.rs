//! The operations every cutctx front end runs: plan, compact and apply a request document,
//! compact or estimate a provider request, step a session, replay a run, and batch many
//! requests. The `cutctx` binary, the Python package and any later front end call these and
//! nothing below them, so an output is byte for byte the same whichever front end made it.
//!
//! Each operation takes the text of its documents and plain option structs, and returns the
//! exact bytes to print, or an [`OpsError`] with the stable code, exit status and details every
//! front end reports. `plan`, `compact` and `apply` touch no files or streams; [`input`] reads
//! a large request where it lies in its file, [`ledger`] reads and appends the ledger file it
//! is given, [`summarizer`] starts the `summarize_with` command when asked to, and [`output`]
//! writes whole files and output streams so that a failure is never quiet.
//!
//! ```
//! let request = r#"{"budget":{"max_tokens":100},"policy":{"name":"drop_oldest"},
//!     "transcript":[{"turn_id":"u1","role":"user","content":"hi","token_estimate":2}]}"#;
//! let plan = cutctx_ops::plan(request)?;
//! assert!(plan.starts_with('{') && plan.ends_with("}\n"));
//! # Ok::<(), cutctx_ops::OpsError>(())
//! ```
#![forbid(unsafe_code)]

pub mod batch;
mod error;
pub mod formats;
pub mod input;
pub mod ledger;
mod left_in_text;
pub mod output;
mod plan_head;
pub mod replay;
pub mod request;
pub mod session;
pub mod summarizer;
mod svg;
mod text;
mod two_threads;

pub use error::{INPUT_ERROR, INTERNAL_ERROR, OUTPUT_ERROR, OpsError, USAGE_ERROR};

use std::sync::Arc;

use cutctx::model::wire::ObjectOnly;
use cutctx::{CompactionPlan, Parallelism, PlanDraft};

/// `cutctx plan`: the plan's canonical JSON and one newline.
///
/// # Errors
///
/// Any failure of parsing, validation or planning, as a [`OpsError`].
pub fn plan(request_text: &str) -> Result<String, OpsError> {
    // The contents left in the text: a plan reads at most the masked ones, to hash them.
    let plan = match request::parse_leaving(request_text) {
        Some(leaving) => {
            let mut leaving = leaving?;
            left_in_text::plan(
                &mut leaving.request,
                &text::Text::Whole(request_text.into()),
                &mut leaving.left,
            )?
        }
        None => {
            let req = request::parse(request_text)?;
            req.policy.decide(&req.transcript, &req.budget)?
        }
    };
    Ok(plan.canonical_json() + "\n")
}

/// As [`plan`], the request read from `file` where it lies, as [`compact_file`] reads it;
/// `whole` reads the file whole for a request it does not read so.
///
/// # Errors
///
/// As [`plan`]; a file that cannot be read again, and the errors of `whole`, as
/// [`compact_file`]'s.
pub fn plan_file(
    file: input::RequestFile,
    whole: impl FnOnce(&input::RequestFile) -> Result<String, OpsError>,
) -> Result<String, OpsError> {
    let Some(leaving) = request::parse_leaving_file(&file) else {
        return plan(&whole(&file)?);
    };
    let mut leaving = leaving?;
    let text = text::Text::File(file);
    let plan = left_in_text::plan(&mut leaving.request, &text, &mut leaving.left)?;
    Ok(plan.canonical_json() + "\n")
}

/// `cutctx compact`: plan, apply with the request's summaries, and print
/// `{"plan", "report", "transcript"}` canonically, with one newline.
///
/// # Errors
///
/// As [`plan`], and `COMPACTION_SUMMARY_MISSING` when a requested summary is not supplied.
pub fn compact(request_text: &str) -> Result<String, OpsError> {
    Ok(compacted(request::parse(request_text)?)?.into_text())
}

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
    _request: request::Request,
    /// The plan, written as the output's first part, `{"plan":…,`, unless `head` is false
    /// (`cutctx apply`, whose plan is the caller's own, prints only `{"report", "transcript"}`).
    plan: Arc<CompactionPlan>,
    /// The thread hashing a large plan, when one was started: it hashes on while the plan is
    /// applied and written out, and is waited for only when the report needs its hash.
    hashing: Option<std::thread::JoinHandle<String>>,
    head: bool,
    out: cutctx::CompactedTranscript,
    /// The request's text, when the view's kept contents are written from it, with where
    /// they lie.
    left: Option<(left_in_text::LeftText, left_in_text::Located)>,
}

/// How many bytes of the transcript [`Compacted::write_to`] gathers before writing them.
const WRITE_PART_BYTES: usize = 64 << 10;

impl Compacted {
    /// The output whole: what [`compact`] returns.
    #[must_use]
    pub fn into_text(mut self) -> String {
        let mut text = String::new();
        if self.head {
            plan_head::push_head(&self.plan, &mut text);
        } else {
            text.push('{');
        }
        let report = self.report();
        text.reserve(report.len() + self.out.transcript.canonical_len_hint() + 2);
        text.push_str(&report);
        // One part: the text is the buffer, kept whole. The request's text is held whole
        // here, and read again from memory, which cannot fail: only a compaction of a file
        // read where it lies (a `CompactedFile`, which has no `into_text`) reads a file again.
        let whole = self.write_transcript(&mut text, usize::MAX, |_| Ok(()), |e| e, None);
        debug_assert!(
            whole.is_ok(),
            "a text held whole is read again without failing"
        );
        text.push_str("}\n");
        text
    }

    /// The output's `"report":…,"transcript":`: made the first time, once the plan's hash is
    /// known (waiting for the thread hashing it, or hashing it here when none was started or
    /// the thread was lost), and taken from the compaction until given back.
    fn report(&mut self) -> String {
        if let Some(report) = self.report.take() {
            return report;
        }
        let hashed = self.hashing.take().and_then(|h| h.join().ok());
        self.out.report.plan_hash = hashed.unwrap_or_else(|| self.plan.plan_hash());
        let mut report = self
            .report_head
            .take()
            .unwrap_or_else(|| report_head(&self.out.report));
        self.out.report.write_canonical_from_hash(&mut report);
        report.push_str(",\"transcript\":");
        report
    }

    /// Writes the view's canonical JSON onto `buf`, handing it to `drain` each time it holds
    /// `part` bytes or more, and at the end: its kept contents copied from the request's text
    /// where they were left there.
    ///
    /// With `copy` and a length, runs of kept turns written as their records stand in a
    /// request file, at least that long, are handed to it as ranges of the file (see
    /// [`left_in_text::LeftText::write_view`]).
    fn write_transcript<E>(
        &self,
        buf: &mut String,
        part: usize,
        drain: impl FnMut(&mut String) -> Result<(), E>,
        read_failed: impl Fn(std::io::Error) -> E,
        copy: Option<(left_in_text::CopyRun<'_, E>, usize)>,
    ) -> Result<(), E> {
        let view = &self.out.transcript;
        match &self.left {
            Some((text, located)) => {
                text.write_view(view, located, buf, part, drain, read_failed, copy)
            }
            None => view.write_canonical_in_parts(buf, part, drain),
        }
    }

    /// Writes the output to `out` and flushes it: the bytes of [`Compacted::into_text`], the
    /// transcript written a part at a time as it is made, never held whole.
    ///
    /// # Errors
    ///
    /// The first error writing to `out` returns; part of the output may have been written.
    pub fn write_to(&mut self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        self.write_out(out, None)
    }

    /// [`Compacted::write_to`], each run of kept turns whose records stand one after another
    /// in the request file, at least as long as `copy` says, handed to `copy` with `out`, as
    /// the range of the file it spans.
    fn write_out<W: std::io::Write>(
        &mut self,
        out: &mut W,
        copy: Option<(CopyRange<W>, usize)>,
    ) -> std::io::Result<()> {
        if self.head {
            plan_head::write_head(&self.plan, out)?;
        } else {
            out.write_all(b"{")?;
        }
        let report = self.report();
        let written = out.write_all(report.as_bytes());
        // Kept for a later writing of the same output.
        self.report = Some(report);
        written?;
        let mut buf = String::with_capacity(2 * WRITE_PART_BYTES);
        // Written by the drain and by the copy in turn, never at once.
        let out = std::cell::RefCell::new(out);
        let out_ref = &out;
        let mut copying = copy.map(|(copy, shortest)| {
            let copy = move |file: &input::RequestFile, range: std::ops::Range<usize>| {
                copy(&mut out_ref.borrow_mut(), file, range)
            };
            (copy, shortest)
        });
        self.write_transcript(
            &mut buf,
            WRITE_PART_BYTES,
            |part| {
                out.borrow_mut().write_all(part.as_bytes())?;
                part.clear();
                Ok::<(), std::io::Error>(())
            },
            // Carried to `output::deliver_with` as the input's error it is.
            |e| std::io::Error::other(left_in_text::read_again_failed(&e, None)),
            copying.as_mut().map(|(copy, shortest)| {
                (copy as left_in_text::CopyRun<'_, std::io::Error>, *shortest)
            }),
        )?;
        let out = out.into_inner();
        out.write_all(b"}\n")?;
        out.flush()
    }
}

/// How a range of a request file is written into an output `W` (see [`Compacted::write_out`]).
type CopyRange<W> = fn(&mut W, &input::RequestFile, std::ops::Range<usize>) -> std::io::Result<()>;

/// The output's `"report":` and `report` up to its `plan_hash` value, in a buffer sized for the
/// whole report.
fn report_head(report: &cutctx::CompactionReport) -> String {
    let mut head = String::with_capacity(report.canonical_len_hint() + 32);
    head.push_str("\"report\":");
    report.write_canonical_before_hash(&mut head);
    head
}

/// The fewest turns in a view whose report is written beside its contents being located.
const PARALLEL_REPORT_TURNS: usize = 20_000;

/// The fewest actions whose plan is written and hashed on other threads while the plan is
/// applied (as the executor hashes a plan of as many actions on its own).
const PARALLEL_PLAN_ACTIONS: usize = 20_000;

/// As [`compact`], taking the request's text to free it as soon as it is parsed (nothing
/// after parsing reads it), its output left to write.
///
/// # Errors
///
/// As [`compact`].
pub fn compact_retaining(request_text: String) -> Result<Compacted, OpsError> {
    let req = request::parse(&request_text)?;
    drop(request_text);
    compacted(req)
}

/// As [`compact_retaining`], the contents of the request's turns left in its text, which the
/// output holds: a dropped turn's content is never decoded, a masked one is hashed where it
/// lies, and a kept one is copied from the text (see [`request::parse_leaving`]). The output
/// is the bytes [`compact`] gives.
///
/// ```
/// let request = r#"{"transcript":[
///     {"turn_id":"a","role":"assistant","content":"run","token_estimate":5,"tool_call_id":"c"},
///     {"turn_id":"t","role":"tool","content":"a \"long\" log","token_estimate":900,"tool_call_id":"c"},
///     {"turn_id":"u","role":"user","content":"go on","token_estimate":5}],
///   "budget":{"max_tokens":100,"protected_recent_turns":1},
///   "policy":{"name":"observation_masking","keep_recent_results":0}}"#;
/// let left = cutctx_ops::compact_text(request.to_owned())?.into_text();
/// assert_eq!(left, cutctx_ops::compact(request)?);
/// assert!(left.contains("sha256:"));
/// # Ok::<(), cutctx_ops::OpsError>(())
/// ```
///
/// # Errors
///
/// As [`compact`].
pub fn compact_text(request_text: String) -> Result<Compacted, OpsError> {
    let Some(leaving) = request::parse_leaving(&request_text) else {
        return compact_retaining(request_text);
    };
    let (mut req, mut text) = left_in_text::LeftText::new(leaving?, request_text);
    let plan = text.plan(&mut req)?;
    compacted_with(req, plan, Some(text))
}

/// As [`compact_text`], the request read from `file` where it lies rather than held whole
/// (see [`request::parse_leaving_file`]): the view's kept contents are read from the file
/// again when the output is written, a window at a time, and the file is checked unchanged
/// before the output's first byte and before the view's last part. `whole` reads the file whole (with the errors reading the
/// request gives) for a request [`request::parse_leaving_file`] does not read: it is then
/// compacted by [`compact_text`].
///
/// ```
/// use cutctx_ops::input::RequestFile;
/// let turns: Vec<String> = (0..50_000)
///     .map(|i| format!(r#"{{"turn_id":"u{i}","role":"user","content":"turn {i} of a long talk","token_estimate":9}}"#))
///     .collect();
/// let request = format!(r#"{{"transcript":[{}],"budget":{{"max_tokens":1000}},"policy":{{"name":"drop_oldest"}}}}"#, turns.join(","));
/// let path = std::env::temp_dir().join(format!("cutctx-compact-file-doc-{}", std::process::id()));
/// std::fs::write(&path, &request)?;
/// let file = RequestFile::open(&path)?.expect("large enough to read where it lies");
/// let mut compacted = cutctx_ops::compact_file(file, |file| {
///     String::from_utf8(file.read_whole().expect("reads")).map_err(|_| unreachable!())
/// })?;
/// let mut out = Vec::new();
/// compacted.write_to(&mut out)?;
/// assert_eq!(String::from_utf8(out).expect("UTF-8"), cutctx_ops::compact(&request)?);
/// std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// As [`compact`]; a file that cannot be read again while planning is an `INPUT_ERROR`, as
/// are the errors of `whole`.
pub fn compact_file(
    file: input::RequestFile,
    whole: impl FnOnce(&input::RequestFile) -> Result<String, OpsError>,
) -> Result<CompactedFile, OpsError> {
    let Some(leaving) = request::parse_leaving_file(&file) else {
        return compact_text(whole(&file)?).map(CompactedFile);
    };
    let (mut req, mut text) = left_in_text::LeftText::in_file(leaving?, file);
    let plan = text.plan(&mut req)?;
    compacted_with(req, plan, Some(text)).map(CompactedFile)
}

/// A compaction of a request read where it lies in its file ([`compact_file`]), its output
/// not yet written. Writing it reads the file again, which may fail: it is only written to a
/// writer, whose errors carry that failure as the [`OpsError`] it is.
pub struct CompactedFile(Compacted);

impl CompactedFile {
    /// Writes the output to `out` and flushes it, as [`Compacted::write_to`] does.
    ///
    /// # Errors
    ///
    /// The first error writing to `out`; a failure to read the file again, or a file found
    /// changed, as an error carrying the `INPUT_ERROR` [`OpsError`] (see
    /// [`output::deliver_with`]): before the first byte for a file that changed since it was
    /// opened, else with part of the output written, never its end.
    pub fn write_to(&mut self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        self.unchanged()?;
        self.0.write_to(out)
    }

    /// As [`CompactedFile::write_to`], each long run of kept turns whose records stand one
    /// after another in the file (at a 50% budget, the newest half of a transcript) written
    /// into `out` straight from the file ([`output::CopyFrom`]): for standard output, by the
    /// kernel where the system allows it (into a file or a device), never read into this
    /// program; the bytes are those of [`CompactedFile::write_to`].
    ///
    /// # Errors
    ///
    /// As [`CompactedFile::write_to`]; a run the file no longer holds whole is a file that
    /// changed.
    pub fn write_copying_to(&mut self, out: &mut impl output::CopyFrom) -> std::io::Result<()> {
        self.write_copying_runs_to(out, left_in_text::COPIED_RUN_BYTES)
    }

    /// [`CompactedFile::write_copying_to`], copying runs of at least `shortest` bytes.
    fn write_copying_runs_to(
        &mut self,
        out: &mut impl output::CopyFrom,
        shortest: usize,
    ) -> std::io::Result<()> {
        self.unchanged()?;
        self.0.write_out(out, Some((copy_from_file, shortest)))
    }

    /// Whether the file is unchanged since it was opened, as an error for the writer.
    fn unchanged(&self) -> std::io::Result<()> {
        // A file that changed since it was opened (while it was planned, say) fails before
        // the first byte: only one changing while the output is written leaves part of it.
        match &self.0.left {
            Some((text, _)) => text
                .unchanged()
                .map_err(|e| std::io::Error::other(left_in_text::read_again_failed(&e, None))),
            None => Ok(()),
        }
    }
}

/// Writes `range` of `file` into `out` straight from the file. A failure is the input's when
/// the file no longer holds the range or changed (an `INPUT_ERROR` carried out, as the view's
/// reads carry theirs), else the output's.
fn copy_from_file<W: output::CopyFrom>(
    out: &mut W,
    file: &input::RequestFile,
    range: std::ops::Range<usize>,
) -> std::io::Result<()> {
    file.copy_to(range.clone(), out).map_err(|e| {
        // A copy cut short: the file ends before the range does.
        let short = e.kind() == std::io::ErrorKind::UnexpectedEof;
        match file.unchanged() {
            Ok(()) if !short => e,
            Ok(()) => std::io::Error::other(left_in_text::read_again_failed(&e, Some(range.start))),
            Err(changed) => {
                std::io::Error::other(left_in_text::read_again_failed(&changed, Some(range.start)))
            }
        }
    })
}

/// As [`compact_retaining`], reading the request from `reader` piece by piece, so that its
/// whole text is never held (see [`request::parse_reader`]); `whole` reads it whole again,
/// for the exact error, when anything in it is amiss.
///
/// # Errors
///
/// As [`compact`], and whatever `whole` returns.
pub fn compact_reader(
    reader: impl std::io::Read,
    whole: impl FnOnce() -> Result<String, OpsError>,
) -> Result<Compacted, OpsError> {
    compacted(request::parse_reader(reader, whole)?)
}

/// Plans and applies `req`.
///
/// The report's `plan_hash` is the SHA-256 of the plan's canonical JSON, streamed through the
/// hash (the output writes the plan again, see [`head`]): for a large plan, on a second thread
/// while this one applies it and writes it out.
fn compacted(req: request::Request) -> Result<Compacted, OpsError> {
    let plan = req.policy.decide(&req.transcript, &req.budget)?;
    compacted_with(req, plan, None)
}

/// [`compacted`] of `req` with its `plan` made, the view's kept contents written from `text`
/// where the request's were left there.
fn compacted_with(
    mut req: request::Request,
    plan: CompactionPlan,
    text: Option<left_in_text::LeftText>,
) -> Result<Compacted, OpsError> {
    let plan = Arc::new(plan);
    let threads = Parallelism::Automatic.threads();
    let hashing = (plan.actions.len() >= PARALLEL_PLAN_ACTIONS && threads > 1)
        .then(|| {
            // One thread hashing beside this one: no third. Were it not started, the report
            // hashes the plan itself.
            let plan = Arc::clone(&plan);
            std::thread::Builder::new()
                .spawn(move || plan.plan_hash_with(Parallelism::Sequential))
                .ok()
        })
        .flatten();
    // Applied in place when the view keeps most of the turns: the request's transcript is not
    // read again, and its list becomes the view's, the kept turns moved rather than shared
    // (cloning a turn counts four references, and the view's list is pages touched afresh).
    // When most are left out, each would be freed one by one, which costs more than sharing
    // the few kept: the view then shares them, and the request's turns are left to the exit.
    let left_out = plan
        .actions
        .iter()
        .filter(|a| matches!(a.action(), cutctx::Action::Drop | cutctx::Action::Summarize))
        .count();
    let out = if 2 * left_out <= plan.actions.len() {
        let input = std::mem::take(&mut req.transcript);
        cutctx::executor::apply_unhashed_in_place(input, &plan, &req.summaries)?
    } else {
        cutctx::executor::apply_unhashed(&req.transcript, &plan, &req.summaries)?
    };
    // The view's kept contents located, and the report written up to its hash beside that
    // (its lists of ids are most of it) when the view is large.
    let (left, report_head) = match text {
        Some(text) if out.transcript.len() >= PARALLEL_REPORT_TURNS && threads > 1 => {
            let (located, head) = cutctx::model::beside::beside_one(
                || text.locate(&plan, &out.transcript),
                || report_head(&out.report),
            );
            // Writing a report cannot panic; were the job lost anyway, the report is written
            // when it is needed.
            (Some((text, located?)), head.ok())
        }
        Some(text) => {
            let located = text.locate(&plan, &out.transcript)?;
            (Some((text, located)), None)
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

/// `cutctx apply`: validate a stored plan against the request, apply it, and print
/// `{"report", "transcript"}` canonically, with one newline.
///
/// # Errors
///
/// `COMPACTION_PLAN_MISMATCH` when the plan names other turns or another order; any rule the
/// plan breaks; a missing summary.
pub fn apply(request_text: &str, plan_text: &str) -> Result<String, OpsError> {
    let req = request::parse(request_text)?;
    let plan = stored_plan(&req, plan_text)?;
    let out = cutctx::apply(&req.transcript, &plan, &req.summaries)?;
    Ok(format!(
        "{{\"report\":{},\"transcript\":{}}}\n",
        out.report.canonical_json(),
        out.transcript.canonical_json()
    ))
}

/// The plan stored in `plan_text`, validated against `req`: a mismatch named as such before
/// the rules are checked, since a plan is positional.
fn stored_plan(req: &request::Request, plan_text: &str) -> Result<CompactionPlan, OpsError> {
    let ObjectOnly(draft): ObjectOnly<PlanDraft> = error::parse_json("the plan", plan_text)?;
    cutctx::executor::check_match(&req.transcript, &draft.actions)?;
    Ok(CompactionPlan::validate(
        draft,
        &req.transcript,
        &req.budget,
    )?)
}

/// As [`apply`], the contents of the request's turns left in its text, as [`compact_text`]
/// leaves them: no rule of a plan and no step of applying one reads a content, and the output
/// copies each kept one from the text. The output is the bytes [`apply`] gives, its errors
/// the same.
///
/// ```
/// let request = r#"{"transcript":[
///     {"turn_id":"a","role":"assistant","content":"run","token_estimate":5,"tool_call_id":"c"},
///     {"turn_id":"t","role":"tool","content":"a \"long\" log","token_estimate":900,"tool_call_id":"c"},
///     {"turn_id":"u","role":"user","content":"go on","token_estimate":5}],
///   "budget":{"max_tokens":100,"protected_recent_turns":1},
///   "policy":{"name":"observation_masking","keep_recent_results":0}}"#;
/// let plan = cutctx_ops::plan(request)?;
/// let applied = cutctx_ops::apply_text(request.to_owned(), &plan)?.into_text();
/// assert_eq!(applied, cutctx_ops::apply(request, &plan)?);
/// assert!(applied.starts_with(r#"{"report":"#));
/// # Ok::<(), cutctx_ops::OpsError>(())
/// ```
///
/// # Errors
///
/// As [`apply`].
pub fn apply_text(request_text: String, plan_text: &str) -> Result<Compacted, OpsError> {
    let Some(leaving) = request::parse_leaving(&request_text) else {
        let req = request::parse(&request_text)?;
        drop(request_text);
        let plan = stored_plan(&req, plan_text)?;
        return Ok(without_plan(compacted_with(req, plan, None)?));
    };
    let (req, text) = left_in_text::LeftText::new(leaving?, request_text);
    let plan = stored_plan(&req, plan_text)?;
    Ok(without_plan(compacted_with(req, plan, Some(text))?))
}

/// As [`apply_text`], the request read from `file` where it lies, as [`compact_file`] reads
/// it; `whole` reads the file whole for a request it does not read so.
///
/// # Errors
///
/// As [`apply`]; a file that cannot be read again, and the errors of `whole`, as
/// [`compact_file`]'s.
pub fn apply_file(
    file: input::RequestFile,
    plan_text: &str,
    whole: impl FnOnce(&input::RequestFile) -> Result<String, OpsError>,
) -> Result<CompactedFile, OpsError> {
    let Some(leaving) = request::parse_leaving_file(&file) else {
        return apply_text(whole(&file)?, plan_text).map(CompactedFile);
    };
    let (req, text) = left_in_text::LeftText::in_file(leaving?, file);
    let plan = stored_plan(&req, plan_text)?;
    Ok(CompactedFile(without_plan(compacted_with(
        req,
        plan,
        Some(text),
    )?)))
}

/// `compacted`, written as `cutctx apply` prints it: without the plan, which is the caller's.
fn without_plan(mut compacted: Compacted) -> Compacted {
    compacted.head = false;
    compacted
}

#[cfg(test)]
mod tests {
    /// A request of `n` user turns of about a hundred bytes each, half of them kept.
    fn request(n: usize) -> String {
        let turns: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"turn_id":"t{i}","role":"user","content":"{i} \"quoted\" {}","token_estimate":10}}"#,
                    "x".repeat(80)
                )
            })
            .collect();
        format!(
            r#"{{"transcript":[{}],"budget":{{"max_tokens":{}}},"policy":{{"name":"drop_oldest"}}}}"#,
            turns.join(","),
            n * 5
        )
    }

    /// `request(n)` in a temporary file named for `name`, compacted where it lies.
    fn compacted_file(name: &str, n: usize) -> (std::path::PathBuf, String, super::CompactedFile) {
        let text = request(n);
        let (path, file) = super::input::temp_request_file(name, text.as_bytes());
        let compacted =
            super::compact_file(file, |_| panic!("read where it lies")).expect("a valid request");
        (path, text, compacted)
    }

    /// A request of `n` turn records each written as the canonical writer writes its turn,
    /// for dropping the older half: the view is one long run of records as they stand.
    fn canonical_request(n: usize) -> String {
        let turns: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"content":"{i} \"quoted\" {}","metadata":{{}},"pinned":false,"role":"user","token_estimate":10,"tool_call_id":null,"turn_id":"t{i}"}}"#,
                    "x".repeat(120)
                )
            })
            .collect();
        format!(
            r#"{{"budget":{{"max_tokens":{}}},"policy":{{"name":"drop_oldest"}},"transcript":[{}]}}"#,
            n * 5,
            turns.join(","),
        )
    }

    #[test]
    fn a_long_run_of_kept_records_is_copied_from_the_file_as_it_would_be_written() {
        let text = canonical_request(20_000);
        let expected = super::compact(&text).expect("compacted");
        let (path, file) = super::input::temp_request_file("copied", text.as_bytes());
        let mut compacted =
            super::compact_file(file, |_| panic!("read where it lies")).expect("a valid request");
        let (left, located) = compacted
            .0
            .left
            .as_ref()
            .expect("contents left in the file");
        let runs = left.copied_runs(located, super::left_in_text::COPIED_RUN_BYTES);
        assert_eq!(runs.len(), 1, "the newest half, one run");
        // Into a vector, and into a file through standard output's writer (a copy the
        // kernel makes).
        let mut written = Vec::new();
        compacted.write_copying_to(&mut written).expect("written");
        assert!(written == expected.as_bytes(), "into a vector");
        let out_path = path.with_extension("out");
        let out_file = std::fs::File::create(&out_path).expect("an output file");
        let mut out = super::output::Stdout::of_file(out_file);
        compacted.write_copying_to(&mut out).expect("written");
        drop(out);
        let copied = std::fs::read(&out_path).expect("the output");
        assert!(copied == expected.as_bytes(), "into a file");
        // The file cut short after planning, its first check passed: the copy comes up
        // short, an `INPUT_ERROR`, the output's end never written.
        let cut = text.len() - text.len() / 4;
        std::fs::write(&path, &text.as_bytes()[..cut]).expect("cut");
        let mut written = Vec::new();
        let err = compacted
            .0
            .write_out(&mut written, Some((super::copy_from_file, 1)))
            .expect_err("cut short");
        let carried = err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<super::OpsError>())
            .map(|cli| cli.code);
        assert_eq!(carried, Some(super::INPUT_ERROR));
        assert!(!written.is_empty() && !written.ends_with(b"}\n"));
        for p in [&path, &out_path] {
            std::fs::remove_file(p).expect("removed");
        }
    }

    #[test]
    fn a_request_read_where_it_lies_gives_the_output_of_its_text() {
        let (path, text, mut compacted) = compacted_file("same", 3_000);
        let mut written = Vec::new();
        compacted.write_to(&mut written).expect("written");
        std::fs::remove_file(&path).expect("removed");
        assert_eq!(
            String::from_utf8(written).expect("UTF-8"),
            super::compact(&text).expect("compacted")
        );
    }

    #[test]
    fn a_stored_plan_applied_to_a_request_read_where_it_lies_gives_the_output_of_its_text() {
        let text = request(3_000);
        let plan = super::plan(&text).expect("a plan");
        let (path, file) = super::input::temp_request_file("apply", text.as_bytes());
        let mut applied =
            super::apply_file(file, &plan, |_| panic!("read where it lies")).expect("applied");
        let mut written = Vec::new();
        applied.write_to(&mut written).expect("written");
        std::fs::remove_file(&path).expect("removed");
        let expected = super::apply(&text, &plan).expect("applied");
        assert_eq!(String::from_utf8(written).expect("UTF-8"), expected);
    }

    #[test]
    fn a_request_read_where_it_lies_is_planned_as_its_text() {
        let text = request(3_000);
        let (path, file) = super::input::temp_request_file("plan", text.as_bytes());
        let planned = super::plan_file(file, |_| panic!("read where it lies"));
        std::fs::remove_file(&path).expect("removed");
        assert_eq!(planned, super::plan(&text));
    }

    #[test]
    fn a_request_file_that_changes_after_it_is_read_is_an_input_error() {
        let carried = |e: &std::io::Error| {
            e.get_ref()
                .and_then(|inner| inner.downcast_ref::<super::OpsError>())
                .map(|cli| cli.code)
        };
        // Grown by a space after planning: found changed before the output's first byte.
        let (path, text, mut compacted) = compacted_file("grown", 3_000);
        std::fs::write(&path, format!("{text} ")).expect("rewritten");
        let mut written = Vec::new();
        let err = compacted.write_to(&mut written).expect_err("changed");
        assert_eq!(carried(&err), Some(super::INPUT_ERROR));
        assert!(written.is_empty());
        // Changed once that check is passed (the output written as `CompactedFile` writes it
        // after it): found after the view's last turn, the output's end never written.
        let err = compacted.0.write_to(&mut written).expect_err("changed");
        assert_eq!(carried(&err), Some(super::INPUT_ERROR));
        assert!(written.len() > 3 * super::WRITE_PART_BYTES && !written.ends_with(b"}\n"));
        // The same length, a kept record in the middle of the view no longer UTF-8: found
        // where it is read again, the view's second half never written (a change found only
        // at the end would leave at most its last part unwritten). A view on one thread and
        // one long enough for two.
        for n in [8_000, 2 * super::PARALLEL_REPORT_TURNS + 2_000] {
            let (path2, text2, mut compacted2) = compacted_file(&format!("broken-{n}"), n);
            let expected = super::compact(&text2).expect("compacted");
            let view = expected.len() - expected.find("\"transcript\":").expect("a view");
            // Inside the content of the turn three quarters in: a content is read again
            // whatever the record around it.
            let quarter = text2.len() * 3 / 4;
            let at = quarter + text2[quarter..].find("\"content\":\"").expect("a turn") + 12;
            let mut bytes = text2.into_bytes();
            bytes[at] = 0xff;
            std::fs::write(&path2, &bytes).expect("rewritten");
            let mut written = Vec::new();
            let err = compacted2.0.write_to(&mut written).expect_err("not UTF-8");
            assert_eq!(carried(&err), Some(super::INPUT_ERROR));
            assert!(view > 4 * super::WRITE_PART_BYTES, "{view}");
            let unwritten = expected.len() - written.len();
            assert!(unwritten > view / 3, "{n}: {unwritten} of {view} unwritten");
            // Through the command's delivery: the `INPUT_ERROR` itself, before any output.
            let mut delivered_bytes = Vec::new();
            let delivered =
                super::output::deliver_with(&mut delivered_bytes, |w| compacted2.write_to(w));
            assert_eq!(
                delivered.map_err(|e| e.code).err(),
                Some(super::INPUT_ERROR)
            );
            assert!(delivered_bytes.is_empty());
            std::fs::remove_file(&path2).expect("removed");
        }
        std::fs::remove_file(&path).expect("removed");
    }

    #[test]
    fn the_output_written_in_parts_is_the_output_made_whole() {
        // Large enough that the transcript is written in several parts.
        let text = request(3_000);
        let whole = super::compact(&text).expect("a valid request");
        let mut written = Vec::new();
        super::compact_retaining(text)
            .expect("a valid request")
            .write_to(&mut written)
            .expect("a vector takes every write");
        assert!(whole.len() > 3 * super::WRITE_PART_BYTES);
        assert_eq!(String::from_utf8(written).expect("UTF-8"), whole);
    }

    #[test]
    fn a_large_output_is_what_the_executor_reports() {
        // Enough actions that the plan is written and hashed beside the walk: the bytes are
        // the plan's, report's and view's canonical JSON as the executor makes them, its
        // `plan_hash` included.
        let n = super::PARALLEL_PLAN_ACTIONS + 10;
        let text = request(n);
        let req = super::request::parse(&text).expect("a valid request");
        let plan = req
            .policy
            .decide(&req.transcript, &req.budget)
            .expect("a plan");
        let out = cutctx::apply(&req.transcript, &plan, &req.summaries).expect("applied");
        let expected = format!(
            "{{\"plan\":{},\"report\":{},\"transcript\":{}}}\n",
            plan.canonical_json(),
            out.report.canonical_json(),
            out.transcript.canonical_json()
        );
        assert_eq!(out.report.plan_hash.len(), 64);
        assert_eq!(super::compact(&text).expect("compacted"), expected);
        let mut written = Vec::new();
        super::compact_retaining(text)
            .expect("a valid request")
            .write_to(&mut written)
            .expect("a vector takes every write");
        assert_eq!(String::from_utf8(written).expect("UTF-8"), expected);
    }

    #[test]
    fn a_failed_write_is_an_error() {
        /// Takes `room` bytes, then fails.
        struct Full {
            room: usize,
        }
        impl std::io::Write for Full {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.room == 0 {
                    return Err(std::io::ErrorKind::StorageFull.into());
                }
                let n = buf.len().min(self.room);
                self.room -= n;
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut compacted = super::compact_retaining(request(3_000)).expect("a valid request");
        for room in [0, 10, super::WRITE_PART_BYTES + 7] {
            let e = compacted
                .write_to(&mut Full { room })
                .expect_err("the writer fills");
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{room}");
        }
    }
}

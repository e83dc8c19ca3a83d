//! `cutctx batch`: one provider request per line of a JSONL file, compacted on every core, one
//! output line per input line in the input's order.
//!
//! Each line goes through [`formats::compact_detailed`], the function behind `cutctx compact
//! --format`, so an output line is exactly what that command prints for the line's request
//! (the request alone; a request that fits comes back byte for byte). A line that fails
//! becomes `null`, so output line N always answers input line N; its error goes to
//! `--errors FILE` as `{"code", "details", "line", "message"}`, never with content.
//!
//! The work is a bounded pipeline on scoped threads: a reader splits lines into chunks (up to
//! [`CHUNK_LINES`] lines or [`CHUNK_BYTES`] bytes), `--jobs` workers compact them, and the
//! writer puts results back in order. A chunk is only read once a slot of a fixed window is
//! free, and a slot is freed only when its lines have been written, so at most [`window`]
//! chunks are held at once whatever the file's size. Chunks, not lines, cross between threads:
//! handing over each small line would cost the threads more waking up than compacting it.
//!
//! A chunk's buffers go round the window and are used again: the reader reads its lines into one
//! buffer, the worker writes their outputs into another, the writer empties both and hands the
//! chunk back with the slot. So the text of a line is neither allocated per line nor freed on a
//! thread other than the one that allocated it: a worker frees what it allocates while
//! compacting, as the single-request path does, instead of the writer freeing every output
//! (glibc gives such memory back to the worker's arena under that arena's lock).
//!
//! Input compressed with gzip or zstd (recognised by its first bytes, so standard input too) is
//! decompressed as it is read.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, IsTerminal, Read, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use cutctx::ledger::Ledger;
use cutctx::model::details;
use cutctx::receipts::Clock;
use cutctx::receipts::transcript::{default_compactor, receipt_for_compaction};
use serde_json::Value;

use crate::formats::{self, Detailed, FormatOptions};
use crate::output::{self, CLOSED_PIPE_STATUS};
use crate::{OpsError, USAGE_ERROR};

/// The exit status when the run completed but at least one line failed (see `--errors`).
pub const SOME_LINES_FAILED_STATUS: u8 = 1;

/// The options of `cutctx batch`.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// The JSONL file of requests (`.gz` and `.zst` read directly), or `-` for standard input.
    pub input: PathBuf,
    /// The format, budget and policy, as `cutctx compact --format` takes them.
    pub format: FormatOptions,
    /// A JSON object {group_id: summary} fulfilling every line's summarization requests.
    pub summaries: Option<PathBuf>,
    /// How many lines are compacted at once (default: every core).
    pub jobs: Option<NonZeroUsize>,
    /// Write one JSON line per failed input line to this file: `{"code", "details", "line",
    /// "message"}` (replaced atomically at the end of the run).
    pub errors: Option<PathBuf>,
    /// Append one receipt per compacted line (not for unchanged or failed ones) to this ledger.
    pub ledger: Option<PathBuf>,
    /// The compactor the receipts name (default `cutctx/<version>`).
    pub compactor: Option<String>,
}

/// What a run did, line by line, as the summary reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Lines read.
    pub lines: u64,
    /// Lines whose request was compacted.
    pub compacted: u64,
    /// Lines whose request already fitted, written back as they were.
    pub unchanged: u64,
    /// Lines that failed, written as `null`.
    pub failed: u64,
    /// Drops `--repair` made, over every line that did not fail.
    pub repairs: u64,
    /// The whole prompts of the requests that did not fail, before, in estimated tokens:
    /// tools, system, messages and the output reserve, as `cutctx estimate` totals them.
    pub tokens_before: u64,
    /// Their whole prompts after, counted the same way.
    pub tokens_after: u64,
}

impl Summary {
    /// One line for people: `N lines: C compacted, U unchanged, F failed; R repairs; tokens B
    /// -> A`.
    ///
    /// ```
    /// let s = cutctx_ops::batch::Summary { lines: 3, compacted: 1, unchanged: 1, failed: 1,
    ///     repairs: 2, tokens_before: 900, tokens_after: 400 };
    /// assert_eq!(s.text(), "3 lines: 1 compacted, 1 unchanged, 1 failed; 2 repairs; tokens 900 -> 400");
    /// ```
    #[must_use]
    pub fn text(&self) -> String {
        format!(
            "{} lines: {} compacted, {} unchanged, {} failed; {} repairs; tokens {} -> {}",
            self.lines,
            self.compacted,
            self.unchanged,
            self.failed,
            self.repairs,
            self.tokens_before,
            self.tokens_after
        )
    }

    /// The same as canonical JSON (keys sorted), for programs.
    #[must_use]
    pub fn json(&self) -> String {
        cutctx::model::canonical::canonical_json_value(&serde_json::json!({
            "lines": self.lines,
            "compacted": self.compacted,
            "unchanged": self.unchanged,
            "failed": self.failed,
            "repairs": self.repairs,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }))
    }
}

/// Where a run's lines come from and its results go, beside the options.
pub struct Io<'a> {
    /// The input, decompressed or not ([`open_input`] recognises compression).
    pub input: Box<dyn BufRead + Send + 'a>,
    /// The output lines.
    pub output: &'a mut dyn Write,
    /// Stamps the ledger's receipts.
    pub clock: &'a dyn Clock,
    /// Called with the summary so far now and then, for a progress bar.
    pub progress: Option<&'a mut dyn FnMut(&Summary)>,
    /// Called with one line (no newline) per drop `--repair` made, in line order:
    /// `cutctx: line L: repair: KIND at position P (id "ID")`, no content.
    pub notices: Option<&'a mut dyn FnMut(&str)>,
}

/// How many chunks of lines may be in flight at once (read and not yet written) for `jobs`
/// workers.
#[must_use]
pub fn window(jobs: NonZeroUsize) -> usize {
    jobs.get().saturating_mul(4)
}

/// The most lines in one chunk.
pub const CHUNK_LINES: usize = 32;

/// A chunk takes no further line once its lines hold this many bytes (a longer line still
/// makes a chunk of its own).
pub const CHUNK_BYTES: usize = 1 << 20;

/// A buffer of the window keeps at most this much room between uses: one longer line does not
/// make its chunk hold that much memory for the rest of the run.
const KEPT_BYTES: usize = 2 * CHUNK_BYTES;

/// Lines handed to a worker together and, once compacted, to the writer: their text, their
/// outputs and outcomes. Its buffers are used again for later chunks (see the module's notes).
#[derive(Default)]
struct Chunk {
    /// The number of the first line (from 0).
    first: u64,
    /// The lines one after another, without their `\n` or `\r\n`.
    input: Vec<u8>,
    /// Where each line ends in `input`.
    input_ends: Vec<usize>,
    /// Each line's output one after another (`null\n` for a failed line).
    output: Vec<u8>,
    /// Where each line's output ends in `output`.
    output_ends: Vec<usize>,
    /// Each line's outcome.
    outcomes: Vec<Outcome>,
}

impl Chunk {
    /// Emptied for its next lines, keeping its buffers' room up to [`KEPT_BYTES`].
    fn recycle(&mut self) {
        for buffer in [&mut self.input, &mut self.output] {
            if buffer.capacity() > KEPT_BYTES {
                *buffer = Vec::new();
            }
            buffer.clear();
        }
        self.input_ends.clear();
        self.output_ends.clear();
        self.outcomes.clear();
    }

    /// Compacts each line, its output into `output` and its outcome into `outcomes`.
    fn compact(&mut self, args: &FormatOptions, summaries: Option<&str>, keep: bool) {
        let mut start = 0;
        for &end in &self.input_ends {
            let line = &self.input[start..end];
            start = end;
            let outcome = guarded(|| compact_line(args, summaries, line, keep));
            let outcome = outcome.map(|done| {
                self.output.extend_from_slice(done.output.output.as_bytes());
                // The output's and the report's texts are freed here, on the thread that
                // made them.
                Answered {
                    unchanged: done.unchanged,
                    tokens_before: done.tokens_before,
                    tokens_after: done.tokens_after,
                    repairs: done.output.repairs,
                    reasoning: done.output.reasoning,
                    compaction: done.compaction,
                }
            });
            if outcome.is_err() {
                self.output.extend_from_slice(b"null\n");
            }
            self.output_ends.push(self.output.len());
            self.outcomes.push(outcome);
        }
    }
}

/// How a run ended when it did not fail as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every line was read and answered.
    Complete(Summary),
    /// The output's reader closed the pipe; the run stopped there. The summary counts the lines
    /// handed to the output, which writes a run of lines at once.
    ReaderGone(Summary),
}

/// What a compacted line tells the writer beside its output: [`Detailed`] without the texts,
/// which the worker has copied into its chunk or freed.
struct Answered {
    /// Whether the output is the input itself.
    unchanged: bool,
    /// The whole prompt before, in estimated tokens.
    tokens_before: u64,
    /// The whole prompt after.
    tokens_after: u64,
    /// What `--repair` dropped, one line each.
    repairs: Vec<String>,
    /// The reasoning the compaction invalidated, in one line.
    reasoning: Option<String>,
    /// What a receipt is made of, with `--ledger`.
    compaction: Option<(cutctx::Transcript, cutctx::CompactedTranscript)>,
}

/// One line's outcome, from a worker to the writer.
type Outcome = Result<Answered, OpsError>;

/// Runs `cutctx batch` over `io`: the summary, or the error that stopped the whole run.
///
/// # Errors
///
/// `USAGE_ERROR` without `--format` or `--max-tokens`, or with `--report`; `INPUT_ERROR` when
/// the input or the summaries cannot be read (lines already written stay written; the exit
/// status disowns them); `OUTPUT_ERROR` when the output or the `--errors` file cannot be
/// written. A line's own failure is not an error of the run.
pub fn run(args: &BatchOptions, io: Io<'_>) -> Result<Ended, OpsError> {
    let usage = |message: &str, option: &str| OpsError {
        code: USAGE_ERROR,
        message: message.to_owned(),
        details: details! { "option" => option },
    };
    if args.format.format.is_none() {
        return Err(usage("batch needs --format F", "format"));
    }
    if args.format.max_tokens.is_none() {
        return Err(usage("batch needs --max-tokens N", "max_tokens"));
    }
    if args.format.report {
        return Err(usage(
            "batch writes no --report file: the output lines are the requests",
            "report",
        ));
    }
    let summaries = args
        .summaries
        .as_deref()
        .map(|p| read_whole(p, "the summaries"))
        .transpose()?;
    let jobs = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .unwrap_or(NonZeroUsize::MIN);
    let mut errors = args
        .errors
        .as_deref()
        .map(output::AtomicFile::create)
        .transpose()
        .map_err(|(path, e)| output::output_error("errors", Some(&path), &e))?;
    let ledger = args.ledger.as_deref().map(|path| {
        let compactor = args.compactor.clone().unwrap_or_else(default_compactor);
        (Ledger::new(path), compactor)
    });
    let Io {
        input,
        output,
        clock,
        progress,
        notices,
    } = io;
    let mut writer = Writer {
        output,
        errors: errors.as_mut(),
        ledger: ledger.as_ref(),
        clock,
        progress,
        notices,
        summary: Summary::default(),
        last_progress: Instant::now(),
        reader_gone: false,
    };
    let keep = ledger.is_some();
    let window = window(jobs);
    let (work_tx, work_rx) = sync_channel::<Chunk>(window);
    let work_rx = Mutex::new(work_rx);
    let (read, written) = std::thread::scope(|scope| {
        // The window's slots are its chunks: a free slot is an empty chunk.
        let (slot_tx, slot_rx) = sync_channel::<Chunk>(window);
        let (done_tx, done_rx) = sync_channel::<Chunk>(window);
        for _ in 0..window {
            // The channel holds exactly this many.
            let _ = slot_tx.send(Chunk::default());
        }
        let reader = scope.spawn(move || read_lines(input, &slot_rx, &work_tx));
        for _ in 0..jobs.get() {
            let (work_rx, done_tx) = (&work_rx, done_tx.clone());
            let summaries = summaries.as_deref();
            scope.spawn(move || {
                while let Some(mut chunk) = next(work_rx) {
                    chunk.compact(&args.format, summaries, keep);
                    if done_tx.send(chunk).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        // The writer owns the receiving ends: when it stops early, the reader and the
        // workers find their channels closed and stop too.
        let written = writer.write_in_order(done_rx, slot_tx);
        let read = reader.join().unwrap_or_else(|_| {
            Err(std::io::Error::other(
                "the reading thread stopped unexpectedly",
            ))
        });
        (read, written)
    });
    written?;
    let summary = writer.summary;
    if writer.reader_gone {
        return Ok(Ended::ReaderGone(summary));
    }
    read.map_err(|e| {
        OpsError::input(
            format!(
                "cannot read the input at {} after line {}: {e}",
                args.input.display(),
                summary.lines
            ),
            details! { "path" => args.input.display().to_string(), "line" => summary.lines },
        )
    })?;
    writer
        .output
        .flush()
        .map_err(|e| output::output_error("stdout", None, &e))?;
    if let Some(file) = errors {
        file.commit()
            .map_err(|(path, e)| output::output_error("errors", Some(&path), &e))?;
    }
    Ok(Ended::Complete(summary))
}

/// The next chunk for a worker, or `None` once the reader is done (or a worker panicked while
/// holding the queue, which ends the run short: the writer then sees lines missing).
fn next(work: &Mutex<Receiver<Chunk>>) -> Option<Chunk> {
    work.lock().ok()?.recv().ok()
}

/// Compacts every request of `texts` as `cutctx batch` compacts each line of its file: on
/// `jobs` workers (default: every core), [`CHUNK_LINES`] requests handed over at a time, each
/// through [`formats::compact_detailed`] behind the same guard, so that a defect fails its
/// request alone. The results are in the requests' order; what `keep` asks for is made for
/// each. This is the batch of a caller that holds its requests in memory (the Python package's
/// `compact_batch_json`), where [`run`] streams a file of any size.
///
/// ```
/// use cutctx::formats::Format;
/// use cutctx_ops::batch::compact_all;
/// use cutctx_ops::formats::{FormatOptions, Keep};
///
/// let options = FormatOptions {
///     format: Some(Format::OpenAiChat),
///     max_tokens: Some(1000),
///     ..FormatOptions::default()
/// };
/// let texts = [r#"[{"role":"user","content":"hi"}]"#, "not json"];
/// let out = compact_all(&options, &texts, None, Keep::default(), None);
/// assert_eq!(out[0].as_ref().map(|d| d.unchanged).ok(), Some(true));
/// assert_eq!(out[1].as_ref().map_err(|e| e.code).err(), Some("INPUT_ERROR"));
/// ```
#[must_use]
pub fn compact_all<T: AsRef<str> + Sync>(
    options: &FormatOptions,
    texts: &[T],
    summaries: Option<&str>,
    keep: formats::Keep,
    jobs: Option<NonZeroUsize>,
) -> Vec<Result<Detailed, OpsError>> {
    let compact = |outs: &mut [Option<Result<Detailed, OpsError>>], ins: &[T]| {
        for (out, text) in outs.iter_mut().zip(ins) {
            *out = Some(guarded(|| {
                formats::compact_detailed(options, text.as_ref(), summaries, keep)
            }));
        }
    };
    let mut results: Vec<Option<Result<Detailed, OpsError>>> =
        std::iter::repeat_with(|| None).take(texts.len()).collect();
    let chunks = texts.len().div_ceil(CHUNK_LINES);
    let jobs = jobs
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get)
        .min(chunks);
    if jobs <= 1 {
        compact(&mut results, texts);
    } else {
        let work = Mutex::new(
            results
                .chunks_mut(CHUNK_LINES)
                .zip(texts.chunks(CHUNK_LINES)),
        );
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                scope.spawn(|| {
                    loop {
                        // Nothing panics while the lock is held (taking the next pair of
                        // slices), so a poisoned lock still guards a whole iterator.
                        let next = work
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .next();
                        let Some((outs, ins)) = next else { return };
                        compact(outs, ins);
                    }
                });
            }
        });
    }
    results
        .into_iter()
        .map(|r| r.expect("every chunk was taken by a worker, and every request answered"))
        .collect()
}

/// `work()`, or, when it panics, the line's failure. A panic is a defect, but it must not
/// stop the run: a worker that died would never answer its line, and the writer, the reader
/// and the other workers would wait on each other for ever.
fn guarded<T>(work: impl FnOnce() -> Result<T, OpsError>) -> Result<T, OpsError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
        Err(OpsError {
            code: crate::error::INTERNAL_ERROR,
            message: "compacting the line failed an internal check: a defect of cutctx, not of \
                      the line"
                .to_owned(),
            details: details! {},
        })
    })
}

/// Reads lines (without their `\n` or `\r\n`) in chunks, each into the chunk of a free slot
/// of the window.
fn read_lines(
    mut input: Box<dyn BufRead + Send + '_>,
    slots: &Receiver<Chunk>,
    work: &SyncSender<Chunk>,
) -> std::io::Result<()> {
    let mut first = 0_u64;
    loop {
        let Ok(mut chunk) = slots.recv() else {
            // The writer stopped: nothing more is wanted.
            return Ok(());
        };
        chunk.first = first;
        let text = &mut chunk.input;
        let mut ended = false;
        while chunk.input_ends.len() < CHUNK_LINES && text.len() < CHUNK_BYTES {
            let start = text.len();
            if input.read_until(b'\n', text)? == 0 {
                ended = true;
                break;
            }
            if text.last() == Some(&b'\n') {
                text.pop();
                // Only this line's own `\r`, never the end of the line before.
                if text.len() > start && text.last() == Some(&b'\r') {
                    text.pop();
                }
            }
            chunk.input_ends.push(text.len());
        }
        let count = chunk.input_ends.len() as u64;
        if count > 0 && work.send(chunk).is_err() {
            return Ok(());
        }
        if ended {
            return Ok(());
        }
        first += count;
    }
}

/// One line through `cutctx compact --format`'s own function.
fn compact_line(
    args: &FormatOptions,
    summaries: Option<&str>,
    line: &[u8],
    keep: bool,
) -> Result<Detailed, OpsError> {
    let text = std::str::from_utf8(line).map_err(|e| {
        OpsError::input(
            format!(
                "the line is not UTF-8: invalid byte at offset {}",
                e.valid_up_to()
            ),
            details! { "document" => "the transcript", "offset" => e.valid_up_to() },
        )
    })?;
    // The report's text is not written by a batch (`--report` is refused): not made.
    let keep = formats::Keep {
        compaction: keep,
        report: false,
    };
    formats::compact_detailed(args, text, summaries, keep)
}

/// The writing end: outputs in input order, the errors file, the ledger and the counts.
struct Writer<'a, 'f> {
    output: &'a mut dyn Write,
    errors: Option<&'f mut output::AtomicFile>,
    ledger: Option<&'f (Ledger, String)>,
    clock: &'a dyn Clock,
    progress: Option<&'a mut dyn FnMut(&Summary)>,
    notices: Option<&'a mut dyn FnMut(&str)>,
    summary: Summary,
    last_progress: Instant,
    reader_gone: bool,
}

impl Writer<'_, '_> {
    /// Writes every chunk's lines as soon as those before it are written, giving the chunk
    /// back as a free slot each time.
    fn write_in_order(
        &mut self,
        done: Receiver<Chunk>,
        slots: SyncSender<Chunk>,
    ) -> Result<(), OpsError> {
        // Keyed by the chunk's first line: chunks tile the lines, so the next chunk to write
        // starts where the last one written ended.
        let mut pending: BTreeMap<u64, Chunk> = BTreeMap::new();
        let mut next = 0u64;
        for chunk in done {
            pending.insert(chunk.first, chunk);
            while let Some(mut chunk) = pending.remove(&next) {
                // The outputs are written a run of lines at a time, not line by line: a run
                // large enough goes to the output without being copied into its buffer.
                let (mut run, mut start) = (0, 0);
                for (outcome, &end) in chunk.outcomes.drain(..).zip(&chunk.output_ends) {
                    if self.ledger.is_some() {
                        // A line's receipt is appended only once the lines before it are
                        // written, as `compact --ledger` appends it after its output.
                        self.emit(&chunk.output[run..start])?;
                        run = start;
                    }
                    let failed = self.count_one(next, outcome)?;
                    if failed && &chunk.output[start..end] != b"null\n" {
                        // A line the worker answered fails when its receipt cannot be appended.
                        self.emit(&chunk.output[run..start])?;
                        self.emit(b"null\n")?;
                        run = end;
                    }
                    if self.reader_gone {
                        return Ok(());
                    }
                    start = end;
                    next += 1;
                }
                self.emit(&chunk.output[run..start])?;
                if self.reader_gone {
                    return Ok(());
                }
                chunk.recycle();
                // Never blocks: the slot taken for this chunk is the one given back.
                let _ = slots.send(chunk);
            }
        }
        Ok(())
    }

    /// Writes `text` to the output, unless its reader has gone.
    fn emit(&mut self, text: &[u8]) -> Result<(), OpsError> {
        if self.reader_gone || text.is_empty() {
            return Ok(());
        }
        match self.output.write_all(text) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::BrokenPipe => {
                self.reader_gone = true;
                Ok(())
            }
            Err(e) => Err(output::output_error("stdout", None, &e)),
        }
    }

    /// Counts line `n` (from 0), appends its receipt and names its repairs or its error:
    /// whether it failed, so that its output is `null`.
    fn count_one(&mut self, n: u64, outcome: Outcome) -> Result<bool, OpsError> {
        let outcome = outcome.and_then(|done| self.receipt(done));
        let s = &mut self.summary;
        s.lines += 1;
        let failed = match outcome {
            Ok(done) => {
                // Saturating: many lines with output reserves near 2^64 must not wrap.
                s.tokens_before = s.tokens_before.saturating_add(done.tokens_before);
                s.tokens_after = s.tokens_after.saturating_add(done.tokens_after);
                let repairs = &done.repairs;
                s.repairs = s
                    .repairs
                    .saturating_add(u64::try_from(repairs.len()).unwrap_or(u64::MAX));
                if let Some(notice) = self.notices.as_deref_mut() {
                    for note in repairs.iter().chain(&done.reasoning) {
                        // `cutctx: repair: ...` as `compact --format` prints it, with the line.
                        let note = note.strip_prefix("cutctx: ").unwrap_or(note);
                        notice(&format!("cutctx: line {}: {note}", n + 1));
                    }
                }
                if done.unchanged {
                    s.unchanged += 1;
                } else {
                    s.compacted += 1;
                }
                false
            }
            Err(e) => {
                s.failed += 1;
                if let Some(file) = self.errors.as_deref_mut() {
                    file.write_all(error_line(n + 1, &e).as_bytes())
                        .map_err(|(path, e)| output::output_error("errors", Some(&path), &e))?;
                }
                true
            }
        };
        if let Some(progress) = self.progress.as_deref_mut()
            && self.last_progress.elapsed() >= Duration::from_millis(100)
        {
            progress(&self.summary);
            self.last_progress = Instant::now();
        }
        Ok(failed)
    }

    /// Appends the receipt of a compacted line, as `compact --ledger` does; a receipt that
    /// cannot be appended fails its line.
    fn receipt(&self, mut done: Answered) -> Outcome {
        let (Some((ledger, compactor)), Some((input, compacted))) =
            (self.ledger, done.compaction.take())
        else {
            return Ok(done);
        };
        if done.unchanged {
            return Ok(done);
        }
        let failed = |e: &cutctx::receipts::ReceiptError| OpsError {
            code: e.code(),
            message: e.to_string(),
            details: e.details(),
        };
        let row = receipt_for_compaction(&input, &compacted, compactor, self.clock)
            .map_err(|e| failed(&e))?;
        ledger.append(&row, self.clock).map_err(|e| failed(&e))?;
        Ok(done)
    }
}

/// `{"code", "details", "line", "message"}` as canonical JSON and a newline.
fn error_line(line: u64, e: &OpsError) -> String {
    let v = serde_json::json!({
        "code": e.code,
        "details": Value::Object(e.details.clone().into_iter().collect()),
        "line": line,
        "message": e.message,
    });
    cutctx::model::canonical::canonical_json_value(&v) + "\n"
}

/// A whole small document (the summaries), from a path.
fn read_whole(path: &Path, what: &str) -> Result<String, OpsError> {
    std::fs::read_to_string(path).map_err(|e| {
        OpsError::input(
            format!("cannot read {what} at {}: {e}", path.display()),
            details! { "path" => path.display().to_string(), "document" => what },
        )
    })
}

/// Opens `path` (`-` for standard input), decompressing gzip or zstd, which it recognises by
/// their magic numbers rather than by the file's name.
///
/// # Errors
///
/// `INPUT_ERROR` when the file cannot be opened or its first bytes cannot be read.
pub fn open_input(path: &Path) -> Result<Box<dyn BufRead + Send>, OpsError> {
    let fail = |e: std::io::Error| {
        OpsError::input(
            format!("cannot read the input at {}: {e}", path.display()),
            details! { "path" => path.display().to_string(), "document" => "the input" },
        )
    };
    let raw: Box<dyn Read + Send> = if path == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(path).map_err(fail)?)
    };
    decompressing(raw).map_err(fail)
}

/// `raw`, decompressed when it starts with gzip's or zstd's magic number.
///
/// # Errors
///
/// When its first bytes cannot be read, or a zstd frame header is malformed.
pub fn decompressing<'a>(
    raw: Box<dyn Read + Send + 'a>,
) -> std::io::Result<Box<dyn BufRead + Send + 'a>> {
    const BUFFER: usize = 1 << 16;
    let mut buffered = BufReader::with_capacity(BUFFER, raw);
    let head = buffered.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        // Concatenated members (as `cat a.gz b.gz` makes) are one stream.
        Box::new(BufReader::with_capacity(
            BUFFER,
            flate2::bufread::MultiGzDecoder::new(buffered),
        ))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let decoder = ruzstd::decoding::StreamingDecoder::new(buffered)
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e.to_string()))?;
        Box::new(BufReader::with_capacity(BUFFER, decoder))
    } else {
        Box::new(buffered)
    })
}

/// The command as the binary runs it: standard output, a progress bar on standard error when
/// it is a terminal, and the summary there at the end (as JSON when `json`). The exit status
/// is 0 when every line was compacted or unchanged, [`SOME_LINES_FAILED_STATUS`] when any
/// failed, and [`CLOSED_PIPE_STATUS`] when the output's reader went away.
///
/// # Errors
///
/// As [`run`].
pub fn run_command(args: &BatchOptions, json: bool, clock: &dyn Clock) -> Result<u8, OpsError> {
    let input = open_input(&args.input)?;
    let stdout = std::io::stdout();
    let mut output = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let terminal = std::io::stderr().is_terminal();
    let mut bar = |s: &Summary| {
        let _ = write!(std::io::stderr(), "\r\x1b[Kcutctx batch: {}", s.text());
    };
    let mut notice = |line: &str| {
        // Over the progress line, which the next update draws again below it.
        let clear = if terminal { "\r\x1b[K" } else { "" };
        let _ = writeln!(std::io::stderr(), "{clear}{line}");
    };
    let ended = run(
        args,
        Io {
            input,
            output: &mut output,
            clock,
            progress: terminal.then_some(&mut bar as &mut dyn FnMut(&Summary)),
            notices: Some(&mut notice),
        },
    );
    if terminal {
        let _ = write!(std::io::stderr(), "\r\x1b[K");
    }
    let summary = match ended? {
        Ended::ReaderGone(_) => return Ok(CLOSED_PIPE_STATUS),
        Ended::Complete(summary) => summary,
    };
    let line = if json {
        summary.json()
    } else {
        format!("cutctx batch: {}", summary.text())
    };
    let _ = writeln!(std::io::stderr(), "{line}");
    Ok(if summary.failed > 0 {
        SOME_LINES_FAILED_STATUS
    } else {
        0
    })
}

#[cfg(test)]
mod tests {
    use super::guarded;

    #[test]
    fn a_panic_while_compacting_a_line_fails_that_line_only() {
        let failed =
            guarded::<()>(|| panic!("a defect")).expect_err("the panic is the line's failure");
        assert_eq!(failed.code, crate::error::INTERNAL_ERROR);
    }
}

//! A JSONL file of provider requests compacted a line at a time on every core, one output line
//! per input line in the input's order, streamed: never more than a window of chunks held,
//! whatever the file's size.
//!
//! The work is a bounded pipeline on scoped threads: a reader splits lines into chunks (up to
//! [`CHUNK_LINES`] lines or [`CHUNK_BYTES`] bytes), `jobs` workers compact them, and the
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

use std::collections::BTreeMap;
use std::io::{BufRead, ErrorKind, Write};
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use cutctx::ledger::Ledger;
use cutctx::model::details;
use cutctx::receipts::Clock;
use cutctx::receipts::transcript::{default_compactor, receipt_for_compaction};
use serde_json::Value;

use super::line::{compact_line, guarded};
use super::{BatchOptions, CHUNK_BYTES, CHUNK_LINES, Ended, Summary, window};
use crate::formats::FormatOptions;
use crate::output;
use crate::{OpsError, USAGE_ERROR};

/// Where a run's lines come from and its results go, beside the options.
pub struct Io<'a> {
    /// The input, decompressed or not ([`open_input`](super::open_input) recognises compression).
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
    check_usage(&args.format)?;
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
    let ledger = ledger_of(args);
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
    let work = Work {
        format: &args.format,
        summaries: summaries.as_deref(),
        keep: ledger.is_some(),
    };
    let (read, written) = writer.run_pipeline(input, work, jobs);
    written?;
    let summary = writer.summary;
    if writer.reader_gone {
        return Ok(Ended::ReaderGone(summary));
    }
    read.map_err(|e| unreadable(args, &e, summary.lines))?;
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

/// The ledger each compacted line's receipt is appended to, with the compactor it names.
fn ledger_of(args: &BatchOptions) -> Option<(Ledger, String)> {
    args.ledger.as_deref().map(|path| {
        let compactor = args.compactor.clone().unwrap_or_else(default_compactor);
        (Ledger::new(path), compactor)
    })
}

/// The `INPUT_ERROR` of an input that failed to read after `lines` lines.
fn unreadable(args: &BatchOptions, e: &std::io::Error, lines: u64) -> OpsError {
    OpsError::input(
        format!(
            "cannot read the input at {} after line {lines}: {e}",
            args.input.display(),
        ),
        details! { "path" => args.input.display().to_string(), "line" => lines },
    )
}

/// `USAGE_ERROR` without a format or a budget, or with a report asked for.
fn check_usage(format: &FormatOptions) -> Result<(), OpsError> {
    let usage = |message: &str, option: &str| OpsError {
        code: USAGE_ERROR,
        message: message.to_owned(),
        details: details! { "option" => option },
    };
    if format.format.is_none() {
        return Err(usage("batch needs --format F", "format"));
    }
    if format.max_tokens.is_none() {
        return Err(usage("batch needs --max-tokens N", "max_tokens"));
    }
    if format.report {
        return Err(usage(
            "batch writes no --report file: the output lines are the requests",
            "report",
        ));
    }
    Ok(())
}

/// What each worker compacts a chunk's lines with.
#[derive(Clone, Copy)]
struct Work<'a> {
    format: &'a FormatOptions,
    summaries: Option<&'a str>,
    /// Whether each line's compaction is kept, for its receipt.
    keep: bool,
}

/// The next chunk for a worker, or `None` once the reader is done (or a worker panicked while
/// holding the queue, which ends the run short: the writer then sees lines missing).
fn next(work: &Mutex<Receiver<Chunk>>) -> Option<Chunk> {
    work.lock().ok()?.recv().ok()
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
    /// Runs the pipeline over `input`: a reader, `jobs` workers doing `work`, and this writer,
    /// a window of chunks going round. Whether the input was read to its end, and whether the
    /// writing went well.
    fn run_pipeline(
        &mut self,
        input: Box<dyn BufRead + Send + '_>,
        work: Work<'_>,
        jobs: NonZeroUsize,
    ) -> (std::io::Result<()>, Result<(), OpsError>) {
        let window = window(jobs);
        let (work_tx, work_rx) = sync_channel::<Chunk>(window);
        let work_rx = Mutex::new(work_rx);
        std::thread::scope(|scope| {
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
                scope.spawn(move || {
                    while let Some(mut chunk) = next(work_rx) {
                        chunk.compact(work.format, work.summaries, work.keep);
                        if done_tx.send(chunk).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(done_tx);
            // The writer owns the receiving ends: when it stops early, the reader and the
            // workers find their channels closed and stop too.
            let written = self.write_in_order(done_rx, slot_tx);
            let read = reader.join().unwrap_or_else(|_| {
                Err(std::io::Error::other(
                    "the reading thread stopped unexpectedly",
                ))
            });
            (read, written)
        })
    }

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

//! Messages read ahead on a second core: the scan of a large list hands most of its messages
//! to readings another thread has already made.
//!
//! Reading a message by hand (`hand_read::ReadMessage::read_at`) is a pure function of the
//! request's text and the message's start, and it is most of the time the scan of a large
//! request takes. So while the scan reads the start of the list on the caller's thread (and
//! checks and maps each message as it goes, [`crate::check_as_read`]), a helper reads on from a
//! *guessed* message start further in ([`guess`]: the first `{` after a given byte that
//! follows `}` and `,`), one message after another as the scan would walk them, handing its
//! readings over in batches as it makes them. When the scan reaches that start, it takes the
//! helper's readings for every start it then asks for, as long as the starts match, waiting
//! for the next batch when it has caught up.
//!
//! The guess is only a guess: it may fall inside a string or inside a message. Nothing
//! depends on it being right. The scan takes a reading only for the very start it asks for,
//! and a reading depends on nothing else, so whatever the helper read, the scan sees what it
//! would have read itself. When the starts stop matching, the scan reads on alone and the
//! rest of the helper's readings are dropped. A wrong guess costs the helper's work, done on
//! another core, and nothing else.
//!
//! The scan gives each reading back once it is done with it, and the helper frees the batches
//! it is given back: a reading's memory is the helper's allocator's, and freeing it on the
//! scan's thread, while the helper allocates, made both threads wait on that allocator's lock
//! (the scan took half as long again).

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::{Scope, ScopedJoinHandle};

use cutctx_model::Parallelism;

use crate::hand_read::value_end;

/// The size from which a list is read on two threads: below it, the thread costs more than
/// it saves.
pub(crate) const AHEAD_FROM_BYTES: usize = 1 << 20;

/// How far past where it starts [`guess`] looks for a message start before it gives up.
const GUESS_WINDOW: usize = 1 << 20;

/// How deep a message the helper walks past when it does not read it (as the scan's limit).
const DEPTH: usize = 64;

/// How many readings the helper hands over at a time: enough that handing them over costs
/// nothing beside reading them, few enough that the scan can take the first of them soon
/// after they were made.
const BATCH: usize = 1024;

/// A reading of the message at a start: what it holds and where it ends (`None`: declined).
type Reading<P> = Option<(P, usize)>;

/// Readings handed over together, each with the start it was read at.
type Batch<P> = Vec<(usize, Reading<P>)>;

/// The helper's readings, from its start on, as the scan will ask for them.
pub(crate) struct Ahead<'scope, P> {
    state: State<P>,
    /// Joined when the scan is done with the helper, once the readings still to come are let
    /// go (which stops the helper at its next hand-over): a helper that panicked is then one
    /// whose readings stopped early, not a panic of the scope.
    helper: Option<ScopedJoinHandle<'scope, ()>>,
}

/// The two ways between the scan and the helper: the helper's batches of readings, and the
/// batches the scan is done with, the readings it was given back put in again, to be freed
/// by the helper. A reading's memory comes from the helper's allocator: freed on the scan's
/// thread it would be freed into the helper's, under its lock, as the helper allocates.
struct Ways<P> {
    batches: Receiver<Batch<P>>,
    spent: Sender<Batch<P>>,
}

enum State<P> {
    /// The helper is reading from `cut`; the scan has not reached it yet.
    Running { cut: usize, ways: Ways<P> },
    /// The scan is taking the readings of `batch` in order, from `next`, as the helper hands
    /// them over.
    Serving {
        ways: Ways<P>,
        batch: Batch<P>,
        next: usize,
    },
    /// Nothing to take: no helper, or the starts stopped matching.
    Done,
}

impl<'scope, P: Send + 'scope> Ahead<'scope, P> {
    /// No helper: every message is read by the scan.
    pub(crate) const fn none() -> Self {
        Self {
            state: State::Done,
            helper: None,
        }
    }

    /// A helper started in `scope` reading the messages of `text` with `read` from a guessed
    /// start at or after byte `from` (the scan reads the messages before it itself), when
    /// `text` holds `from_bytes` bytes or more (the readers use [`AHEAD_FROM_BYTES`]; the
    /// tests, any size) and `parallelism` allows a second thread; otherwise [`Ahead::none`].
    pub(crate) fn start<'env, R>(
        scope: &'scope Scope<'scope, 'env>,
        text: &'env str,
        parallelism: Parallelism,
        from_bytes: usize,
        from: usize,
        read: &'env R,
    ) -> Self
    where
        R: Fn(usize) -> Reading<P> + Sync,
    {
        if text.len() < from_bytes || parallelism.threads() < 2 {
            return Self::none();
        }
        let Some(cut) = guess(text.as_bytes(), from) else {
            return Self::none();
        };
        let (to_scan, batches) = channel();
        let (spent, to_free) = channel();
        let helper = scope.spawn(move || {
            read_from(text.as_bytes(), cut, read, &to_scan, &to_free);
            // No more readings: a scan waiting for one reads on alone.
            drop(to_scan);
            // The batches the scan gives back, freed here until it is done.
            for batch in to_free {
                drop(batch);
            }
        });
        Self {
            state: State::Running {
                cut,
                ways: Ways { batches, spent },
            },
            helper: Some(helper),
        }
    }

    /// The helper's reading of the message at `start`, when it made one and the scan has
    /// asked for every start in order since the helper's first: `None` means the scan reads
    /// it itself. From the helper's first start on, this waits for the helper's readings as
    /// they are handed over. Give a reading back ([`Ahead::give_back`]) once done with it.
    pub(crate) fn take(&mut self, start: usize) -> Option<Reading<P>> {
        self.state = match std::mem::replace(&mut self.state, State::Done) {
            State::Running { cut, ways } if start < cut => {
                self.state = State::Running { cut, ways };
                return None;
            }
            State::Running { cut, ways } if start == cut => State::Serving {
                ways,
                batch: Vec::new(),
                next: 0,
            },
            // The scan stepped over the guess, which was not a message start: the helper's
            // readings are of no use.
            State::Running { .. } => State::Done,
            other => other,
        };
        let State::Serving { ways, batch, next } = &mut self.state else {
            return None;
        };
        loop {
            match batch.get_mut(*next) {
                Some((at, reading)) if *at == start => {
                    *next += 1;
                    return Some(reading.take());
                }
                Some(_) => break,
                None => {
                    // Done with this batch: back to the helper, and on to the next.
                    let done = std::mem::take(batch);
                    if !done.is_empty() {
                        // A helper gone frees nothing: the batch is freed here then.
                        let _ = ways.spent.send(done);
                    }
                    *next = 0;
                    match ways.batches.recv() {
                        Ok(more) => *batch = more,
                        // The helper is done (or died): the scan reads on alone.
                        Err(_) => break,
                    }
                }
            }
        }
        self.stop();
        None
    }

    /// The reading of the message at `start`: the helper's ([`Ahead::take`]), else `read`'s
    /// on this thread; with whether it was the helper's (give it back then, once done).
    pub(crate) fn take_or_read(
        &mut self,
        start: usize,
        read: impl Fn(usize) -> Reading<P>,
    ) -> (Reading<P>, bool) {
        match self.take(start) {
            Some(reading) => (reading, true),
            None => (read(start), false),
        }
    }

    /// Gives back the reading [`Ahead::take`] last gave, ending at `end`, once done with it:
    /// the helper frees it.
    pub(crate) fn give_back(&mut self, reading: P, end: usize) {
        if let State::Serving { batch, next, .. } = &mut self.state
            && let Some(slot) = next.checked_sub(1).and_then(|k| batch.get_mut(k))
        {
            slot.1 = Some((reading, end));
        }
    }
}

impl<P> Ahead<'_, P> {
    /// Stops taking readings: the batch at hand goes back to the helper, and the helper
    /// stops at its next hand-over.
    fn stop(&mut self) {
        if let State::Serving { ways, batch, .. } = std::mem::replace(&mut self.state, State::Done)
        {
            let _ = ways.spent.send(batch);
        }
    }
}

impl<P> Drop for Ahead<'_, P> {
    fn drop(&mut self) {
        // The batch at hand goes back, and the ways close: the helper stops reading at its
        // next hand-over and is done once it has freed what it was given back.
        self.stop();
        if let Some(helper) = self.helper.take() {
            // A helper that panicked read nothing the scan still needs.
            let _ = helper.join();
        }
    }
}

/// The readings of the messages of `b` from `start`, one after another as the scan of a list
/// walks them (each object, then `,` and the next, to the `]`), until the text stops looking
/// like a list of objects, handed to `out` [`BATCH`] at a time; it stops early when nobody
/// takes them any more. The batches given back on `spent` meanwhile are freed as it goes.
fn read_from<P>(
    b: &[u8],
    start: usize,
    read: &impl Fn(usize) -> Reading<P>,
    out: &Sender<Batch<P>>,
    spent: &Receiver<Batch<P>>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut at = start;
    while b.get(at) == Some(&b'{') {
        let reading = read(at);
        let end = match &reading {
            Some((_, end)) if *end > at && *end <= b.len() => *end,
            _ => match value_end(b, at, DEPTH) {
                Some(end) => end,
                None => break,
            },
        };
        batch.push((at, reading));
        if batch.len() == BATCH {
            if out
                .send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))
                .is_err()
            {
                return;
            }
            while let Ok(done) = spent.try_recv() {
                drop(done);
            }
        }
        at = ws(b, end);
        if b.get(at) != Some(&b',') {
            break;
        }
        at = ws(b, at + 1);
    }
    // Nobody may be listening any more: then nothing is lost.
    let _ = out.send(batch);
}

/// A likely message start at or after `from`: a `{` that follows a `}` and a `,` (with
/// whitespace between), as one object of a list follows another. `None` when none lies within
/// [`GUESS_WINDOW`] bytes.
pub(crate) fn guess(b: &[u8], from: usize) -> Option<usize> {
    let end = b.len().min(from.saturating_add(GUESS_WINDOW));
    let mut at = from;
    while at < end {
        let k = at + b.get(at..end)?.iter().position(|&c| c == b'{')?;
        let comma = back(b, k);
        let brace = comma.filter(|&p| b[p] == b',').and_then(|p| back(b, p));
        if brace.is_some_and(|q| b[q] == b'}') {
            return Some(k);
        }
        at = k + 1;
    }
    None
}

/// The last byte before `at` that is not whitespace, within a short run of it.
fn back(b: &[u8], at: usize) -> Option<usize> {
    (at.saturating_sub(16)..at)
        .rev()
        .find(|&p| !cutctx_json::lex::is_whitespace(b[p]))
}

/// The first position at or after `at` that is not JSON whitespace.
fn ws(b: &[u8], at: usize) -> usize {
    cutctx_json::lex::skip_whitespace(b, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guess_is_an_object_after_an_object_and_a_comma() {
        let b = br#"{"a": [{"x": 1}, {"y": "}, {"}, {"z": 2}]}"#;
        let first = guess(b, 0).expect("a start");
        assert_eq!(&b[first..first + 5], br#"{"y":"#);
        // Inside the string: the text looks the same there, and the guess may land on it.
        let second = guess(b, first + 1).expect("a start");
        assert_eq!(&b[second..second + 2], br#"{""#);
        assert_eq!(guess(b"[1, 2, 3]", 0), None);
        assert_eq!(guess(b"}  ,\n {", 0), Some(6));
    }

    #[test]
    fn the_helper_reads_on_as_the_scan_walks_and_stops_where_it_would() {
        let text = r#"[{"a": 1}, {"b": [2]} ,{"c": 3}] tail"#;
        let b = text.as_bytes();
        // Each object "read" by its length alone, the second declined.
        let read = |at: usize| (at != 11).then(|| (at, value_end(b, at, DEPTH).unwrap_or(at)));
        let read_all = |start: usize| {
            let (out, batches) = channel();
            let (_spent, to_free) = channel();
            read_from(b, start, &read, &out, &to_free);
            drop(out);
            batches.into_iter().flatten().collect::<Vec<_>>()
        };
        let got: Vec<_> = read_all(1)
            .into_iter()
            .map(|(at, r)| (at, r.is_some()))
            .collect();
        assert_eq!(got, [(1, true), (11, false), (23, true)]);
        assert!(read_all(0).is_empty(), "not an object");
    }

    /// A list of `n` small messages, with `middle` (a message's text) in the middle.
    fn list(n: usize, middle: &str) -> String {
        let mut items: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"role": "user", "content": "m{i}"}}"#))
            .collect();
        items[n / 2] = middle.to_owned();
        format!(r#"{{"model": "m", "messages": [{}]}}"#, items.join(", "))
    }

    /// The readings the scan takes of `text`'s list, each message "read" as its start and
    /// end, and how many of them were read on the scan's own thread.
    fn scan(text: &str) -> (Vec<usize>, usize) {
        let b = text.as_bytes();
        let scan_thread = std::thread::current().id();
        let on_scan_thread = std::sync::atomic::AtomicUsize::new(0);
        let read = |at: usize| {
            if std::thread::current().id() == scan_thread {
                on_scan_thread.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Some((at, value_end(b, at, DEPTH)?))
        };
        let two = Parallelism::AtMost(std::num::NonZeroUsize::MIN.saturating_add(1));
        let mut taken = Vec::new();
        std::thread::scope(|scope| {
            let mut ahead = Ahead::start(scope, text, two, 0, text.len() / 2, &read);
            crate::scan::top_with(text, "messages", &mut |start| {
                let reading = ahead.take(start).unwrap_or_else(|| read(start));
                taken.push(reading.map(|(at, _)| at));
                reading.map(|(_, end)| end)
            })
        })
        .expect("a list");
        let starts = taken.into_iter().map(|at| at.expect("read")).collect();
        (starts, on_scan_thread.into_inner())
    }

    #[test]
    fn a_list_is_read_half_on_each_thread_to_the_readings_of_one() {
        let text = list(2000, r#"{"role": "user", "content": "middle"}"#);
        let (starts, on_scan_thread) = scan(&text);
        let expected: Vec<usize> = crate::scan::top(&text, "messages")
            .map(|top| match top {
                crate::scan::Top::Object(_, items) => items.iter().map(|r| r.start).collect(),
                crate::scan::Top::List(_) => Vec::new(),
            })
            .expect("a list");
        assert_eq!(starts, expected);
        // The helper read the second half, from about the middle.
        assert!((900..1100).contains(&on_scan_thread), "{on_scan_thread}");
    }

    #[test]
    fn a_scan_that_asks_past_the_helpers_last_reading_reads_on_alone() {
        // The last message never closes: the helper's walk stops before it, the scan still
        // asks for it, and is told to read it itself rather than left waiting.
        let whole = r#"{"role": "user", "content": "m"}"#;
        let mut text = String::from(r#"{"messages": ["#);
        let mut starts = Vec::new();
        for _ in 0..3000 {
            starts.push(text.len());
            text.push_str(whole);
            text.push_str(", ");
        }
        starts.push(text.len());
        text.push_str(r#"{"role": "user", "content": "never closed"#);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let b = text.as_bytes();
            let read = |at: usize| Some(((), value_end(b, at, DEPTH)?));
            let two = Parallelism::AtMost(std::num::NonZeroUsize::MIN.saturating_add(1));
            let answers: Vec<Option<bool>> = std::thread::scope(|scope| {
                let mut ahead = Ahead::start(scope, &text, two, 0, text.len() / 10, &read);
                starts
                    .iter()
                    .map(|&start| {
                        let reading = ahead.take(start);
                        if let Some(Some(((), end))) = reading {
                            ahead.give_back((), end);
                        }
                        reading.map(|r| r.is_some())
                    })
                    .collect()
            });
            let _ = done.send(answers);
        });
        let answers = finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the scan is never left waiting");
        // Most messages were the helper's; the broken one is the scan's own.
        assert!(answers.iter().filter(|a| **a == Some(true)).count() > 2000);
        assert_eq!(answers.last(), Some(&None));
    }

    #[test]
    fn a_guess_inside_a_string_changes_nothing() {
        // A long string in the middle that looks like a list inside: the guess lands in it.
        let fake = r#"}, {\"x\": 1"#.repeat(20_000);
        let text = list(200, &format!(r#"{{"role": "tool", "content": "{fake}"}}"#));
        let middle = text.len() / 2;
        let guessed = guess(text.as_bytes(), middle).expect("a guess");
        assert!(
            text[..guessed].matches("}, {").count() > 100,
            "the guess is inside the string"
        );
        let (starts, on_scan_thread) = scan(&text);
        assert_eq!(starts.len(), 200);
        assert_eq!(on_scan_thread, 200, "every message read by the scan itself");
    }
}

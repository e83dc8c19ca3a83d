//! The requests of a caller that holds them in memory (the Python package's batch functions)
//! compacted as a batch file's lines are: on as many workers, a chunk of requests handed over at
//! a time, each behind the same guard, the results in the requests' order.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use super::CHUNK_LINES;
use super::line::guarded;
use crate::OpsError;
use crate::formats::{self, Detailed, FormatOptions};

/// Compacts every request of `texts` as `cutctx batch` compacts each line of its file: on
/// `jobs` workers (default: every core), [`CHUNK_LINES`] requests handed over at a time, each
/// through [`formats::compact_detailed`] behind the same guard, so that a defect fails its
/// request alone. The results are in the requests' order; what `keep` asks for is made for
/// each. This is the batch of a caller that holds its requests in memory (the Python package's
/// `compact_batch_json`), where [`run`](super::run) streams a file of any size.
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

//! Work that splits, run beside the caller: on the thread pool the caller works for, when it
//! works for one, else on threads started for it.
//!
//! Why a pool when there is one: a thread started for a piece of work does not run at once
//! beside its starter. On a 2-core machine, one of the two waited a median of 0.7 ms (up to
//! 3 ms) before both ran, while a pool's waiting thread, woken for the work, ran within
//! 0.03 ms; a compaction of a large request splits its work a dozen times. Why not always a
//! pool: a library's caller did not ask for threads that outlive the call, and a process that
//! forks (a Python worker, say) would take none of a pool's threads into its child, which would
//! then wait for them forever. So the `cutctx` binary runs its commands on a pool of its own,
//! and everything else starts threads as before.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread;

/// Runs `here` on this thread and `f` on each of `items` beside it, all at once: `here`'s
/// result, and each item's in the items' order, `Err` for a job that panicked or whose thread
/// could not be started (the caller does that job itself, or gives up the split).
///
/// On a worker of a rayon pool the items are jobs of that pool (a job no other worker takes
/// runs on this thread once `here` is done); elsewhere each item has a thread of its own.
/// Results never depend on where a job ran. A panic of `here` is this call's.
///
/// ```
/// let text = "a b c d";
/// let (words, lens) = cutctx_model::beside::beside(
///     || text.split(' ').count(),
///     vec!["ab", "cde"],
///     |s: &str| s.len(),
/// );
/// assert_eq!(words, 4);
/// assert_eq!(lens.into_iter().map(Result::unwrap).collect::<Vec<_>>(), [2, 3]);
/// ```
pub fn beside<H, RH, T, F, R>(here: H, items: Vec<T>, f: F) -> (RH, Vec<thread::Result<R>>)
where
    H: FnOnce() -> RH + Send,
    RH: Send,
    T: Send,
    F: Fn(T) -> R + Sync,
    R: Send,
{
    let f = &f;
    if rayon::current_thread_index().is_none() {
        return thread::scope(|scope| {
            let jobs: Vec<_> = items
                .into_iter()
                .map(|item| thread::Builder::new().spawn_scoped(scope, move || f(item)))
                .collect();
            let mine = here();
            let theirs = jobs
                .into_iter()
                .map(|job| match job {
                    Ok(job) => job.join(),
                    Err(e) => Err(Box::new(e) as Box<dyn std::any::Any + Send>),
                })
                .collect();
            (mine, theirs)
        });
    }
    let mut theirs: Vec<Option<thread::Result<R>>> = items.iter().map(|_| None).collect();
    let mine = rayon::scope(|scope| {
        for (item, out) in items.into_iter().zip(theirs.iter_mut()) {
            scope.spawn(move |_| *out = Some(catch_unwind(AssertUnwindSafe(|| f(item)))));
        }
        here()
    });
    let theirs = theirs
        .into_iter()
        .map(|out| {
            // A scope returns only once each of its jobs has run.
            debug_assert!(out.is_some(), "a job of the scope did not run");
            out.unwrap_or_else(|| Err(Box::new("a job of the scope did not run")))
        })
        .collect();
    (mine, theirs)
}

/// [`beside`] of one job: `here` on this thread and `job` beside it; `job`'s result is `Err`
/// when it panicked or its thread could not be started.
///
/// ```
/// let (here, there) = cutctx_model::beside::beside_one(|| 1 + 1, || 2 * 3);
/// assert_eq!((here, there.ok()), (2, Some(6)));
/// ```
pub fn beside_one<H, RH, J, R>(here: H, job: J) -> (RH, thread::Result<R>)
where
    H: FnOnce() -> RH + Send,
    RH: Send,
    J: FnOnce() -> R + Send,
    R: Send,
{
    let (mine, mut theirs) = beside(here, vec![job], |job: J| job());
    debug_assert_eq!(theirs.len(), 1, "one job, one result");
    let theirs = theirs
        .pop()
        .unwrap_or_else(|| Err(Box::new("the job gave no result")));
    (mine, theirs)
}

/// `items` mapped in order by `f`, each with the item of `with` at its position (`with` as
/// long as `items` or longer): on the caller's rayon pool when it works for one and there are
/// at least `parallel_from` items, each worker writing its share of the list in place; else on
/// this thread. For a long list of small values (a plan's actions), the work is mostly the
/// first touch of the list's pages, which the pool's threads then share.
///
/// ```
/// let ids = ["a", "b", "c"];
/// let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool");
/// let paired = pool.install(|| {
///     cutctx_model::beside::zip_map(vec![1, 2, 3], &ids, 2, |n, id| format!("{id}{n}"))
/// });
/// assert_eq!(paired, ["a1", "b2", "c3"]);
/// assert_eq!(cutctx_model::beside::zip_map(vec![1], &ids, 2, |n, id| format!("{id}{n}")), ["a1"]);
/// ```
pub fn zip_map<T, W, R, F>(items: Vec<T>, with: &[W], parallel_from: usize, f: F) -> Vec<R>
where
    T: Send,
    W: Sync,
    R: Send,
    F: Fn(T, &W) -> R + Sync + Send,
{
    debug_assert!(
        with.len() >= items.len(),
        "an item of `with` for every item"
    );
    if items.len() < parallel_from || rayon::current_thread_index().is_none() {
        return items.into_iter().zip(with).map(|(t, w)| f(t, w)).collect();
    }
    use rayon::prelude::*;
    let with = &with[..items.len().min(with.len())];
    items
        .into_par_iter()
        .zip(with.par_iter())
        .map(|(t, w)| f(t, w))
        .collect()
}

/// How many shares a piece of work for `threads` threads is best split into, when the threads
/// may not keep pace with each other (one waits on memory the other has cached, one starts
/// late): on a pool, a few for each thread, so that whichever thread is free takes the next
/// ([`beside`] runs them as the pool's jobs, its caller taking those no worker took);
/// elsewhere one for each thread, since each share then has a thread of its own.
///
/// ```
/// assert_eq!(cutctx_model::beside::shares(2), 2);
/// let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool");
/// assert!(pool.install(|| cutctx_model::beside::shares(2)) > 2);
/// ```
#[must_use]
pub fn shares(threads: usize) -> usize {
    if rayon::current_thread_index().is_some() {
        threads.saturating_mul(SHARES_PER_THREAD)
    } else {
        threads
    }
}

/// The shares for each thread of a pool (see [`shares`]).
const SHARES_PER_THREAD: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    /// The same calls, off any pool and on a pool's worker.
    fn both(check: impl Fn() + Send + Sync) {
        check();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a pool");
        pool.install(|| {
            assert!(rayon::current_thread_index().is_some());
            check();
        });
    }

    #[test]
    fn zipped_lists_map_in_order_on_a_pool_or_here() {
        both(|| {
            for n in [0, 1, 3, 999, 1_000, 1_001, 50_000] {
                let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
                let with: Vec<usize> = (0..n + 5).map(|i| 7 * i).collect();
                let mapped = zip_map(items, &with, 1_000, |s, w| format!("{s}:{w}"));
                let expected: Vec<String> = (0..n).map(|i| format!("{i}:{}", 7 * i)).collect();
                assert_eq!(mapped, expected, "{n}");
            }
        });
    }

    #[test]
    fn results_come_back_in_the_items_order() {
        both(|| {
            let items: Vec<usize> = (0..9).collect();
            let (mine, theirs) = beside(|| "here", items, |i| i * i);
            assert_eq!(mine, "here");
            let squares: Vec<usize> = theirs.into_iter().map(Result::unwrap).collect();
            assert_eq!(squares, [0, 1, 4, 9, 16, 25, 36, 49, 64]);
        });
    }

    #[test]
    fn jobs_may_borrow_and_change_what_the_caller_holds() {
        both(|| {
            let mut slots = vec![Vec::new(), Vec::new()];
            let mut first = Vec::new();
            let source = [1, 2, 3];
            let ((), theirs) = beside(
                || first.extend_from_slice(&source[..1]),
                slots.iter_mut().enumerate().collect(),
                |(k, slot): (usize, &mut Vec<i32>)| slot.push(source[k + 1]),
            );
            assert!(theirs.iter().all(Result::is_ok));
            assert_eq!((first, slots), (vec![1], vec![vec![2], vec![3]]));
        });
    }

    #[test]
    fn a_job_that_panics_is_its_own_err() {
        both(|| {
            let (mine, theirs) = beside(
                || 7,
                vec![1, 0, 2],
                |d: i32| {
                    assert!(d != 0, "a job that panics");
                    10 / d
                },
            );
            assert_eq!(mine, 7);
            let oks: Vec<Option<i32>> = theirs.into_iter().map(Result::ok).collect();
            assert_eq!(oks, [Some(10), None, Some(5)]);
        });
    }

    #[test]
    fn on_a_pool_the_jobs_run_on_its_workers_and_elsewhere_on_threads_of_their_own() {
        let on_pool = |()| rayon::current_thread_index().is_some();
        let (_, off) = beside(|| (), vec![(), ()], on_pool);
        assert!(off.into_iter().all(|r| !r.expect("ran")));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a pool");
        let (_, on) = pool.install(|| beside(|| (), vec![(), ()], on_pool));
        assert!(on.into_iter().all(|r| r.expect("ran")));
    }

    #[test]
    fn one_job_beside_gives_its_result_or_its_panic() {
        both(|| {
            let (mine, theirs) = beside_one(|| "here", || 6 * 7);
            assert_eq!((mine, theirs.ok()), ("here", Some(42)));
            let (_, lost) = beside_one(|| (), || -> u8 { panic!("a job that panics") });
            assert!(lost.is_err());
        });
    }

    #[test]
    fn no_items_is_only_here() {
        both(|| {
            let (mine, theirs) = beside(|| 1, Vec::<u8>::new(), |_| 0);
            assert_eq!((mine, theirs.len()), (1, 0));
        });
    }
}

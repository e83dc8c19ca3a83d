//! Running the `cutctx` binary with a deadline, and recording what it did and how long it took.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A process still running after this long is killed: the suite never hangs.
pub(crate) const KILL_AFTER: Duration = Duration::from_secs(60);

/// What one run of the binary did.
#[derive(Debug)]
pub(crate) struct Run {
    /// The exit status; `None` when the process was killed by a signal.
    pub(crate) status: Option<i32>,
    /// Standard output.
    pub(crate) stdout: Vec<u8>,
    /// Standard error.
    pub(crate) stderr: Vec<u8>,
    /// Wall time from spawn to exit.
    pub(crate) elapsed: Duration,
    /// Whether the run was killed at [`KILL_AFTER`].
    pub(crate) killed: bool,
}

fn drain(mut from: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        // A read error leaves what was read so far, which is all a check can use.
        let _ = from.read_to_end(&mut bytes);
        bytes
    })
}

/// Runs `cutctx ARGS` in `cwd`, with `stdin` on standard input (nothing, closed, when `None`),
/// and standard output into the file `stdout` when given (then [`Run::stdout`] is empty), or
/// else into a pipe this function reads.
pub(crate) fn run(args: &[String], cwd: &Path, stdin: Option<&[u8]>, stdout: Option<&Path>) -> Run {
    let start = Instant::now();
    let out = match stdout {
        Some(path) => Stdio::from(
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .expect("the case's standard output can be opened"),
        ),
        None => Stdio::piped(),
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutctx"))
        .args(args)
        .current_dir(cwd)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(out)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cutctx binary starts");
    let feeder = child.stdin.take().map(|mut pipe| {
        let bytes = stdin.unwrap_or_default().to_vec();
        thread::spawn(move || {
            // A binary that fails before reading its input closes the pipe; that is its
            // business, and the checks judge what it printed.
            let _ = pipe.write_all(&bytes);
        })
    });
    // Standard output into a file leaves nothing to read: an empty drain.
    let stdout = match child.stdout.take() {
        Some(pipe) => drain(pipe),
        None => thread::spawn(Vec::new),
    };
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    let mut killed = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child can be polled") {
            break status;
        }
        if start.elapsed() >= KILL_AFTER {
            // Only the process this function started, by its handle.
            let _ = child.kill();
            killed = true;
            break child.wait().expect("a killed child can be reaped");
        }
        thread::sleep(Duration::from_millis(1));
    };
    let elapsed = start.elapsed();
    if let Some(feeder) = feeder {
        feeder.join().expect("the stdin feeder does not panic");
    }
    Run {
        status: status.code(),
        stdout: stdout.join().expect("the stdout reader does not panic"),
        stderr: stderr.join().expect("the stderr reader does not panic"),
        elapsed,
        killed,
    }
}

/// Whether `needle` occurs in `haystack`.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

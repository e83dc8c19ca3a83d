//! A batch run as the binary runs it: standard output, a progress bar on standard error when it
//! is a terminal, each line's notices there, and the summary at the end.

use std::io::{IsTerminal, Write};

use cutctx::receipts::Clock;

use super::pipeline::Io;
use super::{BatchOptions, Ended, SOME_LINES_FAILED_STATUS, Summary, open_input, run};
use crate::OpsError;
use crate::output::CLOSED_PIPE_STATUS;

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

//! The `cutctx` command line: plan, compact and apply over JSON request documents.
//!
//! The contract (request document, outputs, error codes and exit statuses) is the one every
//! language relies on; see docs/CLI.md. Every output is canonical JSON and one newline, written
//! in one piece only after the whole command succeeded: a failure writes nothing on standard
//! output. An output that cannot be written (standard output, `--report`) is `OUTPUT_ERROR`;
//! a closed pipe on standard output ends the command quietly with status 141.
#![forbid(unsafe_code)]

mod args;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use args::{BatchArgs, FormatArgs, ReplayArgs, ServeArgs, SessionArgs};

use cutctx_ops::output::{self, Delivery};
use cutctx_ops::{OpsError, USAGE_ERROR};

/// What `cutctx --help` ends with: a first command of each kind, and the exit codes.
const EXAMPLES: &str = "\
Examples (from a clone of the repository):
  cutctx compact examples/request.json
      plan and apply a request document: prints plan, report and the new transcript
  cutctx compact --format openai-chat --max-tokens 2500 examples/openai-chat.json
      compact a provider request in its own format (also openai-responses, anthropic)
  cutctx batch --format openai-chat --max-tokens 2500 examples/batch.jsonl > out.jsonl
      compact a JSONL file of requests on every core
  cutctx serve --help
      the compacting proxy for the OpenAI and Anthropic APIs

Exit codes: 0 done; 1 a batch line failed; 2 bad input or usage; 3 the budget cannot be met;
4 summaries missing; 5 a stored plan does not match; 6 the output could not be written.
docs/CLI.md has every command, option and code.";

/// Fit an LLM transcript into a token budget, deterministically and auditably.
#[derive(Debug, Parser)]
#[command(
    name = "cutctx",
    version,
    about = "Fit an LLM transcript into a token budget, deterministically and auditably.",
    long_about = None,
    after_help = EXAMPLES
)]
struct Cli {
    /// How failures are reported on standard error.
    #[arg(long, global = true, value_enum, default_value_t = ErrorFormat::Text)]
    error_format: ErrorFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ErrorFormat {
    /// `error[CODE]: message`, for people.
    Text,
    /// One line holding `{"code", "message", "details"}`, for programs.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the plan for a request, as the reference's canonical JSON.
    Plan {
        /// The request document, or `-` for standard input.
        request: PathBuf,
    },
    /// Plan, then apply with the request's summaries: prints plan, report and transcript.
    Compact {
        /// The request document, or `-` for standard input.
        request: PathBuf,
        /// Also append the compaction's receipt to this ledger (arcaeon's format).
        #[arg(long, conflicts_with = "format")]
        ledger: Option<PathBuf>,
        /// The compactor the receipt names (default `cutctx/<version>`).
        #[arg(long, requires = "ledger")]
        compactor: Option<String>,
        /// With --format: compact a provider request and print it, compacted, in its format.
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Print where a provider request's tokens are: tools, system, each turn by position, the
    /// output reserve and the total, as canonical JSON.
    ///
    /// The output is {"messages", "reserve", "system", "tools", "total", "turns"}: `tools`
    /// counts the tool definitions over their canonical JSON text with the turns' estimator;
    /// `system` the system turns; `messages` every other turn; `turns` lists each turn as
    /// {"role", "tokens", "turn_id"}; `total` = tools + system + messages + reserve.
    Estimate {
        /// The provider request, or `-` for standard input.
        request: PathBuf,
        /// The request's format.
        #[arg(long, value_parser = args::format_name())]
        format: cutctx::formats::Format,
        /// How turns and tools are estimated: chars:N (default chars:4), o200k_base or cl100k_base.
        #[arg(long)]
        estimator: Option<String>,
        /// Tokens kept for the completion (default: the request's own output limit, else 0).
        #[arg(long)]
        reserve_output: Option<u64>,
        /// Count the request as `compact --repair` would repair it.
        #[arg(long)]
        repair: bool,
    },
    /// Apply a stored plan to the request's transcript, after validating it.
    Apply {
        /// The request document, or `-` for standard input.
        request: PathBuf,
        /// A file holding a plan's JSON.
        #[arg(long)]
        plan: PathBuf,
    },
    /// Compact across the calls of an agent loop: rarely, deeply, keeping the cached prefix.
    /// Prints the request to send; the state file is created or replaced.
    Session {
        /// The provider request holding the whole history, or `-` for standard input.
        request: PathBuf,
        #[command(flatten)]
        args: SessionArgs,
    },
    /// Replay a recorded run call by call without compaction, with stateless compaction and
    /// with a session, and price each.
    Replay {
        /// The run: a provider request holding the whole history, or `-` for standard input.
        run: PathBuf,
        #[command(flatten)]
        args: ReplayArgs,
    },
    /// Compact a JSONL file of provider requests, one per line, on every core: one output line
    /// per input line, in order (`null` for a line that failed). Exit 1 when any line failed.
    Batch(BatchArgs),
    /// Run a compacting HTTP proxy in front of the OpenAI and Anthropic APIs: one session per
    /// conversation, requests forwarded byte for byte until they no longer fit the model's
    /// window. See docs/SERVE.md.
    Serve(Box<ServeArgs>),
    /// Compaction receipts for any compactor's work.
    Receipt {
        #[command(subcommand)]
        command: ReceiptCommand,
    },
    /// The hash-chained receipts ledger: verify it, or print its head pin.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ReceiptCommand {
    /// Receipt PRE -> POST (JSON arrays of items) into a ledger; prints the row as written.
    Seal {
        /// The items before compaction.
        #[arg(long)]
        pre: PathBuf,
        /// The items after compaction.
        #[arg(long)]
        post: PathBuf,
        /// The ledger to append to (created if missing).
        #[arg(long)]
        ledger: PathBuf,
        /// Who compacted: an identity claim.
        #[arg(long)]
        compactor: String,
        /// How: a method label such as `llm-summary`.
        #[arg(long)]
        method: String,
        /// The items the compactor claims it dropped; sealing is refused if they disagree.
        #[arg(long)]
        dropped: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum LedgerCommand {
    /// Verify the chain, every receipt, and optionally content and a pin: exit 0 when
    /// everything checked holds, 1 when something does not, 2 on unreadable input.
    Verify {
        /// The ledger.
        file: PathBuf,
        /// A file holding a pin as `cutctx ledger head` prints it.
        #[arg(long)]
        pin: Option<PathBuf>,
        /// A JSON map from a receipt row's line to its `{"pre": [...], "post": [...]}`.
        #[arg(long)]
        content: Option<PathBuf>,
        /// Treat unchained rows as breaks and ignore break declarations.
        #[arg(long)]
        strict: bool,
    },
    /// Print the ledger's head pin: `arcaeon-ledger head chain=... rows=... as_of=...`.
    Head {
        /// The ledger.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    // The pool every command runs on, started first, so that its threads are waiting by the
    // time work splits (see `cutctx::model::beside`). Without one, work splits on threads
    // started for it, as it always may.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cutctx::Parallelism::Automatic.threads())
        // The main thread's own, which the commands ran on before they ran on the pool.
        .stack_size(MAIN_STACK_BYTES)
        .thread_name(|i| format!("cutctx-{i}"))
        .build();
    match pool {
        Ok(pool) => pool.install(command_line),
        Err(_) => command_line(),
    }
}

/// The stack of each thread of the pool: that of a program's main thread on Linux.
const MAIN_STACK_BYTES: usize = 8 << 20;

/// The command line parsed and run: its exit status.
fn command_line() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let json = args
                .windows(2)
                .any(|w| w[0] == "--error-format" && w[1] == "json")
                || args.iter().any(|a| a == "--error-format=json");
            if json {
                // The first line of what clap prints, which names the argument and what is
                // wrong with it, rather than the kind of error alone.
                let text = e.to_string();
                let first = text.lines().next().unwrap_or_default();
                let mut err = OpsError {
                    code: USAGE_ERROR,
                    message: first.strip_prefix("error: ").unwrap_or(first).to_owned(),
                    details: cutctx::model::details! { "kind" => e.kind().to_string() },
                };
                if let Some(clap::error::ContextValue::String(arg)) =
                    e.get(clap::error::ContextKind::InvalidArg)
                {
                    err.details
                        .insert("argument".into(), serde_json::Value::from(arg.as_str()));
                }
                eprintln!("{}", err.to_json_line());
            } else {
                let _ = e.print();
            }
            return ExitCode::from(2);
        }
    };
    if let Command::Batch(args) = &cli.command {
        let status = cutctx_ops::batch::run_command(
            &args.options(),
            cli.error_format == ErrorFormat::Json,
            &cutctx::ledger::SystemClock,
        );
        return status.map_or_else(|err| fail(cli.error_format, &err), ExitCode::from);
    }
    if let Command::Serve(args) = &cli.command {
        return serve(args).map_or_else(|err| fail(cli.error_format, &err), |()| ExitCode::SUCCESS);
    }
    let delivered = run(&cli.command).and_then(|(status, mut out)| {
        let mut stdout = output::Stdout::new();
        let delivery = match &mut out {
            Output::Text(text) => output::deliver(&mut stdout, text.as_bytes()),
            Output::Compacted(compacted) => {
                output::deliver_with(&mut stdout, |w| compacted.write_to(w))
            }
            Output::CompactedFile(compacted) => {
                output::deliver_with(&mut stdout, |w| compacted.write_copying_to(w))
            }
            Output::Format(streamed) => output::deliver_with(&mut stdout, |w| streamed.write_to(w)),
        };
        // As the request: the exit reclaims the output whole.
        std::mem::forget(out);
        delivery.map(|d| (status, d))
    });
    match delivered {
        Ok((status, Delivery::Written)) => ExitCode::from(status),
        // A closed pipe is the reader's choice: no message, only the status a shell gives a
        // program the closed pipe ended, so `set -o pipefail` still sees the output unread.
        Ok((_, Delivery::ReaderGone)) => ExitCode::from(output::CLOSED_PIPE_STATUS),
        Err(err) => fail(cli.error_format, &err),
    }
}

/// Reports `err` on standard error in `format`; its exit status.
fn fail(format: ErrorFormat, err: &OpsError) -> ExitCode {
    let line = match format {
        ErrorFormat::Text => format!("error[{}]: {}\n", err.code, err.message),
        ErrorFormat::Json => format!("{}\n", err.to_json_line()),
    };
    // Standard error is the last channel: when it fails too, the exit status still says what
    // happened, and panicking would only replace it with 101.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    ExitCode::from(err.exit_status())
}

/// What a command prints on standard output.
enum Output {
    /// Text made whole.
    Text(String),
    /// A compaction's output, written as it is made: a large one is never held whole.
    Compacted(Box<cutctx_ops::Compacted>),
    /// A compaction of a request read where it lies in its file, written as it is made.
    CompactedFile(Box<cutctx_ops::CompactedFile>),
    /// A compacted provider request, written from its input's text: never held whole.
    Format(Box<cutctx_ops::formats::Streamed>),
}

/// Runs one command: its exit status (0, or 1 for a ledger that does not verify) and output.
fn run(command: &Command) -> Result<(u8, Output), OpsError> {
    use cutctx_ops::ledger;
    let clock = cutctx::ledger::SystemClock;
    let ok = |out: String| (0, Output::Text(out));
    match command {
        Command::Plan { request } => match request_file(request)? {
            // A large file read where it lies, as `compact` reads it.
            Some(file) => cutctx_ops::plan_file(file, |file| read_whole(file, request)).map(ok),
            None => cutctx_ops::plan(&read_text(request, "the request")?).map(ok),
        },
        Command::Compact {
            request, format, ..
        } if format.format.is_some() => {
            compact_format(request, format).map(|out| (0, Output::Format(Box::new(out))))
        }
        Command::Compact {
            request,
            ledger: None,
            ..
        } => {
            // A large file read where it lies, its kept contents copied from it again as the
            // output is written; anything else read whole (a file on two threads). The process
            // ends right after printing: freeing every turn, action and id one by one would
            // only delay the exit, so the operating system reclaims them whole (see `main`).
            if let Some(file) = request_file(request)? {
                let compacted = cutctx_ops::compact_file(file, |file| read_whole(file, request))?;
                return Ok((0, Output::CompactedFile(Box::new(compacted))));
            }
            let compacted = cutctx_ops::compact_text(read_text(request, "the request")?)?;
            Ok((0, Output::Compacted(Box::new(compacted))))
        }
        Command::Compact {
            request,
            ledger: Some(file),
            compactor,
            ..
        } => ledger::compact_with_ledger(
            &read_text(request, "the request")?,
            file,
            compactor.as_deref(),
            &clock,
        )
        .map(ok),
        Command::Session { request, args } => session(request, args, &clock).map(ok),
        Command::Replay { run, args } => replay(run, args).map(ok),
        Command::Estimate {
            request,
            format,
            estimator,
            reserve_output,
            repair,
        } => cutctx_ops::formats::estimate(
            *format,
            estimator.as_deref(),
            *reserve_output,
            *repair,
            &read_text(request, "the transcript")?,
        )
        .map(ok),
        Command::Apply { request, plan } => {
            // As `compact`: read where it lies or whole, its kept contents copied from it into
            // the output, which is written as it is made; the process's end reclaims the rest
            // (see `main`). The request first, then the plan, as they are named (both may be
            // standard input).
            let Some(file) = request_file(request)? else {
                let request = read_text(request, "the request")?;
                let applied = cutctx_ops::apply_text(request, &read_text(plan, "the plan")?)?;
                return Ok((0, Output::Compacted(Box::new(applied))));
            };
            let plan_text = read_text(plan, "the plan")?;
            let applied =
                cutctx_ops::apply_file(file, &plan_text, |file| read_whole(file, request))?;
            Ok((0, Output::CompactedFile(Box::new(applied))))
        }
        Command::Receipt {
            command:
                ReceiptCommand::Seal {
                    pre,
                    post,
                    ledger: file,
                    compactor,
                    method,
                    dropped,
                },
        } => ledger::receipt_seal(
            &read_text(pre, "the pre content")?,
            &read_text(post, "the post content")?,
            dropped
                .as_deref()
                .map(|d| read_text(d, "the dropped claim"))
                .transpose()?
                .as_deref(),
            file,
            compactor,
            method,
            &clock,
        )
        .map(ok),
        Command::Ledger {
            command:
                LedgerCommand::Verify {
                    file,
                    pin,
                    content,
                    strict,
                },
        } => ledger::ledger_verify(
            file,
            pin.as_deref()
                .map(|p| read_text(p, "the pin"))
                .transpose()?
                .as_deref(),
            content
                .as_deref()
                .map(|c| read_text(c, "the content map"))
                .transpose()?
                .as_deref(),
            *strict,
        )
        .map(|(status, out)| (status, Output::Text(out))),
        Command::Ledger {
            command: LedgerCommand::Head { file },
        } => ledger::ledger_head(file, &clock).map(ok),
        // Streams its own output; `main` runs it before this.
        Command::Batch(args) => cutctx_ops::batch::run_command(&args.options(), false, &clock)
            .map(|s| (s, Output::Text(String::new()))),
        // Runs until stopped; `main` runs it before this.
        Command::Serve(args) => serve(args).map(|()| (0, Output::Text(String::new()))),
    }
}

/// `compact --format F`: a provider request, compacted in its own format; `--report FILE` is
/// written once the compaction has succeeded, atomically, and before anything reaches standard
/// output: a report that cannot be written leaves standard output empty, and a standard output
/// that fails after it leaves the report whole. The request itself is handed back to be
/// written from the input's text as it goes out, never whole.
fn compact_format(
    request: &Path,
    format: &FormatArgs,
) -> Result<cutctx_ops::formats::Streamed, OpsError> {
    let input = read_text(request, "the transcript")?;
    let summaries = format
        .summaries
        .as_deref()
        .map(|p| read_text(p, "the summaries"))
        .transpose()?;
    let out = cutctx_ops::formats::compact_owned(&format.options(), input, summaries.as_deref())?;
    if !out.repairs.is_empty() || out.reasoning.is_some() {
        let mut lines = out
            .repairs
            .iter()
            .chain(&out.reasoning)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n");
        lines.push('\n');
        // A note that cannot be written does not undo the compaction: the report holds them.
        let _ = std::io::stderr().lock().write_all(lines.as_bytes());
    }
    if let Some(path) = &format.report {
        output::write_atomically(path, out.report.as_bytes(), "report")?;
    }
    Ok(out)
}

/// `session`: reads the request and the state (absent on the first call), appends a firing's
/// receipt to the ledger, replaces the state atomically, and only then hands back the request
/// to print: a failure at any step leaves the previous state in place and prints nothing.
fn session(
    request: &Path,
    args: &SessionArgs,
    clock: &dyn cutctx::receipts::Clock,
) -> Result<String, OpsError> {
    let text = read_text(request, "the request")?;
    let state = match std::fs::metadata(&args.state) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        _ => Some(read_text(&args.state, "the session state")?),
    };
    let out = cutctx_ops::session::session(&args.options(), &text, state.as_deref())?;
    if let (Some(ledger), Some(firing)) = (&args.ledger, &out.firing) {
        cutctx_ops::ledger::append_firing(ledger, args.compactor.as_deref(), firing, clock)?;
    }
    output::write_atomically(&args.state, out.state.as_bytes(), "state")?;
    for line in out.repairs.iter().chain(&out.notice).chain(&out.reasoning) {
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
    Ok(out.output)
}

/// `serve`: reads the config file, then runs the proxy until SIGINT or SIGTERM.
fn serve(args: &ServeArgs) -> Result<(), OpsError> {
    let config = args
        .config
        .as_deref()
        .map(|p| read_text(p, "the config file"))
        .transpose()?;
    let tokens = args
        .auth_tokens_file
        .as_deref()
        .map(|p| read_text(p, "the tokens file"))
        .transpose()?;
    cutctx_serve::run(args.options(config, tokens)?)
}

/// `replay`: reads the run (and a price table file), writes the SVG atomically when asked,
/// and hands back the table.
fn replay(run: &Path, args: &ReplayArgs) -> Result<String, OpsError> {
    let text = read_text(run, "the run")?;
    let table_text = if args.pricing == cutctx_ops::replay::AUTO_PRICING
        || cutctx::session::PriceTable::named(&args.pricing).is_some()
    {
        None
    } else {
        Some(read_text(Path::new(&args.pricing), "the price table")?)
    };
    let prices = cutctx_ops::replay::prices(&args.pricing, table_text.as_deref())?;
    let mut external = Vec::with_capacity(args.external.len());
    for spec in &args.external {
        let Some((name, file)) = spec
            .split_once('=')
            .filter(|(n, f)| !n.is_empty() && !f.is_empty())
        else {
            return Err(OpsError::validation(
                "--external takes NAME=FILE.jsonl",
                cutctx::model::details! { "external" => spec.as_str() },
            ));
        };
        external.push((
            name.to_owned(),
            read_text(Path::new(file), "an external strategy")?,
        ));
    }
    let out = cutctx_ops::replay::replay(&args.options(external), &text, &prices)?;
    if let Some(path) = &args.svg {
        output::write_atomically(path, out.svg.as_bytes(), "svg")?;
        output::write_atomically(&frontier_path(path), out.frontier_svg.as_bytes(), "svg")?;
    }
    Ok(out.output)
}

/// Where `--svg FILE` puts the cost against retention chart: FILE with `-frontier.svg` in
/// place of its `.svg` (appended when it has none).
fn frontier_path(path: &Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".svg").unwrap_or(&name);
    path.with_file_name(format!("{stem}-frontier.svg"))
}

/// Reads a whole file (or standard input for `-`) as UTF-8.
fn read_text(path: &Path, what: &str) -> Result<String, OpsError> {
    let mut bytes = Vec::new();
    let read = if path == Path::new("-") {
        std::io::stdin().lock().read_to_end(&mut bytes).map(|_| ())
    } else {
        cutctx_ops::input::read_file(path).map(|read| bytes = read)
    };
    read.map_err(|e| read_error(path, what, &e))?;
    utf8_text(bytes, what)
}

/// The request at `path` opened to be read where it lies, when it is a large file (see
/// `RequestFile::open`); `None` for standard input and anything else, read whole.
fn request_file(path: &Path) -> Result<Option<cutctx_ops::input::RequestFile>, OpsError> {
    if path == Path::new("-") {
        return Ok(None);
    }
    cutctx_ops::input::RequestFile::open(path).map_err(|e| read_error(path, "the request", &e))
}

/// The request in `file`, opened from `path`, read whole as UTF-8.
fn read_whole(file: &cutctx_ops::input::RequestFile, path: &Path) -> Result<String, OpsError> {
    let bytes = file
        .read_whole()
        .map_err(|e| read_error(path, "the request", &e))?;
    utf8_text(bytes, "the request")
}

/// The error of reading `what` at `path`, which failed with `e`.
fn read_error(path: &Path, what: &str, e: &std::io::Error) -> OpsError {
    OpsError::input(
        format!("cannot read {what} at {}: {e}", path.display()),
        cutctx::model::details! { "path" => path.display().to_string(), "document" => what },
    )
}

/// `bytes` read of `what`, as UTF-8.
fn utf8_text(bytes: Vec<u8>, what: &str) -> Result<String, OpsError> {
    String::from_utf8(bytes).map_err(|e| {
        OpsError::input(
            format!("{what} is not UTF-8: invalid byte at offset {}", e.utf8_error().valid_up_to()),
            cutctx::model::details! { "document" => what, "offset" => e.utf8_error().valid_up_to() },
        )
    })
}

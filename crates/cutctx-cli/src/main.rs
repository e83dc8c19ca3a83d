//! The `cutctx` command line: plan, compact and apply over JSON request documents.
//!
//! The contract (request document, outputs, error codes and exit statuses) is the one every
//! language relies on; see the README. Every output is canonical JSON and one newline, written
//! in one piece only after the whole command succeeded: a failure writes nothing on standard
//! output.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use cutctx_cli::{CliError, USAGE_ERROR};

/// Fit an LLM transcript into a token budget, deterministically and auditably.
#[derive(Debug, Parser)]
#[command(name = "cutctx", version, about, long_about = None)]
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
    },
    /// Apply a stored plan to the request's transcript, after validating it.
    Apply {
        /// The request document, or `-` for standard input.
        request: PathBuf,
        /// A file holding a plan's JSON.
        #[arg(long)]
        plan: PathBuf,
    },
}

fn main() -> ExitCode {
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
                let err = CliError {
                    code: USAGE_ERROR,
                    message: e.kind().to_string(),
                    details: cutctx::model::details! {},
                };
                eprintln!("{}", err.to_json_line());
            } else {
                let _ = e.print();
            }
            return ExitCode::from(2);
        }
    };
    match run(&cli.command) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe is the reader's choice, not our failure.
            let _ = stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush());
            ExitCode::SUCCESS
        }
        Err(err) => {
            match cli.error_format {
                ErrorFormat::Text => eprintln!("error[{}]: {}", err.code, err.message),
                ErrorFormat::Json => eprintln!("{}", err.to_json_line()),
            }
            ExitCode::from(err.exit_status())
        }
    }
}

fn run(command: &Command) -> Result<String, CliError> {
    match command {
        Command::Plan { request } => cutctx_cli::plan(&read_text(request, "the request")?),
        Command::Compact { request } => cutctx_cli::compact(&read_text(request, "the request")?),
        Command::Apply { request, plan } => cutctx_cli::apply(
            &read_text(request, "the request")?,
            &read_text(plan, "the plan")?,
        ),
    }
}

/// Reads a whole file (or standard input for `-`) as UTF-8.
fn read_text(path: &Path, what: &str) -> Result<String, CliError> {
    let mut bytes = Vec::new();
    let read = if path == Path::new("-") {
        std::io::stdin().lock().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map(|_| ())
    };
    read.map_err(|e| {
        CliError::input(
            format!("cannot read {what} at {}: {e}", path.display()),
            cutctx::model::details! { "path" => path.display().to_string(), "document" => what },
        )
    })?;
    String::from_utf8(bytes).map_err(|e| {
        CliError::input(
            format!("{what} is not UTF-8: invalid byte at offset {}", e.utf8_error().valid_up_to()),
            cutctx::model::details! { "document" => what, "offset" => e.utf8_error().valid_up_to() },
        )
    })
}

//! `cargo xtask`: the workspace's own checks, written in Rust with `serde_json` as the only
//! dependency.
//!
//! * `layering` checks the crate graph from `cargo metadata` against
//!   `[workspace.metadata.layering]` of the root `Cargo.toml`.
//! * `tidy` applies text rules to the sources and manifests (module docs, `[lints]`,
//!   `#![forbid(unsafe_code)]`, `docs/ARCHITECTURE.md`, no I/O in the pure crates).
//! * `ci` runs both.
//!
//! Each task prints one summary line on success. On failure it prints every problem it found to
//! stderr and exits with [`ExitCode::FAILURE`]. The `#[test]`s of [`layering`] and [`tidy`] run
//! the same checks against the real workspace, so `cargo test --workspace` enforces them too.
#![forbid(unsafe_code)]

mod layering;
mod tidy;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use serde_json::Value;

/// The text `cargo xtask` prints without a task, or with `help`.
const HELP: &str = "\
usage: cargo xtask <task>

tasks:
  layering  check the crate graph against [workspace.metadata.layering] of the root Cargo.toml
  tidy      check module docs, [lints], #![forbid(unsafe_code)], docs/ARCHITECTURE.md and
            the pure crates' sources and manifests
  ci        layering, then tidy; fails if either fails
  help      print this text";

fn main() -> ExitCode {
    let root = project_root();
    let ok = match env::args().nth(1).as_deref() {
        Some("layering") => report(layering::run(&root)),
        Some("tidy") => report(tidy::run(&root)),
        Some("ci") => {
            // Run both so one CI log shows every problem.
            let layering_ok = report(layering::run(&root));
            let tidy_ok = report(tidy::run(&root));
            layering_ok && tidy_ok
        }
        None | Some("help" | "--help" | "-h") => {
            println!("{HELP}");
            true
        }
        Some(other) => {
            eprintln!("error: unknown task `{other}`\n\n{HELP}");
            false
        }
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints a task's summary to stdout or its failure report to stderr; returns whether it passed.
fn report(result: Result<String, String>) -> bool {
    match result {
        Ok(summary) => {
            println!("{summary}");
            true
        }
        Err(failure) => {
            eprintln!("{failure}");
            false
        }
    }
}

/// The workspace root: the parent of this crate's directory.
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the xtask crate lives one directory below the workspace root")
        .to_path_buf()
}

/// Runs `$CARGO metadata --format-version 1 --no-deps` (plus `extra_args`) in `dir` and parses
/// its output.
///
/// `--no-deps` lists the workspace members only, with their declared dependencies; it resolves
/// nothing, so it needs neither the network nor a buildable workspace, only parseable manifests.
pub(crate) fn cargo_metadata(dir: &Path, extra_args: &[&str]) -> Result<Value, String> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .args(extra_args)
        .current_dir(dir)
        .output()
        .map_err(|error| {
            format!(
                "cannot run `{} metadata` in {}: {error}",
                cargo.to_string_lossy(),
                dir.display()
            )
        })?;
    if !output.status.success() {
        return Err(format!(
            "`cargo metadata` failed in {} ({}):\n{}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        ));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("`cargo metadata` printed invalid JSON: {error}"))
}

//! `cutctx compact --format ...`: provider requests compacted in their own format.
//!
//! `inprocess` calls `cutctx_ops::formats` directly; `binary` runs the real `cutctx` binary.
//! `--summarize-with` runs a small shell script end to end.

use cutctx_ops::{OpsError, formats};

mod binary;
mod inprocess;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Content that must never appear in an error's message or details.
pub(crate) const SECRET: &str = "SECRET-CONTENT-xyz";

/// The repository's sample request for `format` (`examples/{format}.json`), as text.
pub(crate) fn example(format: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../examples/{format}.json"));
    std::fs::read_to_string(path).expect("the example exists")
}

/// A fresh scratch folder for one test.
pub(crate) fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("formats")
        .join(test);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old scratch folder can be removed");
    }
    std::fs::create_dir_all(&dir).expect("a scratch folder can be created");
    dir
}

/// A summarizer script: saves its standard input next to itself and prints a summary naming
/// the group it read (found with sed, so the script needs nothing but a POSIX shell).
pub(crate) fn summarizer(dir: &Path) -> PathBuf {
    let path = dir.join("summarize.sh");
    let script = format!(
        "#!/bin/sh\n\
         input=$(cat)\n\
         n=$(ls {dir}/request-*.json 2>/dev/null | wc -l | tr -d ' ')\n\
         printf '%s' \"$input\" > {dir}/request-$n.json\n\
         group=$(printf '%s' \"$input\" | sed -n 's/.*\"group_id\":\"\\([^\"]*\\)\".*/\\1/p')\n\
         printf 'Summary of %s: the build broke on a cache key mismatch.\\n' \"$group\"\n",
        dir = dir.display()
    );
    std::fs::write(&path, script).expect("the script is written");
    path
}

/// `formats::FormatOptions` for `format` under `max_tokens`, with no output reserve (the
/// examples name their own `max_tokens`, which would otherwise be reserved).
pub(crate) fn args(format: cutctx::formats::Format, max_tokens: u64) -> formats::FormatOptions {
    formats::FormatOptions {
        format: Some(format),
        max_tokens: Some(max_tokens),
        reserve_output: Some(0),
        ..formats::FormatOptions::default()
    }
}

/// The parsed output of a compaction.
pub(crate) fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("the output is JSON")
}

/// Asserts that an error names no content.
pub(crate) fn no_content(e: &OpsError) {
    assert!(!e.message.contains(SECRET), "{}", e.message);
    let details = serde_json::to_string(&e.details).expect("details serialize");
    assert!(!details.contains(SECRET), "{details}");
}

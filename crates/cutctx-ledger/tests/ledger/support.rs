//! Shared helpers: the conformance folder, scratch folders, parsing.

use std::path::{Path, PathBuf};

use cutctx_receipts::json::{self, Object, Value};

/// `../shared/conformance/receipts`, when present.
pub(crate) fn conformance() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/receipts");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIP: {} is absent; the shared conformance data is not checked here",
            dir.display()
        );
        None
    }
}

/// Reads a conformance file as text.
pub(crate) fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).expect("a conformance file is readable")
}

/// A fresh, empty scratch folder for one test.
pub(crate) fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("ledger")
        .join(test);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old scratch folder can be removed");
    }
    std::fs::create_dir_all(&dir).expect("a scratch folder can be created");
    dir
}

/// Parses JSON text that must parse.
pub(crate) fn parse(text: &str) -> Value {
    json::parse(text).expect("test JSON parses").value
}

/// Parses a JSON object that must parse.
pub(crate) fn object(text: &str) -> Object {
    match parse(text) {
        Value::Object(o) => o,
        other => panic!("expected an object, got {other:?}"),
    }
}

/// The lines of a file, without their newlines.
pub(crate) fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("the ledger is readable")
        .lines()
        .map(str::to_owned)
        .collect()
}

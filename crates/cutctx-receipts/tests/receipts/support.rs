//! Shared helpers: the conformance folder and parsing.

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

/// Decodes lower-case hex.
pub(crate) fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

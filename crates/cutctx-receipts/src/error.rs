//! The one error type of this crate: a stable code, a message, and details.
//!
//! Verification never fails with an error: a broken row or ledger is a *verdict*
//! ([`crate::ReceiptVerdict`], [`crate::FileVerdict`], [`crate::Audit`]). Errors are for
//! operations that cannot go on: input that is not JSON, content that cannot be digested, a
//! lifecycle misuse, a claim that disagrees, a file that cannot be written.

use cutctx_model::Details;
use serde_json::json;

/// Why an operation of this crate failed. Each variant has a stable [`code`](Self::code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReceiptError {
    /// Text that is not JSON (as Python's `json.loads` reads it).
    #[error("not valid JSON: {message} (line {line}, column {column})")]
    JsonSyntax {
        /// Python's wording of the problem.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// Byte offset.
        offset: usize,
    },
    /// Arrays and objects nested deeper than [`crate::json::MAX_DEPTH`].
    #[error("JSON nests deeper than {limit} levels")]
    JsonTooDeep {
        /// The limit.
        limit: usize,
    },
    /// An integer literal longer than Python's conversion limit.
    #[error("an integer literal has {digits} digits, beyond Python's limit of {limit}")]
    JsonIntTooLarge {
        /// The literal's digit count.
        digits: usize,
        /// The limit.
        limit: usize,
    },
    /// A JSON object gives one key twice. The key itself is not repeated: in content it is
    /// content.
    #[error("an object repeats a key ({key_chars} characters long)")]
    JsonDuplicateKey {
        /// The repeated key's length in code points.
        key_chars: usize,
    },
    /// NaN or an infinity where JSON must be compliant (json-c14n, a ledger line).
    #[error("out of range float values are not JSON compliant: {value}")]
    NonFinite {
        /// The value as Python writes it (`NaN`, `Infinity`, `-Infinity`).
        value: String,
    },
    /// A string holds a lone surrogate, which strict UTF-8 cannot encode.
    #[error("a string holds the lone surrogate U+{code:04X}, which UTF-8 cannot encode")]
    LoneSurrogate {
        /// The surrogate.
        code: u32,
    },
    /// `record_*` or `seal` after `seal`.
    #[error("receipt already sealed; open a new one")]
    AlreadySealed,
    /// `seal` before `record_kept`.
    #[error(
        "seal() before record_kept(): record the survivor first (an empty list is a valid \
         survivor: everything was dropped)"
    )]
    KeptNotRecorded,
    /// The caller's `record_dropped` claim is not pre minus kept, as a multiset.
    #[error(
        "record_dropped() claim disagrees with pre-minus-kept (claimed {claimed} item(s), \
         inferred {inferred}); refusing to seal an inconsistent receipt"
    )]
    ClaimMismatch {
        /// Items claimed.
        claimed: usize,
        /// Items inferred.
        inferred: usize,
        /// Claimed digests not inferred (with multiplicity), sorted.
        unexpected: Vec<String>,
        /// Inferred digests not claimed (with multiplicity), sorted.
        missing: Vec<String>,
    },
    /// An extra row key collides with a key the receipt or the ledger sets.
    #[error("the extra key {key:?} is reserved: the receipt or the ledger sets it")]
    ReservedKey {
        /// The key.
        key: String,
    },
    /// A content document (items, or a content map) has the wrong shape.
    #[error("{message}")]
    ContentInvalid {
        /// What is wrong.
        message: String,
    },
    /// A ledger row handed to `append` is not a JSON object, or a pin line is malformed.
    #[error("{message}")]
    Malformed {
        /// What is wrong.
        message: String,
    },
    /// The file system refused (raised by `cutctx-ledger`, which does the file I/O).
    #[error("cannot {action} {path}: {message}")]
    Io {
        /// What was being done: `read`, `open`, `lock`, `write`, `sync`.
        action: &'static str,
        /// The path.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// Another writer held the ledger's lock for too long.
    #[error("could not lock {path} within {waited_ms} ms: another writer holds it")]
    LockTimeout {
        /// The lock file.
        path: String,
        /// How long we waited.
        waited_ms: u128,
    },
    /// The write reported success but the file did not grow.
    #[error("wrote {wrote} bytes to {path} but the file holds {holds}: nothing was recorded")]
    WriteLost {
        /// The ledger.
        path: String,
        /// Bytes written.
        wrote: u64,
        /// The file's size afterwards.
        holds: u64,
    },
    /// A pin was asked of a ledger that does not verify.
    #[error("refusing to mint a pin over a ledger that does not verify: {first_break}")]
    Unverified {
        /// The first break.
        first_break: String,
    },
}

impl ReceiptError {
    /// The stable code.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::JsonSyntax { .. } => "RECEIPT_JSON_SYNTAX",
            Self::JsonTooDeep { .. } => "RECEIPT_JSON_TOO_DEEP",
            Self::JsonIntTooLarge { .. } => "RECEIPT_JSON_INT_TOO_LARGE",
            Self::JsonDuplicateKey { .. } => "RECEIPT_JSON_DUPLICATE_KEY",
            Self::NonFinite { .. } => "RECEIPT_JSON_NON_FINITE",
            Self::LoneSurrogate { .. } => "RECEIPT_JSON_LONE_SURROGATE",
            Self::AlreadySealed => "RECEIPT_ALREADY_SEALED",
            Self::KeptNotRecorded => "RECEIPT_KEPT_NOT_RECORDED",
            Self::ClaimMismatch { .. } => "RECEIPT_CLAIM_MISMATCH",
            Self::ReservedKey { .. } => "RECEIPT_RESERVED_KEY",
            Self::ContentInvalid { .. } => "RECEIPT_CONTENT_INVALID",
            Self::Malformed { .. } => "LEDGER_MALFORMED_INPUT",
            Self::Io { .. } => "LEDGER_IO_ERROR",
            Self::LockTimeout { .. } => "LEDGER_LOCK_TIMEOUT",
            Self::WriteLost { .. } => "LEDGER_WRITE_LOST",
            Self::Unverified { .. } => "LEDGER_UNVERIFIED",
        }
    }

    /// Figures and names for programs; never content.
    #[must_use]
    pub fn details(&self) -> Details {
        let mut d = Details::new();
        let mut put = |k: &str, v: serde_json::Value| {
            d.insert(k.to_owned(), v);
        };
        match self {
            Self::JsonSyntax {
                line,
                column,
                offset,
                ..
            } => {
                put("line", json!(line));
                put("column", json!(column));
                put("offset", json!(offset));
            }
            Self::JsonTooDeep { limit } => put("limit", json!(limit)),
            Self::JsonIntTooLarge { digits, limit } => {
                put("digits", json!(digits));
                put("limit", json!(limit));
            }
            Self::JsonDuplicateKey { key_chars } => put("key_chars", json!(key_chars)),
            Self::NonFinite { value } => put("value", json!(value)),
            Self::LoneSurrogate { code } => put("code_point", json!(format!("U+{code:04X}"))),
            Self::AlreadySealed | Self::KeptNotRecorded => {}
            Self::ClaimMismatch {
                claimed,
                inferred,
                unexpected,
                missing,
            } => {
                put("claimed", json!(claimed));
                put("inferred", json!(inferred));
                put("unexpected", json!(unexpected));
                put("missing", json!(missing));
            }
            Self::ReservedKey { key } => put("key", json!(key)),
            Self::ContentInvalid { .. } | Self::Malformed { .. } => {}
            Self::Io {
                action,
                path,
                message,
            } => {
                put("action", json!(action));
                put("path", json!(path));
                put("error", json!(message));
            }
            Self::LockTimeout { path, waited_ms } => {
                put("path", json!(path));
                put(
                    "waited_ms",
                    json!(u64::try_from(*waited_ms).unwrap_or(u64::MAX)),
                );
            }
            Self::WriteLost { path, wrote, holds } => {
                put("path", json!(path));
                put("wrote", json!(wrote));
                put("holds", json!(holds));
            }
            Self::Unverified { first_break } => put("first_break", json!(first_break)),
        }
        d
    }
}

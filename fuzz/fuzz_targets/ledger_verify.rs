//! Fuzz target: ledger bytes → chain walk and receipt verification.
//!
//! A ledger comes from disk and may have been edited by anyone: no input may panic, the
//! verdict must be the same twice, and a ledger with a failure is never called verified.
#![no_main]

use cutctx_receipts::audit::{AuditOptions, audit_text};
use cutctx_receipts::chain::decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = decode(data);
    for strict in [false, true] {
        let options = AuditOptions { pin: None, content: None, strict };
        let first = audit_text(&text, options);
        let again = audit_text(&text, AuditOptions { pin: None, content: None, strict });
        assert_eq!(first, again, "auditing is deterministic");
        // Nothing wrong goes unreported: every break and every bad receipt is a failure.
        let bad_rows = first.receipts.iter().filter(|r| !r.verdict.ok).count();
        assert!(first.failures.len() >= first.file.all_breaks.len(), "a break went unreported");
        assert!(first.failures.len() >= bad_rows.min(1), "a bad receipt went unreported");
    }
});

//! Fuzz target: request document bytes → plan → apply, through the CLI's own functions.
//!
//! No input may panic; a request that plans must plan to the same bytes twice, and a plan
//! that applies must apply as a stored plan too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(plan) = cutctx_ops::plan(text) else { return };
    assert_eq!(cutctx_ops::plan(text).ok().as_deref(), Some(plan.as_str()), "planning is deterministic");
    if let Ok(out) = cutctx_ops::compact(text) {
        let applied = cutctx_ops::apply(text, &plan).expect("a plan the CLI printed applies as a stored plan");
        let compacted: serde_json::Value = serde_json::from_str(&out).expect("compact prints JSON");
        let stored: serde_json::Value = serde_json::from_str(&applied).expect("apply prints JSON");
        assert_eq!(compacted["report"], stored["report"]);
        assert_eq!(compacted["transcript"], stored["transcript"]);
    }
});

//! Fuzz target: provider request bytes → transcript → compacted request, in each format.
//!
//! No input may panic. A request that parses comes back identical when nothing is compacted,
//! and every compaction of it renders to a request that passes the format's validator: no
//! orphaned call or result, roles in an accepted order.
#![no_main]

use std::collections::BTreeMap;

use cutctx::{CompactionBudget, CompactionPolicy, default_chain};
use cutctx_formats::{Format, ProviderTranscript, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let Ok(document) = serde_json::from_slice::<serde_json::Value>(rest) else { return };
    let format = Format::ALL[usize::from(selector) % Format::ALL.len()];
    let Ok(pt) = ProviderTranscript::parse(format, &document) else { return };
    let same = pt.render(pt.transcript()).expect("the untouched transcript renders");
    validate(format, &same).expect("the untouched render is valid");
    let total = pt.transcript().token_estimate();
    let budget = CompactionBudget::new(total * u64::from(selector >> 2) / 64)
        .with_protected_recent_turns(u64::from(selector & 3));
    let Ok(chain) = default_chain("fuzz.v1") else { return };
    let Ok(plan) = chain.decide(pt.transcript(), &budget) else { return };
    let summaries: BTreeMap<String, String> = plan
        .summarization_requests
        .iter()
        .map(|r| (r.group_id().to_owned(), "a summary".to_owned()))
        .collect();
    let compacted = pt.apply(&plan, &summaries).expect("a valid plan renders");
    validate(format, &compacted.document).expect("every compacted request is valid");
});

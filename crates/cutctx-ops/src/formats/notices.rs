//! The lines a compaction of a provider request gives for standard error, beside its output:
//! one for each drop a repair made.

use cutctx::formats::Repair;

/// What `--repair` dropped, as one line for standard error:
/// `cutctx: repair: KIND at position N`, with ` (id "ID")` when the drop has an id.
pub(crate) fn repair_line(r: &Repair) -> String {
    let id = match r.id.as_deref() {
        Some(id) => format!(" (id {id:?})"),
        None => String::new(),
    };
    format!(
        "cutctx: repair: {} at position {}{id}",
        r.kind.as_str(),
        r.position
    )
}

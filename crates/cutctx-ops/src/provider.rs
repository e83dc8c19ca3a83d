//! What a front end reads of a provider request without compacting it: its format guessed from
//! its shape, its message list and the chained digests that find its session, the items
//! compaction carries untouched, the key of its list, and the format's [`Descriptor`] (its names,
//! what a tool call and a tool result are, the usage fields its responses report). Each rule lives in the layer below
//! (`cutctx-formats`, `cutctx-session`); this is where a front end reaches them, so that it
//! depends on the operations library alone.
//!
//! ```
//! use cutctx_ops::Format;
//! use cutctx_ops::provider::{guess_format, history, history_digests};
//! let request = serde_json::json!({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]});
//! let format = guess_format(&request);
//! assert_eq!(format, Format::Anthropic); // Messages requires `max_tokens`
//! assert_eq!(format.descriptor().list_key, "messages");
//! assert_eq!(history_digests(format, history(format, &request)).len(), 2);
//! ```

pub use cutctx::formats::descriptor::ReportedUsage;
pub use cutctx::formats::{
    Descriptor, Opaque, descriptor, guess_format, list_key, message_spans, opaque_items,
};
pub use cutctx::session::{history, history_digests, history_digests_after};

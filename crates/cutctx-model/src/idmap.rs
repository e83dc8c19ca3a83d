//! A map keyed by ids, for lookups only.
//!
//! Lookups by `tool_call_id` are on the hot path of every plan, and a `BTreeMap` pays a string
//! comparison per level. This map hashes instead, with SipHash-1-3 under fixed keys, so it
//! holds no randomness and behaves identically on every run and platform. It is never
//! iterated: every order cutctx produces comes from transcript positions, so the map's
//! internal order cannot leak into any output.

use std::hash::{BuildHasherDefault, DefaultHasher};

/// `&str` to `V`, hashed deterministically; never iterate it.
#[expect(
    clippy::disallowed_types,
    reason = "lookups only, never iterated; fixed hash keys"
)]
pub(crate) type IdMap<'a, V> =
    std::collections::HashMap<&'a str, V, BuildHasherDefault<DefaultHasher>>; // tidy:allow(HashMap) never iterated

/// An empty [`IdMap`] with room for `n` ids.
pub(crate) fn with_capacity<'a, V>(n: usize) -> IdMap<'a, V> {
    IdMap::with_capacity_and_hasher(n, BuildHasherDefault::default())
}

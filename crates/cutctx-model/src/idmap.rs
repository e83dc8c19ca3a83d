//! A map keyed by ids, for lookups only.
//!
//! Lookups by `tool_call_id` are on the hot path of every plan, and a `BTreeMap` pays a string
//! comparison per level. This map hashes instead, with [`IdHasher`]: a multiply-rotate hash over
//! eight bytes at a time, without keys, so it holds no randomness and behaves identically on
//! every run and platform. (Keyed SipHash, the standard library's, cost a tenth of building a
//! 100,000-turn transcript; under fixed keys it resisted chosen collisions no better.) It is
//! never iterated: every order cutctx produces comes from transcript positions, so the map's
//! internal order cannot leak into any output.

use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

/// A hash map keyed by ids, hashed with [`IdHasher`]: for lookups only. Its iteration order
/// is the table's, not the ids', so nothing that reaches an output may iterate it; lookups
/// cost one hash instead of a `BTreeMap`'s string comparison per level.
///
/// ```
/// use std::sync::Arc;
/// use cutctx_model::IdHashMap;
/// let mut calls: IdHashMap<String, Arc<str>> = IdHashMap::default();
/// calls.insert("call_1".to_owned(), Arc::from("m3"));
/// assert_eq!(calls.get("call_1").map(|k| &**k), Some("m3"));
/// ```
#[expect(
    clippy::disallowed_types,
    reason = "lookups only, never iterated; a deterministic hash"
)]
pub type IdHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<IdHasher>>; // tidy:allow(HashMap) never iterated

/// `&str` to `V`, hashed deterministically; never iterate it.
#[expect(
    clippy::disallowed_types,
    reason = "lookups only, never iterated; a deterministic hash"
)]
pub(crate) type IdMap<'a, V> = std::collections::HashMap<&'a str, V, BuildHasherDefault<IdHasher>>; // tidy:allow(HashMap) never iterated

/// An empty [`IdMap`] with room for `n` ids.
pub(crate) fn with_capacity<'a, V>(n: usize) -> IdMap<'a, V> {
    IdMap::with_capacity_and_hasher(n, BuildHasherDefault::default())
}

/// Whether no two of `ids` are equal, as far as their hashes tell: `true` is certain, `false`
/// means two hashes were equal, which two equal ids always make and two different ids very
/// rarely do, so the caller then checks exactly.
///
/// Faster than inserting the ids in an [`IdMap`]: each id is read once, in order, and only its
/// hash goes into the set, whose entries are half the size of a `&str` key's.
pub(crate) fn hashes_distinct<'a>(ids: impl ExactSizeIterator<Item = &'a str>) -> bool {
    let build = BuildHasherDefault::<IdHasher>::default();
    let mut seen = Hashes::with_capacity_and_hasher(ids.len(), build.clone());
    ids.into_iter().all(|id| seen.insert(build.hash_one(id)))
}

/// A set of ids' hashes, for [`hashes_distinct`]; never iterate it.
#[expect(
    clippy::disallowed_types,
    reason = "membership only, never iterated; a deterministic hash"
)]
type Hashes = std::collections::HashSet<u64, BuildHasherDefault<IdHasher>>; // tidy:allow(HashSet) never iterated

/// The hash of [`IdHashMap`]: each word of input is mixed in by a rotation, an exclusive or and a
/// multiplication by an odd constant (the scheme of the Rust compiler's own `FxHasher`), and
/// [`Hasher::finish`] folds the high bits down, which the table's low-bit indexing would
/// otherwise never see.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

/// An odd constant with bits spread across the word (`FxHasher`'s).
const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl IdHasher {
    const fn mix(self, word: u64) -> Self {
        Self((self.0.rotate_left(5) ^ word).wrapping_mul(SEED))
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0_u8; 8];
            word.copy_from_slice(chunk);
            *self = self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // The last 1 to 7 bytes as one little-endian word, read as up to three fixed-size
            // pieces (4, 2, 1 bytes): a copy of a variable length is a call to `memcpy`, which
            // cost more than the rest of hashing a short id.
            let (mut word, mut at) = (0_u64, 0_usize);
            if let Some(&[a, b, c, d]) = rest.get(..4).filter(|_| rest.len() & 4 != 0) {
                word = u64::from(u32::from_le_bytes([a, b, c, d]));
                at = 4;
            }
            if let Some(&[a, b]) = rest.get(at..at + 2).filter(|_| rest.len() & 2 != 0) {
                word |= u64::from(u16::from_le_bytes([a, b])) << (8 * at);
                at += 2;
            }
            if let Some(&a) = rest.get(at).filter(|_| rest.len() & 1 != 0) {
                word |= u64::from(a) << (8 * at);
            }
            // The length too, so that "a" and "a\0" differ.
            *self = self.mix(word ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u64(&mut self, i: u64) {
        *self = self.mix(i);
    }

    fn write_u8(&mut self, i: u8) {
        *self = self.mix(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        *self = self.mix(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, BuildHasherDefault};

    use std::hash::Hasher;

    use super::{IdHasher, hashes_distinct, with_capacity};

    fn hash(s: &str) -> u64 {
        BuildHasherDefault::<IdHasher>::default().hash_one(s)
    }

    #[test]
    fn the_hash_is_fixed_and_tells_close_ids_apart() {
        // Fixed: the same on every run (no random keys).
        assert_eq!(hash("call_1"), hash("call_1"));
        let ids: Vec<String> = (0..10_000).map(|i| format!("t{i}")).collect();
        let mut hashes: Vec<u64> = ids.iter().map(|s| hash(s)).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(
            hashes.len(),
            ids.len(),
            "no two of 10,000 sequential ids collide"
        );
        assert_ne!(hash("a"), hash("a\0"));
        assert_ne!(hash(""), hash("\0"));
    }

    #[test]
    fn the_last_bytes_are_read_as_one_little_endian_word() {
        // The rest of an id after its whole words, 1 to 7 bytes, read byte by byte here.
        let text = "abcdefghijklmnopqrstuvw";
        for len in 0..=text.len() {
            let bytes = &text.as_bytes()[..len];
            let mut expected = IdHasher::default();
            let mut chunks = bytes.chunks_exact(8);
            for chunk in &mut chunks {
                expected = expected.mix(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
            }
            let rest = chunks.remainder();
            if !rest.is_empty() {
                let word = rest
                    .iter()
                    .enumerate()
                    .fold(0_u64, |w, (i, &b)| w | (u64::from(b) << (8 * i)));
                expected = expected.mix(word ^ ((rest.len() as u64) << 56));
            }
            let mut got = IdHasher::default();
            got.write(bytes);
            assert_eq!(got.finish(), expected.finish(), "{len} bytes");
        }
    }

    #[test]
    fn distinct_hashes_are_told_from_a_repeat() {
        let ids: Vec<String> = (0..1_000).map(|i| format!("t{i}")).collect();
        assert!(hashes_distinct(ids.iter().map(String::as_str)));
        assert!(!hashes_distinct(["a", "b", "a"].into_iter()));
        assert!(hashes_distinct(std::iter::empty()));
    }

    #[test]
    fn the_map_finds_every_id_and_no_other() {
        let ids: Vec<String> = (0..1_000).map(|i| format!("call_{i}")).collect();
        let mut map = with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            assert!(map.insert(id.as_str(), i).is_none());
        }
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(map.get(id.as_str()), Some(&i));
        }
        assert_eq!(map.get("call_1000"), None);
    }
}

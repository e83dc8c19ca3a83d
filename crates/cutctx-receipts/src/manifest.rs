//! The drop manifest: pre minus post, as a multiset of digests, in pre order.
//!
//! ```text
//! remaining = Counter(post digests)
//! for each pre digest d (size n), in pre order:
//!     if remaining[d] > 0: remaining[d] -= 1          kept
//!     else:                dropped.append(d); bytes += n
//! introduced       = sum(remaining)                    what post has that pre had not
//! introduced_bytes = sum(count × size of d's first occurrence in post)
//! ```
//!
//! Items are compared only by digest; post order changes the post digest, never the drop set.

use std::collections::BTreeMap;

use crate::digest::ContentDigest;

/// The drop set and the introduced remainder of one compaction.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DropManifest {
    /// Digests of the dropped occurrences, in pre order.
    pub dropped: Vec<String>,
    /// Sum of the pre sizes of the dropped occurrences.
    pub dropped_bytes: u64,
    /// Post items left unmatched.
    pub introduced_count: u64,
    /// Their bytes: count × the size of each digest's first occurrence in post.
    pub introduced_bytes: u64,
}

/// Computes the manifest of `pre` → `post`.
#[must_use]
pub fn compute(pre: &ContentDigest, post: &ContentDigest) -> DropManifest {
    let mut remaining: BTreeMap<&str, u64> = BTreeMap::new();
    let mut size_by_digest: BTreeMap<&str, u64> = BTreeMap::new();
    for (d, &n) in post.items.iter().zip(&post.sizes) {
        *remaining.entry(d).or_insert(0) += 1;
        size_by_digest.entry(d).or_insert(n);
    }
    let mut out = DropManifest::default();
    for (d, &n) in pre.items.iter().zip(&pre.sizes) {
        match remaining.get_mut(d.as_str()) {
            Some(left) if *left > 0 => *left -= 1,
            _ => {
                out.dropped.push(d.clone());
                out.dropped_bytes = out.dropped_bytes.saturating_add(n);
            }
        }
    }
    for (d, &count) in &remaining {
        out.introduced_count += count;
        let size = size_by_digest.get(d).copied().unwrap_or(0);
        out.introduced_bytes = out
            .introduced_bytes
            .saturating_add(count.saturating_mul(size));
    }
    out
}

/// Whether two lists hold the same elements with the same multiplicities.
#[must_use]
pub fn same_multiset<T: Ord>(a: &[T], b: &[T]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut x: Vec<&T> = a.iter().collect();
    let mut y: Vec<&T> = b.iter().collect();
    x.sort_unstable();
    y.sort_unstable();
    x == y
}

/// The elements of `a` not matched in `b`, with multiplicity, sorted.
#[must_use]
pub fn multiset_minus(a: &[String], b: &[String]) -> Vec<String> {
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for d in b {
        *left.entry(d).or_insert(0) += 1;
    }
    let mut out: Vec<String> = a
        .iter()
        .filter(|d| match left.get_mut(d.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .cloned()
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(items: &[(&str, u64)]) -> ContentDigest {
        ContentDigest {
            items: items.iter().map(|(d, _)| (*d).to_owned()).collect(),
            sizes: items.iter().map(|(_, n)| *n).collect(),
            whole: String::new(),
            total: items.iter().map(|(_, n)| n).sum(),
        }
    }

    #[test]
    fn duplicates_are_a_multiset() {
        let pre = content(&[("x", 3), ("y", 4), ("x", 3), ("z", 5)]);
        let post = content(&[("s", 2), ("x", 3), ("s", 2), ("q", 9)]);
        let m = compute(&pre, &post);
        assert_eq!(m.dropped, ["y", "x", "z"]);
        assert_eq!(m.dropped_bytes, 12);
        assert_eq!(m.introduced_count, 3);
        assert_eq!(m.introduced_bytes, 13);
        // pre.count - dropped.count == post.count - introduced.count
        assert_eq!(4 - 3, 4 - 3);
        assert_eq!(pre.total - m.dropped_bytes + m.introduced_bytes, post.total);
    }

    #[test]
    fn multiset_helpers() {
        let a = ["a".to_owned(), "b".to_owned(), "a".to_owned()];
        let b = ["b".to_owned(), "a".to_owned(), "a".to_owned()];
        assert!(same_multiset(&a, &b));
        assert!(!same_multiset(&a, &b[..2]));
        assert_eq!(multiset_minus(&a, &b[..2]), ["a"]);
    }
}

//! The search for the bytes that end a JSON string's plain run: `"`, `\`, and (when asked) a
//! control byte.
//!
//! String contents are most of a request's bytes, so the readers that walk them by hand (the
//! request document's record reader, the provider formats' message reader) spend their time
//! here: one search, shared, rather than one per reader. The first 32 bytes are searched eight
//! at a time, which is all a key, an id or a role takes. Past them, quotes and backslashes are
//! found by `memchr`, which picks the widest vector instructions the processor has when the
//! program starts (safe Rust reaches no further than the baseline's), and which serde_json
//! already builds in. Control bytes, which no JSON string holds raw, are rare: they are looked
//! for only in the run before the quote or backslash, 32 bytes at a time by a loop the compiler
//! vectorizes. `cargo bench -p cutctx-json --bench string_walk` measures each walk against one
//! SHA-256 pass.

/// How many bytes a string's first block holds (searched a word at a time before any vector
/// search starts), and how many [`first_control`] tests together: two of the vector registers
/// every x86-64 and AArch64 processor has, which the compiler compares at once (no `unsafe`, no
/// target-specific code: the loop is written so that it vectorizes).
const BLOCK: usize = 32;

/// Whether `block` holds a byte below 0x20. Written without an early exit, so that it
/// compiles to a few vector compares and one test.
#[inline]
fn has_control(block: &[u8; BLOCK]) -> bool {
    let mut control = false;
    for &c in block {
        control |= c < 0x20;
    }
    control
}

/// The offset of the first `"`, `\` or (with `controls`) control byte of `b` when it lies in
/// its first 32 bytes, eight bytes at a time: most strings are short (keys, ids, roles), and
/// starting up a vector search costs more than they take.
#[inline]
pub(crate) fn special_in_first_block(b: &[u8], controls: bool) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    const SPACES: u64 = u64::from_le_bytes([0x20; 8]);
    // The high bit of each byte of `x` below the bytes of `n` (each at most 0x80), exact for
    // the lowest such byte, which is the one sought: borrows only run upward, and the word is
    // read little-endian, first byte lowest.
    let below = |x: u64, n: u64| x.wrapping_sub(n) & !x & HIGHS;
    let head = b.get(..BLOCK).unwrap_or(b);
    let mut words = head.chunks_exact(8);
    let mut offset = 0;
    for word in &mut words {
        let x = u64::from_le_bytes(<[u8; 8]>::try_from(word).ok()?);
        let mut found = below(x ^ QUOTES, ONES) | below(x ^ BACKSLASHES, ONES);
        if controls {
            found |= below(x, SPACES);
        }
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || (controls && c < 0x20))
        .map(|p| offset + p)
}

/// The offset of the first byte below 0x20 (a control byte, which a JSON string may not hold
/// raw) in `b`, `None` when there is none: 32 bytes at a time, the tail padded to a block, then
/// byte by byte in the block that holds it.
///
/// ```
/// use cutctx_json::first_control;
/// let b = [b"x".repeat(70), b"\t".to_vec()].concat();
/// assert_eq!(first_control(&b), Some(70));
/// assert_eq!(first_control(b"\"quotes\" and \\ are not controls"), None);
/// ```
#[inline]
#[must_use]
pub fn first_control(b: &[u8]) -> Option<usize> {
    let mut blocks = b.chunks_exact(BLOCK);
    let mut offset = 0;
    let mut found = false;
    for block in &mut blocks {
        if <&[u8; BLOCK]>::try_from(block).is_ok_and(has_control) {
            found = true;
            break;
        }
        offset += BLOCK;
    }
    if !found {
        // Most strings are short (keys, ids, roles): their one block is padded with spaces,
        // so that it too is tested at once rather than a byte at a time.
        let tail = blocks.remainder();
        let mut padded = [b' '; BLOCK];
        padded.get_mut(..tail.len())?.copy_from_slice(tail);
        if !has_control(&padded) {
            return None;
        }
    }
    b.get(offset..)?
        .iter()
        .position(|&c| c < 0x20)
        .map(|p| offset + p)
}

/// The offset of the first `"` or `\` in `b` (with `controls`, of a control byte below 0x20
/// too, which a string may not hold raw); `None` when there is none.
///
/// ```
/// use cutctx_json::first_special;
/// assert_eq!(first_special(b"plain text, then \"", false), Some(17));
/// assert_eq!(first_special(b"a\tb\\", true), Some(1));
/// assert_eq!(first_special(b"a\tb\\", false), Some(3));
/// assert_eq!(first_special(b"nothing", true), None);
/// ```
#[inline]
#[must_use]
pub fn first_special(b: &[u8], controls: bool) -> Option<usize> {
    if let Some(k) = special_in_first_block(b, controls) {
        return Some(k);
    }
    let rest = b.get(BLOCK..)?;
    let quote_or_backslash = memchr::memchr2(b'"', b'\\', rest);
    let found = if controls {
        // A control can only come first in the run before the quote or backslash.
        let run = rest.get(..quote_or_backslash.unwrap_or(rest.len()))?;
        first_control(run).or(quote_or_backslash)
    } else {
        quote_or_backslash
    };
    found.map(|k| BLOCK + k)
}

/// Just past the closing quote of the JSON string whose opening quote is at `open` in `b`,
/// its escapes skipped unchecked (a backslash escapes the byte after it); `None` when the
/// string is not closed.
///
/// ```
/// use cutctx_json::string_end;
/// let b = br#"x "a \"quoted\" \\ word" y"#;
/// assert_eq!(string_end(b, 2), Some(24));
/// assert_eq!(string_end(br#""open \""#, 0), None);
/// ```
#[must_use]
pub fn string_end(b: &[u8], open: usize) -> Option<usize> {
    let mut at = open.checked_add(1)?;
    loop {
        let k = at + memchr::memchr2(b'"', b'\\', b.get(at..)?)?;
        if b[k] == b'"' {
            return Some(k + 1);
        }
        // The byte after a backslash is escaped, whatever it is.
        at = k + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The byte-at-a-time end of the string opening at `open`.
    fn naive_end(b: &[u8], open: usize) -> Option<usize> {
        let mut k = open + 1;
        while let Some(&c) = b.get(k) {
            match c {
                b'"' => return Some(k + 1),
                b'\\' => k += 2,
                _ => k += 1,
            }
        }
        None
    }

    proptest! {
        #[test]
        fn string_end_finds_the_end_as_one_byte_at_a_time_does(
            body in proptest::collection::vec(
                prop_oneof![
                    4 => Just(b'a'),
                    2 => Just(b'\\'),
                    2 => Just(b'"'),
                    1 => Just(b'u'),
                    1 => any::<u8>(),
                ],
                0..40,
            ),
            // Plain runs put before and inside the body, so that its specials fall at every
            // offset of the 32-byte blocks the search skips through.
            lead in 0..100_usize,
            gap in 0..70_usize,
            split in any::<proptest::sample::Index>(),
            open in 0..3_usize,
        ) {
            let mut b = vec![b' '; open];
            b.push(b'"');
            b.extend(std::iter::repeat_n(b'a', lead));
            let cut = split.index(body.len() + 1);
            b.extend(&body[..cut]);
            b.extend(std::iter::repeat_n(b'a', gap));
            b.extend(&body[cut..]);
            prop_assert_eq!(string_end(&b, open), naive_end(&b, open));
        }
    }

    /// The byte-at-a-time answer.
    fn naive(b: &[u8], controls: bool) -> Option<usize> {
        b.iter()
            .position(|&c| c == b'"' || c == b'\\' || (controls && c < 0x20))
    }

    #[test]
    fn every_byte_at_every_offset_is_found_as_one_at_a_time_finds_it() {
        // Past two blocks of 32 and the tail: every offset of each, with a later quote, a
        // later control and a high byte around it that must not change the answer.
        for len in (0..20).chain([31, 32, 33, 63, 64, 65, 71, 72, 79]) {
            for at in 0..len {
                for special in 0..=255_u8 {
                    for later in [b'"', 0x01, 0xff] {
                        let mut b = vec![b'a'; len];
                        b[at] = special;
                        if at + 1 < len {
                            b[at + 1] = 0xff;
                        }
                        if at + 3 < len {
                            b[len - 1] = later;
                        }
                        for controls in [false, true] {
                            assert_eq!(
                                first_special(&b, controls),
                                naive(&b, controls),
                                "{b:?} {controls}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_control_at_every_offset_is_found_as_one_at_a_time_finds_it() {
        // Every byte at every offset of two blocks of 32 and a tail, after a plain lead.
        for lead in [0, 1, BLOCK - 1] {
            for at in 0..2 * BLOCK + 5 {
                for c in 0..=255_u8 {
                    let mut b = vec![b'a'; lead + 2 * BLOCK + 5];
                    b[lead + at] = c;
                    // A second control later must not be taken for the first.
                    b.push(0x01);
                    let naive = b.iter().position(|&c| c < 0x20);
                    assert_eq!(
                        first_control(&b[lead..]),
                        naive.map(|p| p - lead),
                        "{c} at {at}"
                    );
                }
            }
        }
        assert_eq!(first_control(b""), None);
    }
}

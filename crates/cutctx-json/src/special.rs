//! The search for the bytes that end a JSON string's plain run: `"`, `\`, and (when asked) a
//! control byte, a block of 32 bytes at a time while the run lasts, then eight.
//!
//! String contents are most of a request's bytes, so the readers that walk them by hand (the
//! request document's record reader, the provider formats' message reader) spend their time
//! here: one search, shared, rather than one per reader.

/// How many bytes [`skip_plain`] looks at together: two of the vector registers every x86-64
/// and AArch64 processor has, which the compiler compares at once (no `unsafe`, no
/// target-specific code: the loop is written so that it vectorizes).
const BLOCK: usize = 32;

/// Whether `block` holds no `"`, no `\` and (with `controls`) no byte below 0x20. Written
/// without an early exit, so that it compiles to a few vector compares and one test.
#[inline]
fn plain_block(block: &[u8; BLOCK], controls: bool) -> bool {
    let mut special = false;
    for &c in block {
        special |= (c == b'"') | (c == b'\\') | (controls & (c < 0x20));
    }
    !special
}

/// The first position at or after `at` that does not begin a plain block of `b` (one holding
/// no byte [`first_special`] looks for): the search for the next special byte can start
/// there. A tool result is mostly such blocks, taken 32 bytes at a time.
///
/// ```
/// use cutctx_json::skip_plain;
/// let b = [b"x".repeat(70), b"\"".to_vec()].concat();
/// assert_eq!(skip_plain(&b, 0, true), 64); // two plain blocks; the third holds the quote
/// assert_eq!(skip_plain(&b, 50, true), 50);
/// assert_eq!(skip_plain(b"a\tb", 0, false), 0); // shorter than a block
/// ```
#[inline]
#[must_use]
pub fn skip_plain(b: &[u8], mut at: usize, controls: bool) -> usize {
    while let Some(block) = b
        .get(at..at.saturating_add(BLOCK))
        .and_then(|s| <&[u8; BLOCK]>::try_from(s).ok())
    {
        if !plain_block(block, controls) {
            break;
        }
        at += BLOCK;
    }
    at
}

/// The offset of the first `"` or `\` in `b` (with `controls`, of a control byte below 0x20
/// too, which a string may not hold raw), 32 bytes at a time through a plain run, then eight;
/// `None` when there is none.
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
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    const SPACES: u64 = u64::from_le_bytes([0x20; 8]);
    // The high bit of each byte of `x` below the bytes of `n` (each at most 0x80), exact for
    // the lowest such byte, which is the one sought: borrows only run upward, and the word is
    // read little-endian, first byte lowest.
    let below = |x: u64, n: u64| x.wrapping_sub(n) & !x & HIGHS;
    let mut offset = skip_plain(b, 0, controls);
    let mut chunks = b[offset..].chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let mut found = below(x ^ QUOTES, ONES) | below(x ^ BACKSLASHES, ONES);
        if controls {
            found |= below(x, SPACES);
        }
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || (controls && c < 0x20))
        .map(|p| offset + p)
}

/// Flags each byte of `word` (eight bytes read little-endian, first byte lowest) that is `"`
/// or `\` (with `controls`, or below 0x20): bit `8k + 7` for byte `k`. Exact for every byte,
/// not only the first, so that a reader may take every flagged byte of a word in turn.
///
/// ```
/// use cutctx_json::special_mask;
/// let word = u64::from_le_bytes(*b"a\"b\\c\nde");
/// assert_eq!(special_mask(word, false), 0x80 << 8 | 0x80 << 24);
/// assert_eq!(special_mask(word, true), 0x80 << 8 | 0x80 << 24 | 0x80 << 40);
/// ```
#[inline]
#[must_use]
pub const fn special_mask(word: u64, controls: bool) -> u64 {
    const LOW7: u64 = u64::from_le_bytes([0x7f; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    const TOP3: u64 = u64::from_le_bytes([0xe0; 8]);
    // The high bit of each zero byte of `y`: adding 0x7f to the low seven bits carries into
    // the high bit unless they are all zero, and no carry crosses a byte.
    const fn zeros(y: u64) -> u64 {
        !(((y & LOW7) + LOW7) | y | LOW7)
    }
    let mut found = zeros(word ^ QUOTES) | zeros(word ^ BACKSLASHES);
    if controls {
        // A byte below 0x20 has its top three bits clear.
        found |= zeros(word & TOP3);
    }
    found
}

/// Just past the closing quote of the JSON string whose opening quote is at `open` in `b`,
/// its escapes skipped unchecked (a backslash escapes the byte after it); `None` when the
/// string is not closed. Many escapes cost little: each word is read once, and every quote
/// and backslash in it taken in turn.
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
    // The first byte that is not escaped: the one after a backslash is.
    let mut free = at;
    loop {
        // Never inside an escape here: `at` is at or past `free`.
        at = skip_plain(b, at, false);
        let Some(chunk) = b.get(at..at + 8) else {
            break;
        };
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let mut found = special_mask(u64::from_le_bytes(word), false);
        while found != 0 {
            let k = at + (found.trailing_zeros() / 8) as usize;
            found &= found - 1;
            if k < free {
                continue;
            }
            if b[k] == b'"' {
                return Some(k + 1);
            }
            free = k + 2;
        }
        at = (at + 8).max(free);
    }
    let mut k = at.max(free);
    while let Some(&c) = b.get(k) {
        match c {
            b'"' => return Some(k + 1),
            b'\\' => k += 2,
            _ => k += 1,
        }
    }
    None
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

    #[test]
    fn the_mask_flags_exactly_the_special_bytes_whatever_their_neighbours() {
        for special in 0..=255_u8 {
            for neighbour in [0_u8, b'"', b'\\', 0x1f, 0x20, 0x7f, 0x80, 0xff] {
                for at in 0..8 {
                    let mut bytes = [neighbour; 8];
                    bytes[at] = special;
                    for controls in [false, true] {
                        let expected = bytes.iter().enumerate().fold(0, |m, (k, &c)| {
                            let hit = c == b'"' || c == b'\\' || (controls && c < 0x20);
                            m | (u64::from(hit) << (8 * k + 7))
                        });
                        let mask = special_mask(u64::from_le_bytes(bytes), controls);
                        assert_eq!(mask, expected, "{bytes:?} {controls}");
                    }
                }
            }
        }
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
        // Past two blocks of 32, then the words and the tail: every offset of each.
        for len in (0..20).chain([31, 32, 33, 63, 64, 65, 71, 72, 79]) {
            for at in 0..len {
                for special in 0..=255_u8 {
                    let mut b = vec![b'a'; len];
                    b[at] = special;
                    // A high byte after it must not hide it (borrows run upward only).
                    if at + 1 < len {
                        b[at + 1] = 0xff;
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

    #[test]
    fn plain_blocks_are_skipped_as_one_byte_at_a_time_would_skip_them() {
        // The blocks from `at`, each taken when none of its bytes is special.
        let naive_skip = |b: &[u8], mut at: usize, controls: bool| {
            while b.len() >= at + BLOCK && naive(&b[at..at + BLOCK], controls).is_none() {
                at += BLOCK;
            }
            at
        };
        for special in 0..=255_u8 {
            for at in 0..2 * BLOCK + 5 {
                let mut b = vec![b'a'; 2 * BLOCK + 5];
                b[at] = special;
                for from in [0, 1, 5, BLOCK - 1, BLOCK] {
                    for controls in [false, true] {
                        assert_eq!(
                            skip_plain(&b, from, controls),
                            naive_skip(&b, from, controls),
                            "{special} at {at} from {from} {controls}"
                        );
                    }
                }
            }
        }
        assert_eq!(
            skip_plain(b"short", 9, true),
            9,
            "from past the end, nothing to skip"
        );
    }
}

//! The search for the bytes that end a JSON string's plain run: `"`, `\`, and (when asked) a
//! control byte, eight bytes at a time.
//!
//! String contents are most of a request's bytes, so the readers that walk them by hand (the
//! request document's record reader, the provider formats' message reader) spend their time
//! here: one search, shared, rather than one per reader.

/// The offset of the first `"` or `\` in `b` (with `controls`, of a control byte below 0x20
/// too, which a string may not hold raw), eight bytes at a time; `None` when there is none.
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
    let mut chunks = b.chunks_exact(8);
    let mut offset = 0;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-at-a-time answer.
    fn naive(b: &[u8], controls: bool) -> Option<usize> {
        b.iter()
            .position(|&c| c == b'"' || c == b'\\' || (controls && c < 0x20))
    }

    #[test]
    fn every_byte_at_every_offset_is_found_as_one_at_a_time_finds_it() {
        for len in 0..20 {
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
}

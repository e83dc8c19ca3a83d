//! Lower-case hex, as Python's `hashlib` `hexdigest()` writes it.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lower-case hex of `bytes`.
///
/// ```
/// assert_eq!(cutctx_json::hex(&[0x00, 0xab, 0x7f]), "00ab7f");
/// ```
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Appends lower-case hex of `bytes` to `out`, for callers building a larger string.
///
/// ```
/// let mut s = String::from("sha256:");
/// cutctx_json::push_hex(&mut s, &[0xff, 0x01]);
/// assert_eq!(s, "sha256:ff01");
/// ```
pub fn push_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_two_lower_case_digits() {
        let all: Vec<u8> = (0..=255).collect();
        let text = hex(&all);
        assert_eq!(text.len(), 512);
        assert_eq!(&text[..6], "000102");
        assert_eq!(&text[text.len() - 4..], "feff");
        assert!(!text.bytes().any(|b| b.is_ascii_uppercase()));
    }
}

//! Where written JSON goes: a `String`, a `Vec<u8>`, or a hasher that implements [`Sink`].

use crate::JsonError;
use crate::escape;

/// A destination for JSON text.
///
/// Writers only ever hand a sink valid UTF-8, so a `String` is a sink without any check. Sinks
/// that own a byte buffer override [`Sink::put_escaped`] to escape straight into it.
///
/// ```
/// use cutctx_json::Sink;
/// let mut out = String::new();
/// out.put("\"");
/// out.put_escaped("a\tb");
/// out.put("\"");
/// assert_eq!(out, "\"a\\tb\"");
/// ```
pub trait Sink {
    /// Appends `text` as it is.
    fn put(&mut self, text: &str);

    /// Appends `text` with JSON's escapes applied, no quotes.
    fn put_escaped(&mut self, text: &str) {
        escape::for_each_piece(text, |piece| self.put(piece));
    }

    /// Appends generalized UTF-8 (valid UTF-8 except for lone surrogates in their three-byte
    /// form, as Python's `surrogatepass` encodes them) with JSON's escapes applied.
    ///
    /// # Errors
    ///
    /// [`JsonError::LoneSurrogate`] when `bytes` is not valid UTF-8 and the sink holds only
    /// valid UTF-8, as this default does; byte sinks override it and never fail.
    fn put_escaped_surrogatepass(&mut self, bytes: &[u8]) -> Result<(), JsonError> {
        let text = std::str::from_utf8(bytes).map_err(|_| JsonError::LoneSurrogate)?;
        self.put_escaped(text);
        Ok(())
    }
}

impl Sink for String {
    #[inline]
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, text: &str) {
        self.extend_from_slice(text.as_bytes());
    }

    fn put_escaped(&mut self, text: &str) {
        escape::escape_into_vec(self, text.as_bytes());
    }

    fn put_escaped_surrogatepass(&mut self, bytes: &[u8]) -> Result<(), JsonError> {
        escape::escape_into_vec(self, bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_sink_refuses_lone_surrogates_and_a_byte_sink_keeps_them() {
        let surrogate = b"a\xed\xa0\x80\n";
        let mut text = String::new();
        assert_eq!(
            text.put_escaped_surrogatepass(surrogate),
            Err(JsonError::LoneSurrogate)
        );
        assert!(text.is_empty());
        let mut bytes = Vec::new();
        assert_eq!(bytes.put_escaped_surrogatepass(surrogate), Ok(()));
        assert_eq!(bytes, b"a\xed\xa0\x80\\n");
        assert_eq!(text.put_escaped_surrogatepass(b"ok\n"), Ok(()));
        assert_eq!(text, "ok\\n");
    }
}

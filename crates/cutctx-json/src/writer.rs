//! The one JSON writer, with Python's `json.dumps` arguments as a [`Style`].

use crate::{Digits, JsonError, Sink, py_float_repr};

/// What a style does with negative zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegativeZero {
    /// Written `0.0`: the reference's canonical form.
    Normalise,
    /// Written `-0.0`, as Python writes it.
    Keep,
}

/// What a style does with NaN and the infinities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonFinite {
    /// Refused with [`JsonError::NonFinite`]: `allow_nan=False`.
    Refuse,
    /// Written `NaN`, `Infinity`, `-Infinity`: `allow_nan=True`, Python's default.
    Literal,
}

/// What a style does with a lone surrogate (text Python holds that strict UTF-8 cannot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoneSurrogates {
    /// Refused with [`JsonError::LoneSurrogate`]: `.encode("utf-8")`.
    Refuse,
    /// Written as their three-byte form: `.encode("utf-8", "surrogatepass")`. Only a byte
    /// sink can hold them.
    Pass,
}

/// The arguments of one `json.dumps` call and of the encoding after it, as far as they
/// change bytes.
///
/// All styles here use `ensure_ascii=False`: non-ASCII is written raw. Key order is the
/// caller's: a writer of a map whose style has `sort_keys` hands the writer its keys sorted
/// by code point.
///
/// ```
/// use cutctx_json::{Style, Writer};
/// let mut line = String::new();
/// let mut w = Writer::new(&mut line, Style::LINE);
/// w.raw("{");
/// w.str("k");
/// w.key_separator();
/// w.f64(-0.0)?;
/// w.raw("}");
/// assert_eq!(line, "{\"k\": -0.0}");
/// # Ok::<(), cutctx_json::JsonError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Whether object keys go in code point order (`sort_keys=True`).
    pub sort_keys: bool,
    /// Between items of an array or object: `,` or `, `.
    pub item_separator: &'static str,
    /// Between a key and its value: `:` or `: `.
    pub key_separator: &'static str,
    /// What `-0.0` becomes.
    pub negative_zero: NegativeZero,
    /// What NaN and the infinities become.
    pub non_finite: NonFinite,
    /// What lone surrogates become.
    pub lone_surrogates: LoneSurrogates,
}

impl Style {
    /// The reference's canonical JSON: `json.dumps(v, sort_keys=True, ensure_ascii=False,
    /// separators=(",", ":"), allow_nan=False)`, with `-0.0` written `0.0`.
    pub const CANONICAL: Self = Self {
        sort_keys: true,
        item_separator: ",",
        key_separator: ":",
        negative_zero: NegativeZero::Normalise,
        non_finite: NonFinite::Refuse,
        lone_surrogates: LoneSurrogates::Refuse,
    };

    /// arcaeon's json-c14n v1: as [`Style::CANONICAL`], but `-0.0` kept.
    pub const C14N: Self = Self {
        negative_zero: NegativeZero::Keep,
        ..Self::CANONICAL
    };

    /// arcaeon's chain body: `json.dumps(v, ensure_ascii=False, sort_keys=True)`, the default
    /// `", "` and `": "` separators, NaN and the infinities written as Python writes them,
    /// encoded with `surrogatepass`.
    pub const CHAIN_BODY: Self = Self {
        sort_keys: true,
        item_separator: ", ",
        key_separator: ": ",
        negative_zero: NegativeZero::Keep,
        non_finite: NonFinite::Literal,
        lone_surrogates: LoneSurrogates::Pass,
    };

    /// arcaeon's ledger line: `json.dumps(v, ensure_ascii=False)` in insertion order, with NaN
    /// and the infinities refused (Python would write invalid JSON), encoded strictly.
    pub const LINE: Self = Self {
        sort_keys: false,
        non_finite: NonFinite::Refuse,
        lone_surrogates: LoneSurrogates::Refuse,
        ..Self::CHAIN_BODY
    };
}

/// Writes JSON values in one [`Style`] into a [`Sink`]. Structure (`{`, `[`, and the keys of
/// fixed shapes) goes through [`Writer::raw`]; the writer supplies escaping, numbers and the
/// style's separators.
///
/// ```
/// use cutctx_json::{Style, Writer};
/// let mut out = Vec::new();
/// let mut w = Writer::new(&mut out, Style::CHAIN_BODY);
/// w.str_list(["a", "b\n"]);
/// assert_eq!(out, b"[\"a\", \"b\\n\"]");
/// ```
#[derive(Debug)]
pub struct Writer<'s, S: Sink + ?Sized> {
    out: &'s mut S,
    style: Style,
}

impl<'s, S: Sink + ?Sized> Writer<'s, S> {
    /// A writer appending to `out` in `style`.
    pub fn new(out: &'s mut S, style: Style) -> Self {
        Self { out, style }
    }

    /// The writer's style.
    #[must_use]
    pub const fn style(&self) -> Style {
        self.style
    }

    /// Appends `text` as it is: punctuation and pre-written keys.
    #[inline]
    pub fn raw(&mut self, text: &str) {
        self.out.put(text);
    }

    /// The style's separator between items.
    #[inline]
    pub fn item_separator(&mut self) {
        self.out.put(self.style.item_separator);
    }

    /// The style's separator between a key and its value.
    #[inline]
    pub fn key_separator(&mut self) {
        self.out.put(self.style.key_separator);
    }

    /// A string literal, quotes included.
    #[inline]
    pub fn str(&mut self, text: &str) {
        self.out.put("\"");
        self.out.put_escaped(text);
        self.out.put("\"");
    }

    /// A string literal of generalized UTF-8: valid UTF-8, or with lone surrogates in their
    /// three-byte form (see [`Sink::put_escaped_surrogatepass`]).
    ///
    /// # Errors
    ///
    /// [`JsonError::LoneSurrogate`] when `bytes` holds a lone surrogate and the style refuses
    /// them or the sink cannot hold them. When the sink refuses, its output ends in an
    /// unfinished literal, to be discarded with the error.
    ///
    /// ```
    /// use cutctx_json::{JsonError, Style, Writer};
    /// let lone = b"\xed\xa0\x80";
    /// let mut body = Vec::new();
    /// Writer::new(&mut body, Style::CHAIN_BODY).str_generalized(lone)?;
    /// assert_eq!(body, b"\"\xed\xa0\x80\"");
    /// let mut c14n = Vec::new();
    /// let refused = Writer::new(&mut c14n, Style::C14N).str_generalized(lone);
    /// assert_eq!(refused, Err(JsonError::LoneSurrogate));
    /// # Ok::<(), JsonError>(())
    /// ```
    pub fn str_generalized(&mut self, bytes: &[u8]) -> Result<(), JsonError> {
        if let Ok(text) = std::str::from_utf8(bytes) {
            self.str(text);
            return Ok(());
        }
        if self.style.lone_surrogates == LoneSurrogates::Refuse {
            return Err(JsonError::LoneSurrogate);
        }
        self.out.put("\"");
        self.out.put_escaped_surrogatepass(bytes)?;
        self.out.put("\"");
        Ok(())
    }

    /// A string literal, or `null`.
    pub fn opt_str(&mut self, text: Option<&str>) {
        match text {
            Some(text) => self.str(text),
            None => self.null(),
        }
    }

    /// `null`.
    pub fn null(&mut self) {
        self.out.put("null");
    }

    /// `true` or `false`.
    pub fn bool(&mut self, b: bool) {
        self.out.put(if b { "true" } else { "false" });
    }

    /// An unsigned integer.
    pub fn u64(&mut self, n: u64) {
        self.out.put(Digits::new().of(n));
    }

    /// A signed integer.
    pub fn i64(&mut self, n: i64) {
        self.out.put(Digits::new().of_signed(n));
    }

    /// A float as Python writes it in this style.
    ///
    /// # Errors
    ///
    /// [`JsonError::NonFinite`] for NaN or an infinity when the style refuses them.
    pub fn f64(&mut self, value: f64) -> Result<(), JsonError> {
        let value = match self.style.negative_zero {
            // Adding zero turns -0.0 into 0.0 and leaves every other value alone.
            NegativeZero::Normalise => value + 0.0,
            NegativeZero::Keep => value,
        };
        match py_float_repr(value) {
            Ok(text) => self.out.put(&text),
            Err(refused) => match self.style.non_finite {
                NonFinite::Refuse => return Err(refused),
                NonFinite::Literal if value.is_nan() => self.out.put("NaN"),
                NonFinite::Literal if value > 0.0 => self.out.put("Infinity"),
                NonFinite::Literal => self.out.put("-Infinity"),
            },
        }
        Ok(())
    }

    /// An array of `items`, each written by `item`, separated as the style separates them.
    ///
    /// ```
    /// use cutctx_json::{Style, Writer};
    /// let mut out = String::new();
    /// Writer::new(&mut out, Style::CANONICAL).list([1_u64, 2], |w, n| w.u64(n));
    /// assert_eq!(out, "[1,2]");
    /// ```
    pub fn list<T>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        mut item: impl FnMut(&mut Self, T),
    ) {
        self.out.put("[");
        for (i, x) in items.into_iter().enumerate() {
            if i > 0 {
                self.item_separator();
            }
            item(self, x);
        }
        self.out.put("]");
    }

    /// An array of strings.
    pub fn str_list<'a>(&mut self, items: impl IntoIterator<Item = &'a str>) {
        self.list(items, |w, s| w.str(s));
    }

    /// An object of string values, its entries given in the order the style wants (for a
    /// sorted style, by code point, as a `BTreeMap<String, _>` iterates).
    pub fn str_map<'a>(&mut self, entries: impl IntoIterator<Item = (&'a str, &'a str)>) {
        self.out.put("{");
        let mut previous: Option<&str> = None;
        for (k, v) in entries {
            debug_assert!(
                !self.style.sort_keys || previous.is_none_or(|p| p < k),
                "keys of a sorted style come in code point order"
            );
            if previous.is_some() {
                self.item_separator();
            }
            previous = Some(k);
            self.str(k);
            self.key_separator();
            self.str(v);
        }
        self.out.put("}");
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn float(style: Style, f: f64) -> Result<String, JsonError> {
        let mut out = String::new();
        Writer::new(&mut out, style).f64(f)?;
        Ok(out)
    }

    #[test]
    fn styles_differ_only_where_python_does() {
        assert_eq!(float(Style::CANONICAL, -0.0).as_deref(), Ok("0.0"));
        assert_eq!(float(Style::C14N, -0.0).as_deref(), Ok("-0.0"));
        assert_eq!(float(Style::LINE, -0.0).as_deref(), Ok("-0.0"));
        for style in [Style::CANONICAL, Style::C14N, Style::LINE] {
            assert!(matches!(
                float(style, f64::NAN),
                Err(JsonError::NonFinite(_))
            ));
            assert_eq!(float(style, 1e16).as_deref(), Ok("1e+16"));
        }
        assert_eq!(float(Style::CHAIN_BODY, f64::NAN).as_deref(), Ok("NaN"));
        assert_eq!(
            float(Style::CHAIN_BODY, f64::INFINITY).as_deref(),
            Ok("Infinity")
        );
        assert_eq!(
            float(Style::CHAIN_BODY, f64::NEG_INFINITY).as_deref(),
            Ok("-Infinity")
        );
    }

    #[test]
    fn separators_follow_the_style() {
        let write = |style| {
            let mut out = String::new();
            let mut w = Writer::new(&mut out, style);
            w.raw("[");
            w.str_map([("a", "1"), ("b", "2")]);
            w.item_separator();
            w.str_list(["x", "y"]);
            w.raw("]");
            out
        };
        assert_eq!(write(Style::C14N), r#"[{"a":"1","b":"2"},["x","y"]]"#);
        assert_eq!(write(Style::LINE), r#"[{"a": "1", "b": "2"}, ["x", "y"]]"#);
    }

    #[test]
    fn integers_are_written_in_full() {
        let mut out = String::new();
        let mut w = Writer::new(&mut out, Style::CANONICAL);
        for n in [0, 7, 10, u64::MAX] {
            w.u64(n);
            w.item_separator();
        }
        w.i64(i64::MIN);
        w.item_separator();
        w.i64(-1);
        assert_eq!(out, "0,7,10,18446744073709551615,-9223372036854775808,-1");
    }
}

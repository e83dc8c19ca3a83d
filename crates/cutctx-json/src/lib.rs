//! JSON and repr exactly as CPython writes them.
//!
//! Both the reference's canonical JSON (`json.dumps(v, sort_keys=True, ensure_ascii=False,
//! separators=(",", ":"), allow_nan=False)`) and arcaeon's forms (json-c14n v1, the chain body,
//! a ledger line) are Python's `json` module with different arguments. This crate writes them
//! all with one [`Writer`] whose [`Style`] names the differences, into any [`Sink`]: a
//! `String`, a `Vec<u8>`, or a hasher that implements the trait.
//!
//! * [`escape`]: string escaping as `json.dumps(..., ensure_ascii=False)` writes it: only `"`,
//!   `\` and U+0000..U+001F, the controls without a short name as `\u00xx` in lower-case hex.
//! * [`py_float_repr`]: Python's `repr` of a finite float (`4.0`, `1e-05`, `1e+16`); a
//!   non-finite one is an error, never a default.
//! * [`py_repr_str`]: Python's `repr` of a `str`, printability as CPython decides it.
//! * [`hex`]: lower-case hex.
//! * [`first_special`], [`string_end`], [`check_string`]: a JSON string walked as it is written,
//!   from one quote or backslash to the next.
//! * [`write_turn`]: the seven-key turn object, the one place its shape is written.
//! * [`lex`]: the one lexer every hand-written reader uses: whitespace, a string's end, a
//!   value's end.
//!
//! **Architecture invariant:** pure, and no dependency but `std` and `memchr` (the byte search,
//! see [`first_special`]): no I/O, clock, environment, randomness or hash collections.
//!
//! ```
//! use cutctx_json::{Style, Writer};
//! let mut out = String::new();
//! let mut w = Writer::new(&mut out, Style::C14N);
//! w.raw("[");
//! w.str("é\n");
//! w.item_separator();
//! w.f64(1e16)?;
//! w.raw("]");
//! assert_eq!(out, "[\"é\\n\",1e+16]");
//! # Ok::<(), cutctx_json::JsonError>(())
//! ```
#![forbid(unsafe_code)]

mod checked;
mod digits;
mod error;
pub mod escape;
mod float;
mod hex;
pub mod lex;
mod repr;
mod sink;
mod special;
mod turn;
mod unescape;
mod writer;

pub use checked::{CheckedString, check_string};
pub use digits::Digits;
pub use error::JsonError;
pub use float::py_float_repr;
pub use hex::{hex, push_hex};
pub use repr::{py_printable, py_repr, py_repr_str};
pub use sink::Sink;
pub use special::{first_control, first_special, string_end};
pub use turn::{TurnFields, write_turn, write_turn_with};
pub use unescape::{decode_escape, decode_written, escaped_char, is_canonical_escape};
pub use writer::{LoneSurrogates, NegativeZero, NonFinite, Style, Writer};

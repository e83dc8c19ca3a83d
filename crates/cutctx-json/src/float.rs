//! Python's `repr` of a float, which is also how `json.dumps` writes a finite float.

use crate::JsonError;

/// Python's `repr(value)` for a finite float: `4.0`, `0.1`, `1e-05`, `1e+16`, `-0.0`.
///
/// Python prints the shortest digits that round-trip, in positional form when the decimal
/// exponent lies in `-4 <= e < 16`, and in scientific form with a signed, at least two-digit
/// exponent otherwise. Negative zero keeps its sign, as Python's does; callers that want
/// `0.0` (the reference's canonical form) normalise first.
///
/// # Errors
///
/// [`JsonError::NonFinite`] for NaN and the infinities: their text depends on the caller
/// (`nan` for `repr`, `NaN` for `json.dumps`, or a refusal), so none is chosen here.
///
/// ```
/// use cutctx_json::py_float_repr;
/// assert_eq!(py_float_repr(4.0)?, "4.0");
/// assert_eq!(py_float_repr(1e-5)?, "1e-05");
/// assert_eq!(py_float_repr(1e16)?, "1e+16");
/// assert_eq!(py_float_repr(-0.0)?, "-0.0");
/// assert!(py_float_repr(f64::NAN).is_err());
/// # Ok::<(), cutctx_json::JsonError>(())
/// ```
pub fn py_float_repr(value: f64) -> Result<String, JsonError> {
    if !value.is_finite() {
        return Err(JsonError::NonFinite(value));
    }
    if value == 0.0 {
        return Ok(if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .to_owned());
    }
    let (digits, exp) = shortest_digits(value.abs());
    // `decpt`: the value is 0.DIGITS × 10^decpt, Python's own convention.
    let decpt = exp + 1;
    // At most 17 digits, so the cast cannot wrap.
    let ndigits = digits.len() as i32;
    let mut out = String::with_capacity(digits.len() + 8);
    if value < 0.0 {
        out.push('-');
    }
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', decpt.unsigned_abs() as usize));
            out.push_str(&digits);
        } else if decpt >= ndigits {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n(
                '0',
                (decpt - ndigits).unsigned_abs() as usize,
            ));
            out.push_str(".0");
        } else {
            let split = decpt.unsigned_abs() as usize;
            out.push_str(&digits[..split]);
            out.push('.');
            out.push_str(&digits[split..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        if e.unsigned_abs() < 10 {
            out.push('0');
        }
        out.push_str(&e.unsigned_abs().to_string());
    }
    Ok(out)
}

/// The shortest decimal digits of a finite, positive `value` that round-trip, ties broken to
/// even as Python breaks them, and the decimal exponent of the first digit.
fn shortest_digits(value: f64) -> (String, i32) {
    // Rust's `{:e}` gives the shortest digits that round-trip, as `d.ddddde<exp>`. When two
    // such strings are equally close to the exact value, Rust takes the upper one and Python
    // the even one; formatting again at that length rounds exactly, half to even.
    let shortest = format!("{value:e}");
    let (digits, exp) = split_scientific(&shortest);
    let exact = format!("{value:.*e}", digits.len().saturating_sub(1));
    if exact.parse::<f64>().ok() == Some(value) {
        split_scientific(&exact)
    } else {
        (digits, exp)
    }
}

/// The digits and exponent of Rust's `{:e}` form of a positive number (`1.25e-7`).
fn split_scientific(text: &str) -> (String, i32) {
    let mut digits = String::with_capacity(17);
    let mut chars = text.chars();
    for c in chars.by_ref() {
        match c {
            '0'..='9' => digits.push(c),
            'e' => break,
            _ => {}
        }
    }
    let mut exp: i32 = 0;
    let mut negative = false;
    for c in chars {
        match c.to_digit(10) {
            // An `f64`'s decimal exponent has at most three digits: no overflow.
            Some(d) => exp = exp * 10 + d as i32,
            None => negative = c == '-',
        }
    }
    (digits, if negative { -exp } else { exp })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn python_float_repr_forms() {
        let cases: &[(f64, &str)] = &[
            (4.0, "4.0"),
            (0.2, "0.2"),
            (-1.5, "-1.5"),
            (1e-5, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (1.5e-7, "1.5e-07"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
            (1e22, "1e+22"),
            (1e23, "1e+23"),
            (1e100, "1e+100"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (100.0, "100.0"),
            (123_456_789.0, "123456789.0"),
            (1234.5678, "1234.5678"),
            (0.5, "0.5"),
            (2.5, "2.5"),
            (9_007_199_254_740_993.0, "9007199254740992.0"),
            // Exact ties (each sum is exact), where Python takes the even digit.
            (-75_923_748_224_468.0 - 0.125, "-75923748224468.12"),
            (603_329_982_351_490.0 + 0.25, "603329982351490.2"),
            (27_078_007_198_020.0 + 0.8125, "27078007198020.812"),
        ];
        for (v, want) in cases {
            assert_eq!(py_float_repr(*v).as_deref(), Ok(*want), "repr of {v:?}");
        }
    }

    #[test]
    fn non_finite_values_are_errors() {
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(
                matches!(py_float_repr(v), Err(JsonError::NonFinite(_))),
                "{v}"
            );
        }
    }

    proptest! {
        #[test]
        fn float_repr_round_trips(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
            let text = py_float_repr(f).expect("finite");
            let back: f64 = text.parse().expect("python repr parses");
            prop_assert_eq!(back.to_bits(), f.to_bits());
            prop_assert!(text.contains('.') || text.contains('e'));
        }
    }
}

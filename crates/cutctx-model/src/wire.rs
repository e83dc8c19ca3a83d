//! Strict wire forms: integers that are integers, objects that are objects.
//!
//! `serde`'s derived deserializers accept a JSON array for a struct (fields by position) and,
//! through `serde_json`, read a wide integer by scanning digits, so `1.0` surfaces as a syntax
//! error. The request document is stricter than that: [`WireInt`] takes only a JSON integer,
//! and [`ObjectOnly`] only a JSON object, each with a type error (a validation error, not an
//! input error) otherwise.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Unexpected, Visitor};

/// A JSON integer of any sign that fits 128 bits; a float such as `1.0` is refused.
///
/// Integers beyond 64 bits arrive from `serde_json` as floats and are refused too, with a
/// message saying an integer was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WireInt(pub i128);

impl<'de> Deserialize<'de> for WireInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = WireInt;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<WireInt, E> {
                Ok(WireInt(i128::from(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<WireInt, E> {
                Ok(WireInt(i128::from(v)))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<WireInt, E> {
                Ok(WireInt(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<WireInt, E> {
                Err(E::invalid_type(Unexpected::Float(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

/// `T`, read only from a JSON object (never from an array of its fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = ObjectOnly<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectOnly<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(ObjectOnly)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct P {
        a: WireInt,
    }

    #[test]
    fn integers_only() {
        assert_eq!(
            serde_json::from_str::<WireInt>("-3").expect("int"),
            WireInt(-3)
        );
        assert_eq!(
            serde_json::from_str::<WireInt>("18446744073709551615").expect("u64"),
            WireInt(i128::from(u64::MAX))
        );
        for bad in [
            "1.0",
            "1e3",
            "\"1\"",
            "null",
            "true",
            "18446744073709551616",
        ] {
            let e = serde_json::from_str::<WireInt>(bad).expect_err(bad);
            assert!(e.is_data(), "{bad}: {e}");
        }
    }

    #[test]
    fn objects_only() {
        let ok: ObjectOnly<P> = serde_json::from_str(r#"{"a": 1}"#).expect("object");
        assert_eq!(ok.0, P { a: WireInt(1) });
        let e = serde_json::from_str::<ObjectOnly<P>>("[1]").expect_err("array");
        assert!(e.is_data());
        let e =
            serde_json::from_str::<ObjectOnly<P>>(r#"{"a": 1, "b": 2}"#).expect_err("unknown key");
        assert!(e.to_string().contains("unknown field"));
    }
}

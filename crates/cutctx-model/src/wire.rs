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

/// A JSON string, and nothing else; the error for anything else names only its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireStr(pub String);

impl<'de> Deserialize<'de> for WireStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = WireStr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<WireStr, E> {
                Ok(WireStr(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<WireStr, E> {
                Ok(WireStr(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// A JSON string read straight into shared text: one allocation and one copy, from the input
/// itself or from the parser's buffer for a string with escapes, never through a `String`.
///
/// It reads and refuses exactly what `String` does (`deserialize_string`, "expected a
/// string"); only the allocation differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireText(pub std::sync::Arc<str>);

impl Default for WireText {
    /// The empty text, as a missing `content` means.
    fn default() -> Self {
        Self(std::sync::Arc::from(""))
    }
}

impl<'de> Deserialize<'de> for WireText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = WireText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<WireText, E> {
                Ok(WireText(std::sync::Arc::from(v)))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<WireText, E> {
                Ok(WireText(std::sync::Arc::from(v)))
            }
        }
        d.deserialize_string(V)
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

/// A map of strings to strings in which no key repeats (JSON allows it; the last would
/// silently win). Use with `#[serde(deserialize_with = "unique_string_map")]`.
///
/// # Errors
///
/// A type error for anything but an object of strings, and a custom error for a repeated key,
/// which does not repeat the key (keys here are user data).
pub fn unique_string_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<std::collections::BTreeMap<String, String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = std::collections::BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of strings")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = std::collections::BTreeMap::new();
            while let Some((k, v)) = map.next_entry::<String, String>()? {
                if out.insert(k, v).is_some() {
                    return Err(de::Error::custom("an object repeats a key"));
                }
            }
            Ok(out)
        }
    }
    d.deserialize_map(V)
}

/// Any JSON value, refusing an object that repeats a key anywhere inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct UniqueKeys(pub serde_json::Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde_json::{Map, Value};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::String(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
                Ok(Value::String(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Value, D2::Error> {
                UniqueKeys::deserialize(d).map(|u| u.0)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                let mut out = Vec::new();
                while let Some(UniqueKeys(v)) = seq.next_element()? {
                    out.push(v);
                }
                Ok(Value::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
                let mut out = Map::new();
                while let Some((k, UniqueKeys(v))) = map.next_entry::<String, UniqueKeys>()? {
                    if out.insert(k, v).is_some() {
                        return Err(de::Error::custom("an object repeats a key"));
                    }
                }
                Ok(Value::Object(out))
            }
        }
        d.deserialize_any(V).map(UniqueKeys)
    }
}

/// Python's type name for a JSON value (`"NoneType"`, `"bool"`, `"int"`, `"float"`, `"str"`,
/// `"list"`, `"dict"`), for messages that mirror the reference's.
///
/// ```
/// use cutctx_model::wire::python_type_name;
/// assert_eq!(python_type_name(&serde_json::json!(1.5)), "float");
/// assert_eq!(python_type_name(&serde_json::json!({})), "dict");
/// ```
#[must_use]
pub fn python_type_name(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// What an error's details may show of a value given where another type belongs: a number,
/// boolean or null as it is; anything that may hold text only by its type name, since text
/// here could be anything, turn content included.
///
/// ```
/// use cutctx_model::wire::shown_in_details;
/// assert_eq!(shown_in_details(&serde_json::json!(3)), serde_json::json!(3));
/// assert_eq!(shown_in_details(&serde_json::json!("secret")), serde_json::json!("str"));
/// ```
#[must_use]
pub fn shown_in_details(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => v.clone(),
        _ => Value::from(python_type_name(v)),
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
    fn repeated_keys_are_refused_without_naming_them() {
        #[derive(Debug, serde::Deserialize)]
        struct M {
            #[serde(deserialize_with = "unique_string_map")]
            #[expect(dead_code, reason = "only parsed")]
            m: std::collections::BTreeMap<String, String>,
        }
        let e = serde_json::from_str::<M>(r#"{"m": {"SECRET": "a", "SECRET": "b"}}"#)
            .expect_err("repeat");
        assert!(e.is_data() && !e.to_string().contains("SECRET"), "{e}");
        let e = serde_json::from_str::<UniqueKeys>(r#"[{"a": {"b": 1, "b": 2}}]"#)
            .expect_err("nested repeat");
        assert!(e.is_data());
        let ok: UniqueKeys =
            serde_json::from_str(r#"{"a": [1, 2.5, "x", null, true]}"#).expect("no repeat");
        assert_eq!(ok.0, serde_json::json!({"a": [1, 2.5, "x", null, true]}));
    }

    #[test]
    fn shared_text_reads_as_a_string_does() {
        for text in [r#""plain""#, r#""with \"escapes\"\n""#, r#""\u00e9""#] {
            let shared: WireText = serde_json::from_str(text).expect("a string");
            let owned: String = serde_json::from_str(text).expect("a string");
            assert_eq!(&*shared.0, owned);
        }
        assert_eq!(&*WireText::default().0, "");
        for bad in ["1", "null", "[]", "{}"] {
            let shared = serde_json::from_str::<WireText>(bad).expect_err(bad);
            let owned = serde_json::from_str::<String>(bad).expect_err(bad);
            assert_eq!(shared.to_string(), owned.to_string(), "{bad}");
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

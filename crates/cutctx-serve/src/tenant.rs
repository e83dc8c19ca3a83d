//! Who a call belongs to, as keyed hashes: the tenant (the credential it carries) and the
//! scope its session is looked up in (the tenant, the format and the untouchable part of the
//! request: the system prompt or instructions, the tools, the model). One tenant can neither
//! find, move, restart nor evict another's session, because every session id and every
//! lookup is inside its scope.
//!
//! The hashes are HMAC-SHA-256 under the store's secret ([`crate::store::Store::secret`]),
//! so the ids the store and the log keep say nothing of the credential or the request to
//! anyone without the secret, and cannot be matched against a guessed credential.

use cutctx_ops::Format;
use hyper::header::HeaderMap;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The headers a provider credential travels in (OpenAI, Anthropic, Azure OpenAI).
const CREDENTIALS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

/// The request fields that are a conversation's untouchable part, beside its history.
const UNTOUCHABLE: [&str; 4] = ["model", "system", "instructions", "tools"];

/// A keyed hash: HMAC-SHA-256 (RFC 2104) of `parts`, each tagged with its length so that no
/// two lists of parts collide.
#[derive(Clone)]
pub(crate) struct Keyed {
    inner: Sha256,
    outer: Sha256,
}

impl Keyed {
    /// A hash keyed by `secret`, for the purpose `label` (keys for different purposes never
    /// give the same id).
    pub(crate) fn new(secret: &[u8; 32], label: &str) -> Self {
        let mut block = [0_u8; 64];
        block[..32].copy_from_slice(secret);
        let pad = |byte: u8| {
            let mut h = Sha256::new();
            h.update(block.map(|b| b ^ byte));
            h
        };
        let mut inner = pad(0x36);
        let outer = pad(0x5c);
        inner.update((label.len() as u64).to_le_bytes());
        inner.update(label.as_bytes());
        Self { inner, outer }
    }

    /// Adds one part.
    pub(crate) fn part(mut self, bytes: &[u8]) -> Self {
        self.inner.update((bytes.len() as u64).to_le_bytes());
        self.inner.update(bytes);
        self
    }

    /// The hash, in hex.
    pub(crate) fn hex(self) -> String {
        let Self { inner, mut outer } = self;
        outer.update(inner.finalize());
        hex(&outer.finalize())
    }
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 32 bytes from 64 hex digits.
pub(crate) fn from_hex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0_u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16);
        out[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

/// A new secret from the operating system's random source; where there is none, from the
/// standard library's per-process random hash keys, the clock and the process id.
pub(crate) fn random_secret() -> [u8; 32] {
    use std::hash::{BuildHasher as _, Hasher as _};
    use std::io::Read as _;
    let mut out = [0_u8; 32];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut out))
        .is_ok()
    {
        return out;
    }
    let mut h = Sha256::new();
    for i in 0..8_u64 {
        let mut s = std::collections::hash_map::RandomState::new().build_hasher();
        s.write_u64(i);
        h.update(s.finish().to_le_bytes());
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    out.copy_from_slice(&h.finalize());
    out
}

/// The keyed hash of the credential a call carries (all of its credential headers, and the
/// proxy's own token's name when the proxy checks one): calls with the same credential are
/// one tenant; calls with none are one anonymous tenant.
pub(crate) fn tenant(secret: &[u8; 32], headers: &HeaderMap, token: Option<&str>) -> String {
    let mut h = Keyed::new(secret, "cutctx-serve tenant").part(token.unwrap_or("").as_bytes());
    for name in CREDENTIALS {
        for value in headers.get_all(name) {
            h = h.part(name.as_bytes()).part(value.as_bytes());
        }
    }
    h.hex()
}

/// The scope of a `format` request of `tenant`: its tenant, its format and its untouchable
/// part (its cache marks aside: a client may move `cache_control` from call to call without
/// starting another conversation). A history is looked up only among the sessions of its
/// scope.
pub(crate) fn scope(secret: &[u8; 32], tenant: &str, format: Format, request: &Value) -> String {
    let mut h = Keyed::new(secret, "cutctx-serve scope")
        .part(tenant.as_bytes())
        .part(format.as_str().as_bytes());
    for field in UNTOUCHABLE {
        // Absent and null are one: a client that writes `"tools": null` is the same request.
        match request.get(field).filter(|v| !v.is_null()) {
            None => h = h.part(b"\0"),
            Some(v) => h = h.part(field.as_bytes()).part(unmarked(v).as_bytes()),
        }
    }
    h.hex()
}

/// `value` as JSON text without its `cache_control` fields, at any depth.
fn unmarked(value: &Value) -> String {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| k.as_str() != "cache_control")
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    let marked = value.to_string();
    if marked.contains("\"cache_control\"") {
        strip(value).to_string()
    } else {
        marked
    }
}

/// A short keyed hash of `id` for the log: enough to follow one session's lines, nothing of
/// what it was made from.
pub(crate) fn short(secret: &[u8; 32], id: &str) -> String {
    let mut h = Keyed::new(secret, "cutctx-serve log id")
        .part(id.as_bytes())
        .hex();
    h.truncate(12);
    h
}

#[cfg(test)]
mod tests {
    use hyper::header::{HeaderName, HeaderValue};
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn keyed_hashes_separate_keys_labels_and_parts() {
        let key = [7_u8; 32];
        let a = Keyed::new(&key, "x").part(b"ab").part(b"c").hex();
        let b = Keyed::new(&key, "x").part(b"a").part(b"bc").hex();
        assert_ne!(a, b);
        assert_ne!(a, Keyed::new(&[8_u8; 32], "x").part(b"ab").part(b"c").hex());
        assert_ne!(a, Keyed::new(&key, "y").part(b"ab").part(b"c").hex());
        assert_eq!(a.len(), 64);
        assert_eq!(from_hex(&hex(&key)), Some(key));
        assert_eq!(from_hex("zz"), None);
    }

    #[test]
    fn tenants_differ_by_credential_and_scopes_by_untouchable_part() {
        let key = random_secret();
        let one = tenant(&key, &headers(&[("authorization", "Bearer a")]), None);
        let two = tenant(&key, &headers(&[("authorization", "Bearer b")]), None);
        let anthropic = tenant(&key, &headers(&[("x-api-key", "Bearer a")]), None);
        assert!(one != two && one != anthropic);
        assert_eq!(
            one,
            tenant(&key, &headers(&[("authorization", "Bearer a")]), None)
        );
        assert_ne!(
            one,
            tenant(&key, &headers(&[("authorization", "Bearer a")]), Some("t"))
        );
        assert!(!one.contains("Bearer"));
        let base = json!({"model": "m", "system": "s", "messages": [1]});
        let s = |v: &Value| scope(&key, &one, Format::Anthropic, v);
        assert_eq!(
            s(&base),
            s(&json!({"model": "m", "system": "s", "messages": [2]}))
        );
        assert_eq!(
            s(&base),
            s(&json!({"model": "m", "system": "s", "tools": null}))
        );
        // A moved cache mark is the same conversation.
        let marked = |at: usize| {
            let mut blocks = vec![
                json!({"type": "text", "text": "a"}),
                json!({"type": "text", "text": "b"}),
            ];
            blocks[at]["cache_control"] = json!({"type": "ephemeral"});
            json!({"model": "m", "system": blocks})
        };
        assert_eq!(s(&marked(0)), s(&marked(1)));
        for other in [
            json!({"model": "n", "system": "s"}),
            json!({"model": "m", "system": "t"}),
            json!({"model": "m", "system": "s", "tools": []}),
        ] {
            assert_ne!(s(&base), s(&other), "{other}");
        }
        assert_ne!(s(&base), scope(&key, &two, Format::Anthropic, &base));
        assert_ne!(s(&base), scope(&key, &one, Format::OpenAiChat, &base));
        assert_eq!(short(&key, "id").len(), 12);
    }
}

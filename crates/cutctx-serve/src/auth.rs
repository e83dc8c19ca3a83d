//! The proxy's own authentication: the tokens it accepts (`--auth-token`, `--auth-tokens-file`),
//! separate from the provider's API key. A caller sends one as `x-cutctx-auth: TOKEN` (or
//! `Proxy-Authorization: Bearer TOKEN`); neither header is ever forwarded. When tokens are
//! set, every route but `GET /healthz` needs one.
//!
//! Only the tokens' SHA-256 digests are held, and a presented token is compared with each in
//! time that does not depend on where they differ.

use hyper::header::HeaderMap;
use sha2::{Digest as _, Sha256};

/// The header a caller sends the proxy's token in.
pub(crate) const AUTH_HEADER: &str = "x-cutctx-auth";

/// The tokens the proxy accepts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens {
    digests: Vec<[u8; 32]>,
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// Whether `a` and `b` are equal, in time that does not depend on where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0_u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    /// The tokens given on the command line and in the tokens file's text (one per line;
    /// blank lines and lines starting with `#` are skipped).
    ///
    /// # Errors
    ///
    /// A token shorter than 16 characters or holding whitespace: a name of the line, never
    /// the token.
    pub(crate) fn new(given: &[String], file: Option<&str>) -> Result<Self, String> {
        let lines = file.into_iter().flat_map(str::lines).map(str::trim);
        let from_file = lines
            .enumerate()
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        let mut digests = Vec::new();
        for (i, token) in given
            .iter()
            .map(|t| (None, t.as_str()))
            .chain(from_file.map(|(i, t)| (Some(i + 1), t)))
        {
            let whose = i.map_or_else(
                || "an --auth-token".to_owned(),
                |line| format!("line {line} of the tokens file"),
            );
            if token.chars().count() < 16 || token.chars().any(char::is_whitespace) {
                return Err(format!(
                    "{whose} is not a usable token: use at least 16 characters and no spaces (e.g. the output of `openssl rand -hex 32`)"
                ));
            }
            digests.push(digest(token.as_bytes()));
        }
        Ok(Self { digests })
    }

    /// Whether any token is set (then every route but `/healthz` needs one).
    pub(crate) const fn required(&self) -> bool {
        !self.digests.is_empty()
    }

    /// The token `headers` present, when it is one of ours: `Ok(None)` when none is set,
    /// `Ok(Some(token))` when it matches, `Err(())` otherwise.
    pub(crate) fn check<'h>(&self, headers: &'h HeaderMap) -> Result<Option<&'h str>, ()> {
        if !self.required() {
            return Ok(None);
        }
        let presented = presented(headers).ok_or(())?;
        let d = digest(presented.as_bytes());
        // Every digest is compared, so the time says nothing of which one matched.
        let hits = self.digests.iter().filter(|t| same(t, &d)).count();
        if hits > 0 {
            Ok(Some(presented))
        } else {
            Err(())
        }
    }
}

/// The token a request presents: `x-cutctx-auth` (with or without `Bearer `), else
/// `Proxy-Authorization: Bearer`.
fn presented(headers: &HeaderMap) -> Option<&str> {
    fn bearer(v: &str) -> Option<&str> {
        v.strip_prefix("Bearer ").map(str::trim)
    }
    if let Some(v) = headers.get(AUTH_HEADER).and_then(|v| v.to_str().ok()) {
        return Some(bearer(v).unwrap_or(v.trim()));
    }
    headers
        .get(hyper::header::PROXY_AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
}

#[cfg(test)]
mod tests {
    use hyper::header::{HeaderName, HeaderValue};

    use super::*;

    fn with(name: &'static str, value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
        h
    }

    #[test]
    fn tokens_from_the_flag_and_the_file_and_what_each_header_presents() {
        let t = Tokens::new(
            &["0123456789abcdef".to_owned()],
            Some("# team\n\nfedcba9876543210fedc\n"),
        )
        .expect("valid");
        assert!(t.required());
        assert!(t.check(&with("x-cutctx-auth", "0123456789abcdef")).is_ok());
        assert!(
            t.check(&with("x-cutctx-auth", "Bearer fedcba9876543210fedc"))
                .is_ok()
        );
        assert!(
            t.check(&with("proxy-authorization", "Bearer 0123456789abcdef"))
                .is_ok()
        );
        assert!(t.check(&with("x-cutctx-auth", "0123456789abcdeX")).is_err());
        // The provider's key is not the proxy's token.
        assert!(
            t.check(&with("authorization", "Bearer 0123456789abcdef"))
                .is_err()
        );
        assert!(t.check(&HeaderMap::new()).is_err());
        assert_eq!(Tokens::default().check(&HeaderMap::new()), Ok(None));
        let short = Tokens::new(&[], Some("ok-but-short\n")).expect_err("short");
        assert!(
            short.contains("line 1") && !short.contains("ok-but-short"),
            "{short}"
        );
    }
}

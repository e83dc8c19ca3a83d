//! Fuzz target: the proxy's config file and upstream URLs → the settings check it runs at
//! startup.
//!
//! The input is the config file's text, the OpenAI upstream and the Anthropic upstream,
//! separated by NUL bytes (a missing or empty part is not given). No input may panic, and an
//! accepted upstream is https, or plain http only to a loopback host: the URL the proxy
//! joins from it goes to the origin it was accepted for.
#![no_main]

use std::net::IpAddr;

use cutctx_serve::fuzzing::check_settings;
use libfuzzer_sys::fuzz_target;

/// Whether `host` (as a URL spells it) names this machine.
fn loopback(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Checks one accepted upstream, `origin` and base `path`.
fn accepted(origin: &str, path: &str) {
    assert!(
        path.is_empty() || path.starts_with('/'),
        "a base path: {path:?}"
    );
    assert!(
        !path.ends_with('/'),
        "a base path without its trailing slash: {path:?}"
    );
    let joined = format!("{origin}{path}/v1/chat/completions");
    let uri: http::Uri = joined.parse().expect("an accepted upstream joins to a URL");
    let authority = uri.authority().expect("a joined URL has a host");
    let scheme = uri.scheme_str().expect("a joined URL has a scheme");
    assert_eq!(
        format!("{scheme}://{authority}"),
        origin,
        "the joined URL goes to the origin"
    );
    match scheme {
        "https" => {}
        "http" => assert!(loopback(authority.host()), "plain http to {origin:?}"),
        _ => panic!("an upstream of scheme {scheme:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text
        .splitn(3, '\0')
        .map(|p| (!p.is_empty()).then(|| p.to_owned()));
    let config = parts.next().flatten();
    let openai = parts.next().flatten();
    let anthropic = parts.next().flatten();
    if let Ok(upstreams) = check_settings(config, openai, anthropic) {
        accepted(&upstreams.openai.0, &upstreams.openai.1);
        accepted(&upstreams.anthropic.0, &upstreams.anthropic.1);
    }
});

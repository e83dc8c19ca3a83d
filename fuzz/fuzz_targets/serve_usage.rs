//! Fuzz target: a response body's bytes → the proxy's usage reader, in each format, as an
//! event stream or one body, gzip-encoded or not.
//!
//! The response comes from the upstream, unchecked. No body may panic, and what is read does
//! not depend on how the body was cut into chunks: fed whole or in pieces, the reader
//! finishes with the same usage and, cut short at the end, has seen the same. A stream that
//! ends at a line's end has seen all it finishes with.
#![no_main]

use std::borrow::Cow;
use std::io::Write as _;

use cutctx_ops::Format;
use cutctx_serve::fuzzing::UsageTap;
use libfuzzer_sys::fuzz_target;

/// What a reader fed `chunks` finishes with, and what one cut short after them has seen.
type Read = (Option<(u64, u64)>, Option<(u64, u64)>);

fn read(format: Format, sse: bool, gzip: bool, chunks: &[&[u8]]) -> Read {
    let mut finished = UsageTap::new(format, sse, gzip);
    let mut cut = UsageTap::new(format, sse, gzip);
    for chunk in chunks {
        finished.feed(chunk);
        cut.feed(chunk);
    }
    (finished.finish(), cut.seen())
}

/// `body` cut into pieces whose lengths (empty ones among them) follow from `seed`.
fn pieces(body: &[u8], seed: u8) -> Vec<&[u8]> {
    let most = 1 + usize::from(seed & 0x0f) * 3;
    let mut state = u32::from(seed) | 0x100;
    let (mut out, mut at) = (Vec::new(), 0);
    while at < body.len() && out.len() <= 2 * body.len() {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let n = usize::try_from(state >> 16).unwrap_or(0) % (most + 1);
        let end = (at + n).min(body.len());
        out.push(&body[at..end]);
        at = end;
    }
    out.push(&body[at..]);
    out
}

/// `bytes`, gzip-encoded.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).expect("gzip into memory");
    gz.finish().expect("gzip into memory")
}

fuzz_target!(|data: &[u8]| {
    let [mode, seed, rest @ ..] = data else {
        return;
    };
    let format = Format::ALL[usize::from(*mode) % Format::ALL.len()];
    let flags = *mode / 3;
    let sse = flags & 1 != 0;
    let gzipped = flags & 2 != 0;
    // Packed here, so that a gzip-encoded body's JSON is reached; else the bytes as they are.
    let body: Cow<'_, [u8]> = if gzipped && flags & 4 != 0 {
        Cow::Owned(gzip(rest))
    } else {
        Cow::Borrowed(rest)
    };
    let whole = read(format, sse, gzipped, &[&body]);
    let cut = read(format, sse, gzipped, &pieces(&body, *seed));
    assert_eq!(
        whole, cut,
        "the usage read depends on where the body was cut"
    );
    let byte_at_a_time: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(whole, read(format, sse, gzipped, &byte_at_a_time));
    if sse && body.last().is_none_or(|b| *b == b'\n') {
        assert_eq!(
            whole.0, whole.1,
            "a stream ended at a line's end has seen it all"
        );
    }
});

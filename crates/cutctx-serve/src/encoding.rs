//! A request body's `Content-Encoding`, undone under a limit: `gzip` and `zstd` decoded (Codex
//! may send zstd-compressed bodies), `identity` or none read as it is, anything else left
//! alone. The decoded size is bounded as the received size is, so a small body that would
//! unpack to gigabytes (a decompression bomb) is refused after at most the limit, never
//! decoded without bound.

use std::io::Read as _;

use hyper::header::{self, HeaderMap};
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

/// The encoding a request body came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    /// No `Content-Encoding`, or `identity`: the bytes are the body.
    Identity,
    /// `gzip` (or `x-gzip`).
    Gzip,
    /// `zstd`.
    Zstd,
    /// Anything else, stacked encodings included: left as it came.
    Unknown,
}

impl Coding {
    /// Its name in logs and error details (never the client's header text).
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
            Self::Unknown => "unknown",
        }
    }
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failed {
    /// It decodes to more than the limit.
    TooLarge,
    /// It is not what its encoding says (corrupt, truncated, or a bad checksum).
    Corrupt,
}

/// The coding `headers` declare: every `Content-Encoding` value, `identity` left out; one
/// known coding is decoded, anything else (stacked codings, an unknown or unreadable value)
/// is [`Coding::Unknown`].
pub(crate) fn coding(headers: &HeaderMap) -> Coding {
    let mut codings = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        let Ok(text) = value.to_str() else {
            return Coding::Unknown;
        };
        codings.extend(
            text.split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty() && t != "identity"),
        );
    }
    match codings.as_slice() {
        [] => Coding::Identity,
        [one] if one == "gzip" || one == "x-gzip" => Coding::Gzip,
        [one] if one == "zstd" => Coding::Zstd,
        _ => Coding::Unknown,
    }
}

/// `raw` decoded from `coding` (gzip or zstd), at most `limit` bytes of it.
pub(crate) fn decode(coding: Coding, raw: &[u8], limit: usize) -> Result<Vec<u8>, Failed> {
    match coding {
        Coding::Gzip => gunzip(raw, limit),
        Coding::Zstd => unzstd(raw, limit),
        Coding::Identity | Coding::Unknown => Ok(raw.to_vec()),
    }
}

/// Every gzip member of `raw` (a sender may concatenate several), its CRC checked.
fn gunzip(raw: &[u8], limit: usize) -> Result<Vec<u8>, Failed> {
    let mut out = Vec::new();
    // One byte past the limit tells an over-limit body from one exactly at it.
    let most = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::MultiGzDecoder::new(raw)
        .take(most)
        .read_to_end(&mut out)
        .map_err(|_| Failed::Corrupt)?;
    if out.len() > limit {
        return Err(Failed::TooLarge);
    }
    Ok(out)
}

/// The largest zstd window accepted: RFC 9659 asks HTTP senders for at most 8 MiB, and a
/// window up to the limit is never more memory than the body it may decode to. A frame
/// header declaring more is refused before its buffer is allocated.
fn window_limit(limit: usize) -> u64 {
    u64::try_from(limit).unwrap_or(u64::MAX).max(8 << 20)
}

/// Every zstd frame of `raw` (skippable frames skipped), block by block, checking the size
/// after each block and each frame's checksum when it has one.
fn unzstd(mut raw: &[u8], limit: usize) -> Result<Vec<u8>, Failed> {
    let mut out = Vec::new();
    let mut frame = FrameDecoder::new();
    frame.set_max_window_size(window_limit(limit));
    while !raw.is_empty() {
        match frame.reset(&mut raw) {
            Ok(()) => {}
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                let skip = usize::try_from(length).map_err(|_| Failed::Corrupt)?;
                raw = raw.get(skip..).ok_or(Failed::Corrupt)?;
                continue;
            }
            Err(_) => return Err(Failed::Corrupt),
        }
        one_frame(&mut frame, &mut raw, &mut out, limit)?;
    }
    Ok(out)
}

/// Decodes the frame `frame` has just read the header of, appending to `out`.
fn one_frame(
    frame: &mut FrameDecoder,
    raw: &mut &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Failed> {
    while !frame.is_finished() {
        // A block is at most 128 KiB: the size is checked often enough that a bomb stops
        // within a block of the limit.
        frame
            .decode_blocks(&mut *raw, BlockDecodingStrategy::UptoBlocks(1))
            .map_err(|_| Failed::Corrupt)?;
        frame
            .collect_to_writer(&mut *out)
            .map_err(|_| Failed::Corrupt)?;
        if out.len() > limit {
            return Err(Failed::TooLarge);
        }
    }
    frame
        .collect_to_writer(&mut *out)
        .map_err(|_| Failed::Corrupt)?;
    if out.len() > limit {
        return Err(Failed::TooLarge);
    }
    match (
        frame.get_checksum_from_data(),
        frame.get_calculated_checksum(),
    ) {
        (Some(sent), Some(made)) if sent != made => Err(Failed::Corrupt),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;
    use std::io::Write as _;

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::CONTENT_ENCODING, HeaderValue::from_static(v));
        }
        h
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).expect("gzip");
        e.finish().expect("gzip")
    }

    fn zstd(data: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[test]
    fn the_header_names_one_coding_or_none() {
        assert_eq!(coding(&headers(&[])), Coding::Identity);
        assert_eq!(coding(&headers(&["identity"])), Coding::Identity);
        assert_eq!(coding(&headers(&["GZIP"])), Coding::Gzip);
        assert_eq!(coding(&headers(&["x-gzip"])), Coding::Gzip);
        assert_eq!(coding(&headers(&[" zstd "])), Coding::Zstd);
        assert_eq!(coding(&headers(&["br"])), Coding::Unknown);
        assert_eq!(coding(&headers(&["gzip, zstd"])), Coding::Unknown);
        assert_eq!(coding(&headers(&["gzip", "zstd"])), Coding::Unknown);
    }

    #[test]
    fn both_codings_decode_and_every_member_or_frame_is_read() {
        let data = b"{\"model\":\"m\",\"messages\":[]}".repeat(50);
        assert_eq!(
            decode(Coding::Gzip, &gzip(&data), 1 << 20),
            Ok(data.clone())
        );
        assert_eq!(
            decode(Coding::Zstd, &zstd(&data), 1 << 20),
            Ok(data.clone())
        );
        let twice = [gzip(b"ab"), gzip(b"cd")].concat();
        assert_eq!(decode(Coding::Gzip, &twice, 10), Ok(b"abcd".to_vec()));
        // A skippable frame (magic 0x184D2A50, 3 bytes) between two frames.
        let skip = [
            &[0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3][..],
            &zstd(b"cd"),
        ]
        .concat();
        let frames = [zstd(b"ab"), skip].concat();
        assert_eq!(decode(Coding::Zstd, &frames, 10), Ok(b"abcd".to_vec()));
    }

    #[test]
    fn a_bomb_stops_at_the_limit_and_corruption_is_named() {
        let huge = vec![b' '; 4 << 20];
        assert_eq!(
            decode(Coding::Gzip, &gzip(&huge), 1 << 20),
            Err(Failed::TooLarge)
        );
        assert_eq!(
            decode(Coding::Zstd, &zstd(&huge), 1 << 20),
            Err(Failed::TooLarge)
        );
        // Exactly at the limit is within it.
        assert_eq!(
            decode(Coding::Zstd, &zstd(&huge), 4 << 20).map(|v| v.len()),
            Ok(4 << 20)
        );
        let z = zstd(b"{\"model\":\"m\"}");
        assert_eq!(
            decode(Coding::Zstd, &z[..z.len() - 3], 100),
            Err(Failed::Corrupt)
        );
        assert_eq!(
            decode(Coding::Zstd, b"not zstd at all", 100),
            Err(Failed::Corrupt)
        );
        let mut g = gzip(b"{\"model\":\"m\"}");
        let n = g.len();
        g[n - 6] ^= 0xff; // the CRC
        assert_eq!(decode(Coding::Gzip, &g, 100), Err(Failed::Corrupt));
        assert_eq!(decode(Coding::Gzip, b"not gzip", 100), Err(Failed::Corrupt));
        // A frame header asking for a 1 GiB window (window log 30) is refused before the
        // window is allocated.
        let greedy = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 20 << 3, 0x01, 0x00, 0x00];
        assert_eq!(decode(Coding::Zstd, &greedy, 1 << 20), Err(Failed::Corrupt));
    }
}

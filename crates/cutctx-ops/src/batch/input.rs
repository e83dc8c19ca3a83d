//! A batch's input opened: a file, or standard input for `-`, decompressed as it is read when
//! it is gzip or zstd (recognised by its first bytes, so standard input too).

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::Path;

use cutctx::model::details;

use crate::OpsError;

/// Opens `path` (`-` for standard input), decompressing gzip or zstd, which it recognises by
/// their magic numbers rather than by the file's name.
///
/// # Errors
///
/// `INPUT_ERROR` when the file cannot be opened or its first bytes cannot be read.
pub fn open_input(path: &Path) -> Result<Box<dyn BufRead + Send>, OpsError> {
    let fail = |e: std::io::Error| {
        OpsError::input(
            format!("cannot read the input at {}: {e}", path.display()),
            details! { "path" => path.display().to_string(), "document" => "the input" },
        )
    };
    let raw: Box<dyn Read + Send> = if path == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        Box::new(File::open(path).map_err(fail)?)
    };
    decompressing(raw).map_err(fail)
}

/// `raw`, decompressed when it starts with gzip's or zstd's magic number.
///
/// # Errors
///
/// When its first bytes cannot be read, or a zstd frame header is malformed.
pub fn decompressing<'a>(
    raw: Box<dyn Read + Send + 'a>,
) -> std::io::Result<Box<dyn BufRead + Send + 'a>> {
    const BUFFER: usize = 1 << 16;
    let mut buffered = BufReader::with_capacity(BUFFER, raw);
    let head = buffered.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        // Concatenated members (as `cat a.gz b.gz` makes) are one stream.
        Box::new(BufReader::with_capacity(
            BUFFER,
            flate2::bufread::MultiGzDecoder::new(buffered),
        ))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let decoder = ruzstd::decoding::StreamingDecoder::new(buffered)
            .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e.to_string()))?;
        Box::new(BufReader::with_capacity(BUFFER, decoder))
    } else {
        Box::new(buffered)
    })
}

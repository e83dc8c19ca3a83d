//! Compacting a request document: the plan applied with the request's summaries, as
//! `{"plan", "report", "transcript"}`, for a request held whole, read from a reader piece by
//! piece, or read where it lies in its file, its contents left in the text where they can be.

use crate::compacted::{Compacted, compacted, compacted_with};
use crate::compacted_file::CompactedFile;
use crate::input::RequestFile;
use crate::request_text::RequestText;
use crate::{OpsError, request};

/// `cutctx compact`: plan, apply with the request's summaries, and print
/// `{"plan", "report", "transcript"}` canonically, with one newline.
///
/// # Errors
///
/// As [`plan`](crate::plan), and `COMPACTION_SUMMARY_MISSING` when a requested summary is not
/// supplied.
pub fn compact(request_text: &str) -> Result<String, OpsError> {
    Ok(compacted(request::parse(request_text)?)?.into_text())
}

/// As [`compact`], taking the request's text to free it as soon as it is parsed (nothing
/// after parsing reads it), its output left to write.
///
/// # Errors
///
/// As [`compact`].
pub fn compact_retaining(request_text: String) -> Result<Compacted, OpsError> {
    let req = request::parse(&request_text)?;
    drop(request_text);
    compacted(req)
}

/// As [`compact_retaining`], the contents of the request's turns left in its text, which the
/// output holds: a dropped turn's content is never decoded, a masked one is hashed where it
/// lies, and a kept one is copied from the text (see [`request::parse_leaving`]). The output
/// is the bytes [`compact`] gives.
///
/// ```
/// let request = r#"{"transcript":[
///     {"turn_id":"a","role":"assistant","content":"run","token_estimate":5,"tool_call_id":"c"},
///     {"turn_id":"t","role":"tool","content":"a \"long\" log","token_estimate":900,"tool_call_id":"c"},
///     {"turn_id":"u","role":"user","content":"go on","token_estimate":5}],
///   "budget":{"max_tokens":100,"protected_recent_turns":1},
///   "policy":{"name":"observation_masking","keep_recent_results":0}}"#;
/// let left = cutctx_ops::compact_text(request.to_owned())?.into_text();
/// assert_eq!(left, cutctx_ops::compact(request)?);
/// assert!(left.contains("sha256:"));
/// # Ok::<(), cutctx_ops::OpsError>(())
/// ```
///
/// # Errors
///
/// As [`compact`].
pub fn compact_text(request_text: String) -> Result<Compacted, OpsError> {
    let Some(leaving) = request::parse_leaving(&request_text) else {
        return compact_retaining(request_text);
    };
    let (mut req, mut text) = RequestText::new(leaving?, request_text);
    let plan = text.plan(&mut req)?;
    compacted_with(req, plan, Some(text))
}

/// As [`compact_text`], the request read from `file` where it lies rather than held whole
/// (see [`request::parse_leaving_file`]): the view's kept contents are read from the file
/// again when the output is written, a window at a time, and the file is checked unchanged
/// before the output's first byte and before the view's last part. `whole` reads the file whole (with the errors reading the
/// request gives) for a request [`request::parse_leaving_file`] does not read: it is then
/// compacted by [`compact_text`].
///
/// ```
/// use cutctx_ops::input::RequestFile;
/// let turns: Vec<String> = (0..50_000)
///     .map(|i| format!(r#"{{"turn_id":"u{i}","role":"user","content":"turn {i} of a long talk","token_estimate":9}}"#))
///     .collect();
/// let request = format!(r#"{{"transcript":[{}],"budget":{{"max_tokens":1000}},"policy":{{"name":"drop_oldest"}}}}"#, turns.join(","));
/// let path = std::env::temp_dir().join(format!("cutctx-compact-file-doc-{}", std::process::id()));
/// std::fs::write(&path, &request)?;
/// let file = RequestFile::open(&path)?.expect("large enough to read where it lies");
/// let mut compacted = cutctx_ops::compact_file(file, |file| {
///     String::from_utf8(file.read_whole().expect("reads")).map_err(|_| unreachable!())
/// })?;
/// let mut out = Vec::new();
/// compacted.write_to(&mut out)?;
/// assert_eq!(String::from_utf8(out).expect("UTF-8"), cutctx_ops::compact(&request)?);
/// std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// As [`compact`]; a file that cannot be read again while planning is an `INPUT_ERROR`, as
/// are the errors of `whole`.
pub fn compact_file(
    file: RequestFile,
    whole: impl FnOnce(&RequestFile) -> Result<String, OpsError>,
) -> Result<CompactedFile, OpsError> {
    let Some(leaving) = request::parse_leaving_file(&file) else {
        return compact_text(whole(&file)?).map(CompactedFile);
    };
    let (mut req, mut text) = RequestText::in_file(leaving?, file);
    let plan = text.plan(&mut req)?;
    compacted_with(req, plan, Some(text)).map(CompactedFile)
}

/// As [`compact_retaining`], reading the request from `reader` piece by piece, so that its
/// whole text is never held (see [`request::parse_reader`]); `whole` reads it whole again,
/// for the exact error, when anything in it is amiss.
///
/// # Errors
///
/// As [`compact`], and whatever `whole` returns.
pub fn compact_reader(
    reader: impl std::io::Read,
    whole: impl FnOnce() -> Result<String, OpsError>,
) -> Result<Compacted, OpsError> {
    compacted(request::parse_reader(reader, whole)?)
}

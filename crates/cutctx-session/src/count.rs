//! The whole prompt of a request, summed from `cutctx-formats`' one count (the count `cutctx
//! compact --format` and `cutctx estimate` plan and report against), so that a session's
//! `--window N` means what `--max-tokens N` means for a compaction.

use cutctx_formats::{Format, FormatError, fixed_tokens, message_list, message_tokens};
use cutctx_policies::TokenEstimator;
use serde_json::Value;

/// The estimate of the messages of `list`, summed.
pub(crate) fn messages_tokens(
    format: Format,
    list: &[Value],
    estimator: &dyn TokenEstimator,
) -> Result<u64, FormatError> {
    list.iter().try_fold(0_u64, |sum, m| {
        Ok(sum.saturating_add(message_tokens(format, m, estimator)?))
    })
}

/// The whole prompt of `request` without the output reserve: [`fixed_tokens`] plus
/// [`message_tokens`] of every message, which is `prompt_count(0).total` of the parsed
/// request.
///
/// # Errors
///
/// `FORMAT_ERROR` for a part without its format's shape.
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_policies::CharRatioEstimator;
/// use cutctx_session::prompt_tokens;
/// let request = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi there"}]});
/// // Settings are not prompt; the message's text is 8 characters, 2 tokens at 4 a token.
/// assert_eq!(prompt_tokens(Format::OpenAiChat, &request, &CharRatioEstimator::default())?, 2);
/// # Ok::<(), cutctx_formats::FormatError>(())
/// ```
pub fn prompt_tokens(
    format: Format,
    request: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<u64, FormatError> {
    Ok(
        fixed_tokens(format, request, estimator)?.saturating_add(messages_tokens(
            format,
            message_list(format, request),
            estimator,
        )?),
    )
}

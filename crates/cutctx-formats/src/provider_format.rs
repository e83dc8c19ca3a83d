//! [`ProviderFormat`]: the one shape of a provider format, which each format's folder
//! implements once (`openai_chat`, `openai_responses`, `anthropic`), and through which every
//! reader (a parsed document, a request read from text message by message, a message read by
//! hand) reaches the format's rules and its turn builder.
//!
//! A format's rules live in its `rules.rs` (`Check`), its turns in `build.rs` (`Build`), its
//! hand reader in `plain.rs` (`Plain`) and its rendering in `render.rs`; this trait only names
//! them, so a generic reader is written once for the three formats and dispatched by
//! [`per_format!`]. A reader that reads a message differently (by hand, as a value) hands the
//! same check the same facts: there is no second copy of a rule to drift.

use cutctx_model::TranscriptTurn;
use cutctx_policies::TokenEstimator;
use serde_json::Value;

use crate::FormatError;
use crate::hand_read::ReadMessage;
use crate::mapping::{Built, Rendered, Source, TurnSource, ViewItem};
use crate::validate::Violation;

/// One provider format: its rules, its turn builder, its hand reader and its rendering.
pub(crate) trait ProviderFormat {
    /// The rules' state over a list, message by message (the format's `Check`); a copy
    /// checks a longer list on from where the original stands ([`crate::OpenValidation`]).
    type Check: Clone;
    /// The turns being built, message by message (the format's `Build`).
    type Build;
    /// A message of the common shapes, read from its text without a value (the format's
    /// `Plain`).
    type Plain<'a>: ReadMessage<'a>;

    /// The rules over a whole document.
    fn validate(document: &Value) -> Result<(), Violation>;

    /// The turns of a document [`ProviderFormat::validate`] accepted.
    fn build(document: &Value, estimator: &dyn TokenEstimator) -> Result<Built, FormatError>;

    /// The rules' state for a list of `n` messages of the request `shell` (the request without
    /// its list), the request's own fields checked first.
    fn check_start(shell: &Value, n: usize) -> Result<Self::Check, Violation>;

    /// Message `i`, as a value, checked after those before it.
    fn check_value(check: &mut Self::Check, i: usize, message: &Value) -> Result<(), Violation>;

    /// Message `i`, as read by hand, checked after those before it: `None` when the check
    /// cannot judge the reading alone (the state is then as it was, and the message is read as
    /// a value).
    fn check_plain(check: &mut Self::Check, i: usize, message: &Self::Plain<'_>) -> Option<()>;

    /// The rules that need the whole list.
    fn check_finish(check: Self::Check) -> Result<(), Violation>;

    /// The rules' state told that its list is now `n` long (it grew after
    /// [`ProviderFormat::check_start`]): only a rule about the list's last message reads the
    /// length, and a format without one ignores it.
    fn check_len(_check: &mut Self::Check, _n: usize) {}

    /// The builder for a list of `n` messages of the request `shell`, the turns of the
    /// request's own fields (a system prompt, instructions) first.
    fn build_start(
        shell: &Value,
        n: usize,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self::Build, FormatError>;

    /// The builder a scan that mapped each message as it read them hands on
    /// ([`crate::check_as_read`]), ready for the rest of the list: as it is, unless the
    /// format puts the turns of the request's own fields first only now.
    fn build_resume(
        build: Self::Build,
        _shell: &Value,
        _estimator: &dyn TokenEstimator,
    ) -> Result<Self::Build, FormatError> {
        Ok(build)
    }

    /// Message `i`'s turns, from its value.
    fn build_value(
        build: &mut Self::Build,
        i: usize,
        message: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError>;

    /// Message `i`'s turns, from its hand reading.
    fn build_plain(
        build: &mut Self::Build,
        i: usize,
        message: &Self::Plain<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError>;

    /// The turns built.
    fn built(build: Self::Build) -> Built;

    /// The list `items` with what makes it invalid dropped, each drop recorded in `repairs`
    /// (the format's walk of [`crate::repair()`]).
    fn repair(items: Vec<Value>, repairs: &mut Vec<crate::Repair>) -> Vec<Value>;

    /// The view items rendered as the format's messages, kept ones read from `list` (`None`
    /// only for a Responses `input` string, which has no list).
    fn render(
        document: &Value,
        list: Option<Source<'_>>,
        turns: &[TranscriptTurn],
        sources: &[TurnSource],
        items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
    ) -> Result<Rendered, FormatError>;
}

/// Runs `$body` with `$F` naming the [`ProviderFormat`] of `$format`: the one `match` over
/// the formats that a generic reader needs.
macro_rules! per_format {
    ($format:expr, $F:ident => $body:expr) => {
        match $format {
            $crate::Format::OpenAiChat => {
                type $F = $crate::openai_chat::Chat;
                $body
            }
            $crate::Format::OpenAiResponses => {
                type $F = $crate::openai_responses::Responses;
                $body
            }
            $crate::Format::Anthropic => {
                type $F = $crate::anthropic::Anthropic;
                $body
            }
        }
    };
}
pub(crate) use per_format;

/// The methods of a [`ProviderFormat`] implementation that every format writes alike: each
/// names the format's own `validate`, `build`, `repair`, `Check::finish`, `Build::plain` and
/// `Build::built`, in scope where the macro is used (the format's `mod.rs`).
macro_rules! delegations {
    () => {
        fn validate(document: &Value) -> Result<(), Violation> {
            validate(document)
        }
        fn build(document: &Value, estimator: &dyn TokenEstimator) -> Result<Built, FormatError> {
            build(document, estimator)
        }
        fn repair(items: Vec<Value>, repairs: &mut Vec<crate::Repair>) -> Vec<Value> {
            repair::repair(items, repairs)
        }
        fn check_finish(check: Check) -> Result<(), Violation> {
            check.finish()
        }
        fn build_plain(
            build: &mut Build,
            i: usize,
            message: &Plain<'_>,
            estimator: &dyn TokenEstimator,
        ) -> Result<(), FormatError> {
            build.plain(i, message, estimator)
        }
        fn built(build: Build) -> Built {
            build.built
        }
    };
}
pub(crate) use delegations;

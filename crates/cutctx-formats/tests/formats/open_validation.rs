//! [`OpenValidation`] is [`validate`] read in sittings: over random histories of every format
//! (the generators of `repair_equivalence`, raw and repaired), a validation opened over any
//! accepted prefix and appended the rest, in one piece or message by message, says what
//! `validate` says of the whole, and a refused append leaves it as it was.

use cutctx_formats::{Format, OpenValidation, repair, validate};
use proptest::prelude::*;
use serde_json::Value;

use crate::repair_equivalence::{anthropic_message, chat_message, responses_item, wrap};

fn with_list(format: Format, doc: &Value, list: &[Value]) -> Value {
    let mut out = doc.clone();
    match &mut out {
        Value::Array(l) => *l = list.to_vec(),
        Value::Object(m) => {
            m.insert(
                cutctx_formats::list_key(format).to_owned(),
                Value::Array(list.to_vec()),
            );
        }
        _ => unreachable!("wrap makes an array or an object"),
    }
    out
}

fn agrees(format: Format, doc: &Value) -> Result<(), TestCaseError> {
    let list = cutctx_formats::message_list(format, doc).to_vec();
    // Opened over the whole: the same verdict as validate.
    let whole = validate(format, doc);
    prop_assert_eq!(OpenValidation::over(format, doc).map(|_| ()), whole.clone());
    for k in 1..=list.len() {
        let prefix = with_list(format, doc, &list[..k]);
        let Ok(Some(mut open)) = OpenValidation::over(format, &prefix) else {
            continue;
        };
        let mut stepwise = open.clone();
        // In one piece.
        let before = open.clone();
        let got = open.append(&list[k..]);
        prop_assert_eq!(&got, &whole, "split at {} of {}", k, doc);
        if got.is_err() {
            prop_assert_eq!(open.len(), before.len());
            // Unchanged: the same append says the same again.
            prop_assert_eq!(open.append(&list[k..]), whole.clone());
        } else {
            prop_assert_eq!(open.len(), list.len());
        }
        // Message by message: each longer prefix as validate says.
        for j in k..list.len() {
            let expected = validate(format, &with_list(format, doc, &list[..=j]));
            let step = stepwise.append(&list[j..=j]);
            prop_assert_eq!(&step, &expected, "message {} after {} of {}", j, k, doc);
            if step.is_err() {
                break;
            }
        }
    }
    Ok(())
}

fn both(format: Format, doc: Value) -> Result<(), TestCaseError> {
    agrees(format, &doc)?;
    if let Ok((repaired, _)) = repair(format, doc) {
        agrees(format, &repaired)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn chat_appends_as_validate_says(list in prop::collection::vec(chat_message(), 0..16), bare in any::<bool>()) {
        both(Format::OpenAiChat, wrap(Format::OpenAiChat, list, bare))?;
    }

    #[test]
    fn responses_appends_as_validate_says(list in prop::collection::vec(responses_item(), 0..16), bare in any::<bool>()) {
        both(Format::OpenAiResponses, wrap(Format::OpenAiResponses, list, bare))?;
    }

    #[test]
    fn anthropic_appends_as_validate_says(list in prop::collection::vec(anthropic_message(), 0..16), bare in any::<bool>()) {
        both(Format::Anthropic, wrap(Format::Anthropic, list, bare))?;
    }
}

//! The request document's wire form, read strictly in one pass: the reference for every result
//! and every error of the quicker readings, and the checks every reading ends with, in the
//! reference's order (the transcript, then the budget, then the policy).

use std::collections::BTreeMap;

use cutctx::model::SharedTurnRecord;
use cutctx::model::wire::{ObjectOnly, UniqueKeys, WireInt, unique_string_map};
use cutctx::{CompactionBudget, Transcript, TranscriptTurn};
use serde::Deserialize;

use super::Request;
use crate::error::{OpsError, parse_json};

/// The document as written: every key it may hold, and no other.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RequestWire {
    transcript: Turns,
    budget: ObjectOnly<BudgetWire>,
    policy: UniqueKeys,
    #[serde(default, deserialize_with = "unique_string_map")]
    summaries: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetWire {
    max_tokens: WireInt,
    #[serde(default = "default_protected")]
    protected_recent_turns: WireInt,
}

/// The transcript's turns, each built as soon as its record is read, so that no array of
/// records stands beside the turns. A turn that breaks a rule does not stop the reading: the
/// rest of the document may still not be JSON, or not a request, and those errors come first,
/// as they do when every record is read before any turn is built; of the broken turns, the
/// first is reported.
struct Turns(Result<Vec<TranscriptTurn>, cutctx::CompactionError>);

impl<'de> Deserialize<'de> for Turns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Turns;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // What `Vec`'s own visitor says, so the message for a non-array is unchanged.
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Turns, A::Error> {
                let mut turns = Ok(Vec::new());
                while let Some(ObjectOnly(record)) =
                    seq.next_element::<ObjectOnly<SharedTurnRecord>>()?
                {
                    if let Ok(built) = &mut turns {
                        match TranscriptTurn::try_from(record) {
                            Ok(turn) => built.push(turn),
                            Err(e) => turns = Err(e),
                        }
                    }
                }
                Ok(Turns(turns))
            }
        }
        d.deserialize_seq(V)
    }
}

fn default_protected() -> WireInt {
    WireInt(i128::from(CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS))
}

/// The rest of a document whose transcript a quicker reading took, written with `[]` in the
/// transcript's place: `None` when it does not parse, for the strict pass to report.
pub(super) fn rest_of_document(rest: &str) -> Option<RequestWire> {
    let ObjectOnly(wire): ObjectOnly<RequestWire> = serde_json::from_str(rest).ok()?;
    Some(wire)
}

/// The document read in one strict pass: the reference for every result and every error.
pub(super) fn parse_whole(text: &str) -> Result<Request, OpsError> {
    let ObjectOnly(mut wire): ObjectOnly<RequestWire> = parse_json("the request", text)?;
    let turns = std::mem::replace(&mut wire.transcript, Turns(Ok(Vec::new()))).0?;
    finish(Transcript::new(turns), wire)
}

/// The request of this transcript (as built from its turns) and the rest of its document
/// (whose own transcript is not read), checked in the reference's order: the transcript,
/// then the budget, then the policy.
pub(super) fn finish(
    transcript: Result<Transcript, cutctx::CompactionError>,
    wire: RequestWire,
) -> Result<Request, OpsError> {
    let transcript = transcript?;
    let budget = CompactionBudget::from_signed(
        wire.budget.0.max_tokens.0,
        wire.budget.0.protected_recent_turns.0,
    )?;
    let policy = cutctx::policies::registry::from_spec(&wire.policy.0)?;
    Ok(Request {
        transcript,
        budget,
        policy,
        summaries: wire.summaries,
    })
}

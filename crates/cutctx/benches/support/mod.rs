//! The generated agent transcripts every benchmark runs on.

use cutctx::{
    CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, Role, SummarizingPolicy,
    Transcript, TranscriptTurn, default_chain,
};

/// A system turn, then `n - 1` turns cycling assistant-call, tool-result, user.
/// Tool results are `result_bytes` long and estimated at a quarter of that.
pub(crate) fn agent_transcript(n: usize, result_bytes: usize) -> Transcript {
    let line = "2026-11-29T12:00:00Z INFO worker=7 \"cache\" key=9f2c hit=false\n";
    let body: String = line.repeat(result_bytes / line.len() + 1)[..result_bytes].to_owned();
    let mut turns = Vec::with_capacity(n);
    turns.push(
        TranscriptTurn::new("s", Role::System, "You are a careful coding agent.", 20)
            .expect("valid"),
    );
    for i in 0..n.saturating_sub(1) {
        let call = format!("c{}", i / 3);
        let turn = match i % 3 {
            0 => TranscriptTurn::new(
                format!("a{i}"),
                Role::Assistant,
                "Reading the build log.",
                40,
            )
            .expect("valid")
            .with_tool_call_id(call),
            1 => TranscriptTurn::new(
                format!("t{i}"),
                Role::Tool,
                format!("{i}:{body}"),
                (result_bytes / 4) as u64,
            )
            .expect("valid")
            .with_tool_call_id(call),
            _ => {
                TranscriptTurn::new(format!("u{i}"), Role::User, "Keep going.", 30).expect("valid")
            }
        };
        turns.push(turn);
    }
    Transcript::new(turns).expect("unique ids")
}

/// Every shipped policy, by name: masking keeps the two most recent results.
pub(crate) fn every_policy() -> Vec<(&'static str, Box<dyn CompactionPolicy>)> {
    vec![
        ("drop_oldest", Box::new(DropOldestPolicy)),
        (
            "observation_masking",
            Box::new(ObservationMaskingPolicy::new(2).expect("valid")),
        ),
        (
            "summarizing",
            Box::new(SummarizingPolicy::new("compaction.summarize.v1").expect("valid")),
        ),
        (
            "default_chain",
            Box::new(default_chain("compaction.summarize.v1").expect("valid")),
        ),
    ]
}

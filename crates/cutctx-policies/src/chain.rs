//! Policy chains: each member decides over the projection the previous members left.

use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx_invariants::{Analysis, CompactionPlan, build_plan};
use cutctx_model::{
    Action, CompactionBudget, CompactionError, Role, SUMMARY_TURN_ID_PREFIX, SummarizationRequest,
    Transcript, TranscriptTurn, TurnAction, TurnReplacement, details,
};

use crate::masking::realize_all;
use crate::{
    CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, POLICY_VERSION, SummarizingPolicy,
};

/// Runs policies in order, each over the projection of what the previous ones decided, and
/// builds one plan against the real transcript.
///
/// The chain stops as soon as the projection fits. A member sees masked turns at their stub's
/// estimate and a summarized span as one stand-in turn `summary:<group>` at its target; when a
/// member drops or summarizes a stand-in, the group's turns go with it. At the end, exchanges
/// split between members' decisions are reconciled (a partly dropped exchange is dropped whole;
/// a partly summarized one is summarized whole into its earliest group), and the plan records
/// the first estimator ratio any member reported.
///
/// ```
/// use cutctx_policies::{CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, PolicyChain};
/// let chain = PolicyChain::new(vec![
///     Box::new(ObservationMaskingPolicy::new(2)?),
///     Box::new(DropOldestPolicy),
/// ])?;
/// assert_eq!(chain.name(), "chain(observation_masking@1.0.0+drop_oldest@1.0.0)");
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub struct PolicyChain {
    policies: Vec<Box<dyn CompactionPolicy>>,
    name: String,
}

impl std::fmt::Debug for PolicyChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyChain")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The masking, summarizing and drop-oldest chain with the reference's defaults.
///
/// # Errors
///
/// `VALIDATION_ERROR` when `prompt_id` is blank.
///
/// ```
/// let chain = cutctx_policies::default_chain("compaction.summarize.v1")?;
/// use cutctx_policies::CompactionPolicy;
/// assert_eq!(chain.name(), "chain(observation_masking@1.0.0+summarizing@1.0.0+drop_oldest@1.0.0)");
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub fn default_chain(prompt_id: &str) -> Result<PolicyChain, CompactionError> {
    PolicyChain::new(vec![
        Box::new(ObservationMaskingPolicy::new(2)?),
        Box::new(SummarizingPolicy::new(prompt_id)?),
        Box::new(DropOldestPolicy),
    ])
}

impl PolicyChain {
    /// A chain of these policies, run in order.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `policies` is empty.
    pub fn new(policies: Vec<Box<dyn CompactionPolicy>>) -> Result<Self, CompactionError> {
        if policies.is_empty() {
            return Err(CompactionError::validation(
                "A policy chain needs at least one policy: an empty chain would decide nothing.",
                details! {},
            ));
        }
        let members: Vec<String> = policies
            .iter()
            .map(|p| format!("{}@{}", p.name(), p.version()))
            .collect();
        let name = format!("chain({})", members.join("+"));
        Ok(Self { policies, name })
    }

    /// The members, in order.
    #[must_use]
    pub fn policies(&self) -> &[Box<dyn CompactionPolicy>] {
        &self.policies
    }
}

/// A deferred stub: the text before its digest, and the content the digest covers.
type StubJob = (Arc<str>, Arc<str>);

/// What the chain has decided for one real turn so far.
#[derive(Debug, Clone)]
enum Resolved {
    Keep,
    /// A stub. When `pending` is set, `content` has a placeholder digest of the right length,
    /// and the real stub is `pending.0` + digest of `pending.1` + `)`.
    Mask {
        content: Arc<str>,
        estimate: u64,
        pending: Option<(Arc<str>, Arc<str>)>,
    },
    Summarize(Arc<str>),
    Drop,
}

#[derive(Debug, Clone)]
struct Group {
    /// Real positions recorded when the request was absorbed.
    members: Vec<usize>,
    target_tokens: u64,
    prompt_id: Arc<str>,
}

struct State<'t> {
    transcript: &'t Transcript,
    resolved: Vec<Resolved>,
    groups: BTreeMap<Arc<str>, Group>,
}

/// The digest-shaped filler of a stub whose digest is not computed yet.
const PENDING_DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000)";

impl State<'_> {
    /// The projection, and for each of its turns the real position it stands for (`None` for a
    /// summary stand-in).
    fn project(&self) -> Result<(Transcript, Vec<Option<usize>>), CompactionError> {
        let mut turns = Vec::with_capacity(self.resolved.len());
        let mut origin = Vec::with_capacity(self.resolved.len());
        let mut emitted: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        for (p, (turn, r)) in self
            .transcript
            .turns()
            .iter()
            .zip(&self.resolved)
            .enumerate()
        {
            match r {
                Resolved::Keep => {
                    turns.push(turn.clone());
                    origin.push(Some(p));
                }
                Resolved::Mask {
                    content, estimate, ..
                } => {
                    turns.push(turn.clone().with_content(content.clone(), *estimate));
                    origin.push(Some(p));
                }
                Resolved::Summarize(gid) => {
                    if !emitted.insert(gid) {
                        continue;
                    }
                    if let Some(group) = self.groups.get(gid) {
                        turns.push(TranscriptTurn::new(
                            format!("{SUMMARY_TURN_ID_PREFIX}{gid}"),
                            Role::Assistant,
                            "",
                            group.target_tokens,
                        )?);
                        origin.push(None);
                    }
                }
                Resolved::Drop => {}
            }
        }
        Ok((Transcript::new(turns)?, origin))
    }

    /// The real positions an action on projection turn `id` (at real position `real`) affects.
    fn members(&self, id: &str, real: Option<usize>) -> Vec<usize> {
        match id.strip_prefix(SUMMARY_TURN_ID_PREFIX) {
            Some(gid) => self
                .groups
                .get(gid)
                .map(|g| g.members.clone())
                .unwrap_or_default(),
            None => real.into_iter().collect(),
        }
    }

    /// Computes the digest of the stub at `p` now, if it is pending.
    fn realize(&mut self, p: usize) {
        if let Resolved::Mask {
            content, pending, ..
        } = &mut self.resolved[p]
            && let Some((prefix, source)) = pending.take()
        {
            *content = crate::masking::realize(&prefix, &source).into();
        }
    }

    fn has_pending(&self) -> bool {
        self.resolved.iter().any(|r| {
            matches!(
                r,
                Resolved::Mask {
                    pending: Some(_),
                    ..
                }
            )
        })
    }

    fn realize_everything(&mut self) {
        let jobs: Vec<(usize, StubJob)> = self
            .resolved
            .iter()
            .enumerate()
            .filter_map(|(p, r)| match r {
                Resolved::Mask {
                    pending: Some(job), ..
                } => Some((p, job.clone())),
                _ => None,
            })
            .collect();
        let stubs = realize_all(&jobs.iter().map(|(_, j)| j.clone()).collect::<Vec<_>>());
        for ((p, _), stub) in jobs.into_iter().zip(stubs) {
            if let Resolved::Mask {
                content, pending, ..
            } = &mut self.resolved[p]
            {
                *content = stub;
                *pending = None;
            }
        }
    }

    fn drop_group_of(&mut self, id: &str) {
        if let Some(gid) = id.strip_prefix(SUMMARY_TURN_ID_PREFIX) {
            self.groups.remove(gid);
        }
    }

    /// Takes in a member's plan over the projection.
    fn absorb(&mut self, plan: &CompactionPlan, origin: &[Option<usize>]) {
        for (j, action) in plan.actions.iter().enumerate() {
            let id = action.turn_id();
            let new = match action.action() {
                Action::Keep => continue,
                Action::Mask => match action.replacement() {
                    Some(r) => Resolved::Mask {
                        content: r.content.clone(),
                        estimate: r.token_estimate,
                        pending: None,
                    },
                    None => continue,
                },
                Action::Drop => Resolved::Drop,
                Action::Summarize => match action.summary_group() {
                    Some(g) => Resolved::Summarize(Arc::from(g)),
                    None => continue,
                },
            };
            for p in self.members(id, origin.get(j).copied().flatten()) {
                self.resolved[p] = new.clone();
            }
            if action.action().is_removal() {
                self.drop_group_of(id);
            }
        }
        self.absorb_requests(&plan.summarization_requests);
    }

    fn absorb_requests(&mut self, requests: &[SummarizationRequest]) {
        if requests.is_empty() {
            return;
        }
        let mut now_in: BTreeMap<&str, Vec<usize>> = requests
            .iter()
            .map(|r| (r.group_id(), Vec::new()))
            .collect();
        for (p, r) in self.resolved.iter().enumerate() {
            if let Resolved::Summarize(g) = r
                && let Some(v) = now_in.get_mut(&**g)
            {
                v.push(p);
            }
        }
        let mut updates = Vec::with_capacity(requests.len());
        for r in requests {
            let members = now_in.get(r.group_id()).cloned().unwrap_or_default();
            updates.push((
                r.group_id_arc().clone(),
                Group {
                    members,
                    target_tokens: r.target_tokens(),
                    prompt_id: Arc::from(r.prompt_id()),
                },
            ));
        }
        self.groups.extend(updates);
    }

    /// Masks decided by a masking member over the projection, digests deferred.
    fn absorb_masks(
        &mut self,
        policy: &ObservationMaskingPolicy,
        projection: &Transcript,
        origin: &[Option<usize>],
        budget: &CompactionBudget,
    ) -> Result<bool, CompactionError> {
        let analysis = Analysis::of(projection, budget);
        analysis.require_satisfiable(budget)?;
        let masks = policy.pending_masks(projection, budget, &analysis);
        for m in &masks {
            let Some(p) = origin.get(m.position).copied().flatten() else {
                continue;
            };
            // The digest covers what the member saw: the real content, or an earlier stub.
            self.realize(p);
            let source = match &self.resolved[p] {
                Resolved::Mask { content, .. } => content.clone(),
                _ => self.transcript.turns()[p].content_arc().clone(),
            };
            let mut filler = String::with_capacity(m.prefix.len() + PENDING_DIGEST.len());
            filler.push_str(&m.prefix);
            filler.push_str(PENDING_DIGEST);
            self.resolved[p] = Resolved::Mask {
                content: filler.into(),
                estimate: m.estimate,
                pending: Some((m.prefix.clone(), source)),
            };
        }
        Ok(!masks.is_empty())
    }

    /// Makes every exchange travel together again after members decided turn by turn.
    fn reconcile(&mut self, analysis: &Analysis) {
        for members in analysis.exchanges.iter() {
            let retained = |r: &Resolved| matches!(r, Resolved::Keep | Resolved::Mask { .. });
            if members.iter().all(|&p| retained(&self.resolved[p])) {
                continue;
            }
            if members
                .iter()
                .any(|&p| matches!(self.resolved[p], Resolved::Drop))
            {
                for &p in members {
                    self.resolved[p] = Resolved::Drop;
                }
                continue;
            }
            let first_group = members.iter().find_map(|&p| match &self.resolved[p] {
                Resolved::Summarize(g) => Some(g.clone()),
                _ => None,
            });
            let Some(group) = first_group else { continue };
            for &p in members {
                self.resolved[p] = Resolved::Summarize(group.clone());
            }
        }
        // Recompute each group's members; a group left empty goes.
        let mut now_in: BTreeMap<Arc<str>, Vec<usize>> = BTreeMap::new();
        for (p, r) in self.resolved.iter().enumerate() {
            if let Resolved::Summarize(g) = r {
                now_in.entry(g.clone()).or_default().push(p);
            }
        }
        self.groups.retain(|gid, group| match now_in.remove(gid) {
            Some(members) => {
                group.members = members;
                true
            }
            None => false,
        });
    }
}

impl CompactionPolicy for PolicyChain {
    fn name(&self) -> &str {
        &self.name
    }

    fn version(&self) -> &str {
        POLICY_VERSION
    }

    fn decide(
        &self,
        t: &Transcript,
        b: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        let analysis = Analysis::of(t, b);
        analysis.require_satisfiable(b)?;
        let mut state = State {
            transcript: t,
            resolved: vec![Resolved::Keep; t.len()],
            groups: BTreeMap::new(),
        };
        let mut ratio: Option<f64> = None;
        let mut projection: Option<(Transcript, Vec<Option<usize>>)> = None;
        let identity: Vec<Option<usize>> = (0..t.len()).map(Some).collect();
        for policy in &self.policies {
            if projection.as_ref().map_or(t, |(v, _)| v).token_estimate() <= b.max_tokens {
                break;
            }
            let deferring = policy.as_masking().filter(|m| m.defers_digests());
            // A member that reads content must see real stubs, not placeholders.
            if deferring.is_none() && policy.reads_content() && state.has_pending() {
                state.realize_everything();
                projection = Some(state.project()?);
            }
            let (view, origin) = match &projection {
                Some((v, o)) => (v, o.as_slice()),
                None => (t, identity.as_slice()),
            };
            match deferring {
                Some(masking) => {
                    let masked = state.absorb_masks(masking, view, origin, b)?;
                    if ratio.is_none() && masked {
                        ratio = masking.ratio();
                    }
                }
                None => {
                    let plan = policy.decide(view, b)?;
                    if ratio.is_none() {
                        ratio = plan.estimator_ratio;
                    }
                    state.absorb(&plan, origin);
                }
            }
            projection = Some(state.project()?);
        }
        state.reconcile(&analysis);
        state.realize_everything();
        let mut groups: Vec<(usize, SummarizationRequest)> = Vec::with_capacity(state.groups.len());
        for (gid, g) in &state.groups {
            let ids = g
                .members
                .iter()
                .map(|&p| t.turns()[p].turn_id_arc().clone())
                .collect();
            let first = g.members.first().copied().unwrap_or(0);
            groups.push((
                first,
                SummarizationRequest::new(gid.clone(), ids, g.target_tokens, g.prompt_id.clone())?,
            ));
        }
        groups.sort_by_key(|(first, _)| *first);
        let actions = t
            .turns()
            .iter()
            .zip(state.resolved)
            .map(|(turn, r)| {
                let id = turn.turn_id_arc().clone();
                match r {
                    Resolved::Keep => TurnAction::keep(id),
                    Resolved::Mask {
                        content, estimate, ..
                    } => TurnAction::mask(
                        id,
                        TurnReplacement {
                            content,
                            token_estimate: estimate,
                        },
                    ),
                    Resolved::Summarize(g) => TurnAction::summarize(id, g),
                    Resolved::Drop => TurnAction::drop_turn(id),
                }
            })
            .collect();
        let requests = groups.into_iter().map(|(_, r)| r).collect();
        build_plan(
            t,
            b,
            &analysis,
            actions,
            requests,
            &self.name,
            POLICY_VERSION,
            ratio,
        )
    }
}

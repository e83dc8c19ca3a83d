//! Policy chains: each member decides over the projection the previous members left.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};
use cutctx_model::{
    Action, CompactionBudget, CompactionError, DerivedTurn, Role, SUMMARY_TURN_ID_PREFIX,
    SummarizationRequest, Transcript, TranscriptTurn, TurnAction, TurnReplacement, details,
};

use crate::ContentDigests;
use crate::masking::{StubJob, StubSource, realize_all};
use crate::summarizing::group_id_for;
use crate::{
    CompactionPolicy, DeferredMasks, DropOldestPolicy, ObservationMaskingPolicy, POLICY_VERSION,
    Parallelism, Reads, Shape, ShapeDecision, SummarizingPolicy,
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
    parallelism: Parallelism,
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
        Box::new(ObservationMaskingPolicy::new(
            ObservationMaskingPolicy::DEFAULT_KEEP_RECENT_RESULTS,
        )?),
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
        Ok(Self {
            policies,
            name,
            parallelism: Parallelism::Automatic,
        })
    }

    /// The same chain computing the digests of deferred masks on at most as many threads as
    /// `parallelism` allows. (A member that computes digests itself follows its own setting.)
    /// Plans do not depend on it.
    #[must_use]
    pub const fn with_parallelism(mut self, parallelism: Parallelism) -> Self {
        self.parallelism = parallelism;
        self
    }

    /// The members, in order.
    #[must_use]
    pub fn policies(&self) -> &[Box<dyn CompactionPolicy>] {
        &self.policies
    }

    /// The chain's plan over `t`, its masks' digests read from `digests` when given, else
    /// from `t`'s contents.
    fn decide_reading(
        &self,
        t: &Transcript,
        analysis: &Analysis,
        digests: Option<&dyn ContentDigests>,
    ) -> Result<CompactionPlan, CompactionError> {
        analysis.require_for(t, analysis.budget())?;
        analysis.require_satisfiable()?;
        // Per member: whether it or a later one reads content, and so needs it in its
        // projection.
        let mut content_needed = vec![false; self.policies.len() + 1];
        for (i, p) in self.policies.iter().enumerate().rev() {
            content_needed[i] = content_needed[i + 1] || p.reads() == Reads::Content;
        }
        let mut run = Run::new(t, analysis, self.parallelism, digests);
        for (policy, &content) in self.policies.iter().zip(&content_needed) {
            if let Next::Stop = run.member(policy.as_ref(), content)? {
                break;
            }
        }
        run.finish(&self.name)
    }
}

/// What the chain has decided for one real turn so far.
#[derive(Debug, Clone)]
enum Resolved {
    Keep,
    /// A stub with its text.
    Mask {
        content: Arc<str>,
        estimate: u64,
    },
    /// A stub whose digest is not computed yet: a later member may still discard it.
    PendingMask {
        /// Index into the chain's list of stub jobs; kept out of line so that this enum,
        /// one per turn, stays small.
        job: usize,
        estimate: u64,
    },
    Summarize(Arc<str>),
    Drop,
}

impl Resolved {
    const fn retained(&self) -> bool {
        matches!(
            self,
            Self::Keep | Self::Mask { .. } | Self::PendingMask { .. }
        )
    }
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
    /// The stubs whose digests are deferred, referred to by `Resolved::PendingMask`.
    jobs: Vec<StubJob>,
    /// How many threads digests may be computed on.
    parallelism: Parallelism,
    /// Where the turns' digests are read when their contents are not in `transcript`.
    digests: Option<&'t dyn ContentDigests>,
}

/// The groups whose stand-in a walk over the turns has already emitted.
#[derive(Default)]
struct Emitted<'a> {
    /// The group of the previous summarized turn: a group's turns are usually adjacent, so
    /// most checks end here without a lookup.
    last: Option<&'a Arc<str>>,
    all: BTreeSet<&'a str>,
}

impl<'a> Emitted<'a> {
    /// Whether this is the first turn seen of group `gid`.
    fn first_time(&mut self, gid: &'a Arc<str>) -> bool {
        if self.last.is_some_and(|last| same(last, gid)) {
            return false;
        }
        self.last = Some(gid);
        self.all.insert(gid)
    }
}

/// A projection reduced to what shape-reading members ([`Reads::Shape`]) read: which real turn
/// or stand-in each of its turns is, and the estimates. Building it touches no turn's id or
/// content, where projecting a transcript clones every turn.
struct Projected {
    /// Per projection turn: the real position it stands for, `None` for a summary stand-in.
    /// Itself `None` while every real turn is retained and no stand-in exists: the projection
    /// then has the transcript's turns, in place.
    origin: Option<Vec<Option<usize>>>,
    /// The group of each stand-in, by projection position.
    stand_ins: BTreeMap<usize, Arc<str>>,
    estimates: Vec<u64>,
    total: u64,
}

impl Projected {
    /// The real position projection turn `j` stands for, `None` for a stand-in.
    fn real(&self, j: usize) -> Option<usize> {
        match &self.origin {
            None => Some(j),
            Some(origin) => origin[j],
        }
    }

    /// The projection's analysis, derived from the transcript's. Bound to no transcript: it
    /// informs a member's decisions, never vouches for a plan.
    fn analysis(&self, t: &Transcript, analysis: &Analysis) -> Result<Analysis, CompactionError> {
        let fixed = t.system_or_pinned();
        match &self.origin {
            Some(origin) => Ok(analysis.project_shape(
                origin,
                |j| origin[j].is_some_and(|p| fixed[p]),
                |j| self.estimates[j],
            )),
            // The same turns in the same places: the same exchanges and the same untouchable
            // and removable turns. Only the estimates may differ, so the floor is summed again.
            None => analysis.with_estimates(&self.estimates),
        }
    }
}

/// What each turn of a member's view stands for in the transcript.
#[derive(Clone, Copy)]
enum Origin<'a> {
    /// The view is the transcript itself.
    Identity,
    /// Per view turn: its real position, `None` for a summary stand-in.
    Map(&'a [Option<usize>]),
}

impl Origin<'_> {
    /// The real position view turn `j` stands for, if any.
    fn real(self, j: usize) -> Option<usize> {
        match self {
            Self::Identity => Some(j),
            Self::Map(map) => map.get(j).copied().flatten(),
        }
    }
}

/// The error for a projection whose estimates sum past `u64::MAX`, at its `turn_count`th turn.
fn projected_overflow(turn_count: usize) -> CompactionError {
    CompactionError::validation(
        format!(
            "The projected transcript's estimates sum beyond {}.",
            u64::MAX
        ),
        details! { "turn_count" => turn_count },
    )
}

/// Whether two group ids are equal, by pointer first: the ids of one group share one string.
fn same(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// The content a projection shows for a stub whose digest is pending, and for every turn when
/// no member still to run reads content. Only members that do not read content see it; the
/// chain realizes every stub, and projects real content, before running one that does.
fn pending_content() -> Arc<str> {
    static EMPTY: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Arc::from("")).clone()
}

impl State<'_> {
    /// The projection, and for each of its turns the real position it stands for (`None` for a
    /// summary stand-in).
    ///
    /// With `content` false, kept turns show empty content: for members that never read it,
    /// this spares touching every turn's text.
    fn project(&self, content: bool) -> Result<(Transcript, Vec<Option<usize>>), CompactionError> {
        // First the shape: which real turn or stand-in each projection turn is.
        let mut origin = Vec::with_capacity(self.resolved.len());
        let mut stand_ins: Vec<TranscriptTurn> = Vec::new();
        let mut emitted: BTreeSet<&str> = BTreeSet::new();
        for (p, r) in self.resolved.iter().enumerate() {
            match r {
                Resolved::Keep | Resolved::Mask { .. } | Resolved::PendingMask { .. } => {
                    origin.push(Some(p))
                }
                Resolved::Summarize(gid) => {
                    if emitted.insert(gid)
                        && let Some(group) = self.groups.get(gid)
                    {
                        stand_ins.push(TranscriptTurn::new(
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
        // Then the turns, straight into the projection.
        let turns = self.transcript.turns();
        let mut stand_ins = stand_ins.into_iter();
        let parts = origin.iter().filter_map(|o| match o {
            Some(p) => {
                let turn = &turns[*p];
                Some(DerivedTurn::Kept(
                    *p,
                    match &self.resolved[*p] {
                        Resolved::Mask { content, estimate } => {
                            turn.with_replaced_content(content.clone(), *estimate)
                        }
                        Resolved::PendingMask { estimate, .. } => {
                            turn.with_replaced_content(pending_content(), *estimate)
                        }
                        _ if content => turn.clone(),
                        _ => turn.with_replaced_content(pending_content(), turn.token_estimate()),
                    },
                ))
            }
            None => stand_ins.next().map(DerivedTurn::New),
        });
        let projection = self.transcript.derive(parts)?;
        Ok((projection, origin))
    }

    /// The projection's total estimate, without building it. Saturates: a total past `u64::MAX`
    /// is over any budget all the same.
    fn projected_total(&self) -> u64 {
        let mut emitted = Emitted::default();
        let mut total = 0_u64;
        for (&kept, r) in self.transcript.token_estimates().iter().zip(&self.resolved) {
            let estimate = match r {
                Resolved::Keep => kept,
                Resolved::Mask { estimate, .. } | Resolved::PendingMask { estimate, .. } => {
                    *estimate
                }
                Resolved::Summarize(gid) if emitted.first_time(gid) => {
                    // Every summarized turn's group is known: groups and resolutions change
                    // together (`absorb`, `set`, `reconcile`).
                    self.groups.get(gid).map_or_else(
                        || {
                            debug_assert!(false, "a summarized turn without its group");
                            0
                        },
                        |g| g.target_tokens,
                    )
                }
                Resolved::Summarize(_) | Resolved::Drop => 0,
            };
            total = total.saturating_add(estimate);
        }
        total
    }

    /// The projection's shape: the turns [`State::project`] would build, without building them.
    fn shape(&self) -> Result<Projected, CompactionError> {
        let estimates = self.transcript.token_estimates();
        if self.resolved.iter().all(Resolved::retained) {
            let mut total = 0_u64;
            let mut shape_estimates = Vec::with_capacity(self.resolved.len());
            for (&kept, r) in estimates.iter().zip(&self.resolved) {
                let estimate = match r {
                    Resolved::Mask { estimate, .. } | Resolved::PendingMask { estimate, .. } => {
                        *estimate
                    }
                    _ => kept,
                };
                total = total
                    .checked_add(estimate)
                    .ok_or_else(|| projected_overflow(shape_estimates.len() + 1))?;
                shape_estimates.push(estimate);
            }
            return Ok(Projected {
                origin: None,
                stand_ins: BTreeMap::new(),
                estimates: shape_estimates,
                total,
            });
        }
        let mut origin = Vec::with_capacity(self.resolved.len());
        let mut shape = Projected {
            origin: None,
            stand_ins: BTreeMap::new(),
            estimates: Vec::with_capacity(self.resolved.len()),
            total: 0,
        };
        let mut emitted = Emitted::default();
        for (p, (&kept, r)) in estimates.iter().zip(&self.resolved).enumerate() {
            let (slot, estimate) = match r {
                Resolved::Keep => (Some(p), kept),
                Resolved::Mask { estimate, .. } | Resolved::PendingMask { estimate, .. } => {
                    (Some(p), *estimate)
                }
                Resolved::Summarize(gid) => match self.groups.get(gid) {
                    Some(group) if emitted.first_time(gid) => {
                        shape.stand_ins.insert(origin.len(), gid.clone());
                        (None, group.target_tokens)
                    }
                    _ => continue,
                },
                Resolved::Drop => continue,
            };
            shape.total = shape
                .total
                .checked_add(estimate)
                .ok_or_else(|| projected_overflow(origin.len() + 1))?;
            origin.push(slot);
            shape.estimates.push(estimate);
        }
        shape.origin = Some(origin);
        Ok(shape)
    }

    /// The real positions an action on projection turn `id` (at real position `real`) affects.
    /// As in the reference, any id with the summary prefix is read as a stand-in, and one that
    /// names no group affects no turn (a real turn may carry such an id).
    fn members(&self, id: &str, real: Option<usize>) -> Vec<usize> {
        match id.strip_prefix(SUMMARY_TURN_ID_PREFIX) {
            Some(gid) => self
                .groups
                .get(gid)
                .map(|g| g.members.clone())
                // A stand-in of no group (documented above): it affects no turn.
                .unwrap_or_default(),
            None => real.into_iter().collect(),
        }
    }

    /// The stub at `p` with its digest, if it is pending.
    fn realize(&mut self, p: usize) -> Result<(), CompactionError> {
        if let Resolved::PendingMask { job, estimate } = self.resolved[p] {
            self.resolved[p] = Resolved::Mask {
                content: self.jobs[job].realize_with(self.transcript, self.digests)?,
                estimate,
            };
        }
        Ok(())
    }

    fn has_pending(&self) -> bool {
        self.resolved
            .iter()
            .any(|r| matches!(r, Resolved::PendingMask { .. }))
    }

    /// Computes every pending digest, on all cores.
    fn realize_everything(&mut self) -> Result<(), CompactionError> {
        let (positions, jobs): (Vec<usize>, Vec<StubJob>) = self
            .resolved
            .iter()
            .enumerate()
            .filter_map(|(p, r)| match r {
                Resolved::PendingMask { job, .. } => Some((p, self.jobs[*job].clone())),
                _ => None,
            })
            .unzip();
        for (p, content) in positions.into_iter().zip(realize_all(
            &jobs,
            self.transcript,
            self.parallelism,
            self.digests,
        )?) {
            if let Resolved::PendingMask { estimate, .. } = self.resolved[p] {
                self.resolved[p] = Resolved::Mask { content, estimate };
            }
        }
        // No stub is pending any more: free the jobs before the plan is built.
        self.jobs = Vec::new();
        Ok(())
    }

    fn forget_group_of(&mut self, id: &str) {
        if let Some(gid) = id.strip_prefix(SUMMARY_TURN_ID_PREFIX) {
            self.groups.remove(gid);
        }
    }

    /// Takes in a member's plan over the projection.
    fn absorb(&mut self, plan: &CompactionPlan, origin: Origin<'_>) {
        for (j, action) in plan.actions.iter().enumerate() {
            let id = action.turn_id();
            let new = match (
                action.action(),
                action.replacement(),
                action.summary_group(),
            ) {
                (Action::Mask, Some(r), _) => Resolved::Mask {
                    content: r.content.clone(),
                    estimate: r.token_estimate,
                },
                (Action::Drop, _, _) => Resolved::Drop,
                (Action::Summarize, _, Some(g)) => Resolved::Summarize(Arc::from(g)),
                _ => continue,
            };
            for p in self.members(id, origin.real(j)) {
                self.resolved[p] = new.clone();
            }
            if action.action().is_removal() {
                self.forget_group_of(id);
            }
        }
        let requests = &plan.summarization_requests;
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
        let updates: Vec<(Arc<str>, Group)> = requests
            .iter()
            .map(|r| {
                // `now_in` has a key for every request, made just above.
                let members = now_in
                    .get(r.group_id())
                    .cloned()
                    .expect("`now_in` has a key for every request");
                let group = Group {
                    members,
                    target_tokens: r.target_tokens(),
                    prompt_id: Arc::from(r.prompt_id()),
                };
                (r.group_id_arc().clone(), group)
            })
            .collect();
        self.groups.extend(updates);
    }

    /// Sets `new` (a removal) on the real turns projection turn `j` stands for; removing a
    /// summary stand-in also forgets its group. As in the reference, any id with the summary
    /// prefix is read as a stand-in.
    fn set(&mut self, shape: &Projected, j: usize, new: &Resolved) {
        let t = self.transcript;
        let group = match shape.real(j) {
            Some(p) => t.turn_id_arcs()[p].strip_prefix(SUMMARY_TURN_ID_PREFIX),
            None => shape.stand_ins.get(&j).map(|g| &**g),
        };
        match group {
            Some(gid) => {
                if let Some(group) = self.groups.remove(gid) {
                    for p in group.members {
                        self.resolved[p] = new.clone();
                    }
                }
            }
            None => {
                if let Some(p) = shape.real(j) {
                    self.resolved[p] = new.clone();
                }
            }
        }
    }

    /// A shape-reading member's decision over the projection, taken without a plan. The
    /// decision's positions are checked here; what it does to the rules is checked when the
    /// final plan is built.
    fn absorb_shape(
        &mut self,
        decision: ShapeDecision,
        shape: &Projected,
        member: &str,
    ) -> Result<(), CompactionError> {
        let len = shape.estimates.len();
        match decision {
            ShapeDecision::Nothing => Ok(()),
            ShapeDecision::Drop(positions) => {
                require_increasing(member, &positions, len)?;
                for j in positions {
                    self.set(shape, j, &Resolved::Drop);
                }
                Ok(())
            }
            ShapeDecision::Summarize {
                span,
                target_tokens,
                prompt_id,
            } => {
                if span.is_empty() || span.end > len {
                    return Err(out_of_shape(member, span.end.max(span.start), len));
                }
                self.absorb_summary(span, target_tokens, prompt_id, shape);
                Ok(())
            }
        }
    }

    /// Folds projection turns `span` into one new group.
    fn absorb_summary(
        &mut self,
        span: std::ops::Range<usize>,
        target_tokens: u64,
        prompt_id: Arc<str>,
        shape: &Projected,
    ) {
        let t = self.transcript;
        let ids = span.clone().map(|j| match shape.real(j) {
            Some(p) => Cow::Borrowed(&*t.turn_id_arcs()[p]),
            None => Cow::Owned(format!(
                "{SUMMARY_TURN_ID_PREFIX}{}",
                shape.stand_ins.get(&j).map_or_else(
                    || {
                        debug_assert!(false, "a projection turn with no real turn is a stand-in");
                        ""
                    },
                    |g| &**g,
                )
            )),
        });
        let gid: Arc<str> = group_id_for(ids).into();
        let new = Resolved::Summarize(gid.clone());
        for j in span {
            self.set(shape, j, &new);
        }
        let members: Vec<usize> = self
            .resolved
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Resolved::Summarize(g) if same(g, &gid)))
            .map(|(p, _)| p)
            .collect();
        let group = Group {
            members,
            target_tokens,
            prompt_id,
        };
        self.groups.insert(gid, group);
    }

    /// Masks a member decided over `projection`, their digests deferred. A mask on a summary
    /// stand-in masks nothing: a stand-in has no content of its own yet.
    fn absorb_masks(
        &mut self,
        deferred: &DeferredMasks,
        projection: &Transcript,
        origin: Origin<'_>,
        member: &str,
    ) -> Result<(), CompactionError> {
        let positions: Vec<usize> = deferred.masks.iter().map(|m| m.position).collect();
        require_increasing(member, &positions, projection.len())?;
        // Room for every job at once, rather than grown by doubling onto fresh pages.
        self.jobs.reserve(deferred.masks.len());
        for m in &deferred.masks {
            let Some(p) = origin.real(m.position) else {
                continue;
            };
            // The digest covers what the member saw: the real content, or an earlier stub.
            self.realize(p)?;
            let source = match &self.resolved[p] {
                Resolved::Mask { content, .. } => StubSource::Text(content.clone()),
                _ => StubSource::Turn(p),
            };
            self.jobs.push(StubJob {
                placeholder: deferred.placeholder.clone(),
                original_tokens: projection.token_estimates()[m.position],
                source,
            });
            self.resolved[p] = Resolved::PendingMask {
                job: self.jobs.len() - 1,
                estimate: m.estimate,
            };
        }
        Ok(())
    }

    /// Makes every exchange travel together again after members decided turn by turn.
    fn reconcile(&mut self, analysis: &Analysis) {
        for members in analysis.exchanges().iter() {
            if members.iter().all(|&p| self.resolved[p].retained()) {
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
            if members
                .iter()
                .all(|&p| matches!(&self.resolved[p], Resolved::Summarize(g) if same(g, &group)))
            {
                continue;
            }
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

/// The error for a member's decision that names a position outside the projection it was
/// given, or positions out of order.
fn out_of_shape(member: &str, position: usize, len: usize) -> CompactionError {
    CompactionError::validation(
        format!(
            "Chain member {} decided on position {position} of a projection of {len} turns, \
             or on positions out of order.",
            cutctx_model::py_repr_str(member)
        ),
        details! { "policy_name" => member, "position" => position, "turn_count" => len },
    )
}

/// Refuses positions that are not strictly increasing and below `len`.
fn require_increasing(
    member: &str,
    positions: &[usize],
    len: usize,
) -> Result<(), CompactionError> {
    let mut next = 0;
    for &j in positions {
        if j < next || j >= len {
            return Err(out_of_shape(member, j, len));
        }
        next = j + 1;
    }
    Ok(())
}

/// One run of a chain over a transcript: what members decided so far, and what the chain
/// knows of the projection they leave.
struct Run<'t> {
    state: State<'t>,
    analysis: &'t Analysis,
    /// The first estimator ratio a member reported.
    ratio: Option<f64>,
    /// Whether members have decided anything yet: until then the projection is the transcript
    /// itself.
    stale: bool,
}

/// Whether the chain goes on to its next member.
enum Next {
    Member,
    Stop,
}

impl<'t> Run<'t> {
    fn new(
        t: &'t Transcript,
        analysis: &'t Analysis,
        parallelism: Parallelism,
        digests: Option<&'t dyn ContentDigests>,
    ) -> Self {
        Self {
            state: State {
                transcript: t,
                resolved: vec![Resolved::Keep; t.len()],
                groups: BTreeMap::new(),
                jobs: Vec::new(),
                parallelism,
                digests,
            },
            analysis,
            ratio: None,
            stale: false,
        }
    }

    /// Runs one member over the projection, unless the projection already fits.
    /// `content` says whether this member or a later one reads content.
    fn member(
        &mut self,
        policy: &dyn CompactionPolicy,
        content: bool,
    ) -> Result<Next, CompactionError> {
        let t = self.state.transcript;
        let reads = policy.reads();
        // A shape-reading member reads only the projection's shape: once members have decided,
        // its total is the one to test, so the shape is taken once, here.
        let mut shape = None;
        let total = if !self.stale {
            t.token_estimate()
        } else if reads == Reads::Shape {
            let taken = self.state.shape()?;
            let total = taken.total;
            shape = Some(taken);
            total
        } else {
            self.state.projected_total()
        };
        if total <= self.analysis.budget().max_tokens {
            return Ok(Next::Stop);
        }
        if reads == Reads::Shape && shape.is_none() {
            shape = Some(self.state.shape()?);
        }
        // A member that reads content must see real stubs, not placeholders. (A shape-reading
        // member reads none, so a shape taken above stays true.)
        if reads == Reads::Content && self.state.has_pending() {
            self.state.realize_everything()?;
            self.stale = true;
        }
        let decided_on_shape = match shape {
            Some(shape) => self.on_shape(policy, &shape)?,
            None => false,
        };
        if !decided_on_shape {
            self.on_projection(policy, content)?;
        }
        self.stale = true;
        Ok(Next::Member)
    }

    /// A member's decision over the projection's shape, if it gives one.
    fn on_shape(
        &mut self,
        policy: &dyn CompactionPolicy,
        shape: &Projected,
    ) -> Result<bool, CompactionError> {
        let t = self.state.transcript;
        let shape_analysis = shape.analysis(t, self.analysis)?;
        let view = Shape::with_total(&shape.estimates, shape.total, &shape_analysis)?;
        let Some(decision) = policy.decide_shape(&view) else {
            return Ok(false);
        };
        self.state.absorb_shape(decision?, shape, policy.name())?;
        Ok(true)
    }

    /// A member's decisions over the projection as a transcript: deferred masks if it offers
    /// them, else its plan.
    fn on_projection(
        &mut self,
        policy: &dyn CompactionPolicy,
        content: bool,
    ) -> Result<(), CompactionError> {
        let t = self.state.transcript;
        let projected;
        let (view, origin, view_analysis) = if self.stale {
            let (view, origin) = self.state.project(content)?;
            let view_analysis = Analysis::of(&view, self.analysis.budget());
            projected = (view, origin, view_analysis);
            (
                &projected.0,
                Origin::Map(projected.1.as_slice()),
                &projected.2,
            )
        } else {
            (t, Origin::Identity, self.analysis)
        };
        if let Some(deferred) = policy.decide_masks(view, view_analysis) {
            let deferred = deferred?;
            self.state
                .absorb_masks(&deferred, view, origin, policy.name())?;
            self.ratio = self.ratio.or(deferred.estimator_ratio);
        } else {
            let plan = policy.decide_with_analysis(view, view_analysis)?;
            self.ratio = self.ratio.or(plan.estimator_ratio);
            self.state.absorb(&plan, origin);
        }
        Ok(())
    }

    /// The plan: exchanges reconciled, every digest computed, requests ordered by each
    /// group's first turn, built and validated against the transcript.
    fn finish(mut self, name: &str) -> Result<CompactionPlan, CompactionError> {
        let t = self.state.transcript;
        self.state.reconcile(self.analysis);
        self.state.realize_everything()?;
        let mut requests: Vec<(usize, SummarizationRequest)> =
            Vec::with_capacity(self.state.groups.len());
        for (gid, g) in &self.state.groups {
            // Reconciling removes every group left without members.
            let Some(&first) = g.members.first() else {
                debug_assert!(false, "a group without members survived reconciling");
                return Err(CompactionError::validation(
                    format!(
                        "Summary group {} lost every turn.",
                        cutctx_model::py_repr_str(gid)
                    ),
                    details! { "group_id" => &**gid },
                ));
            };
            let request = SummarizationRequest::for_positions(
                gid.clone(),
                t,
                &g.members,
                g.target_tokens,
                g.prompt_id.clone(),
            )?;
            requests.push((first, request));
        }
        requests.sort_by_key(|(first, _)| *first);
        // Every digest was computed above.
        if let Some(p) = self
            .state
            .resolved
            .iter()
            .position(|r| matches!(r, Resolved::PendingMask { .. }))
        {
            debug_assert!(false, "a stub left pending after realizing every one");
            let id = t.turn_id_arcs()[p].clone();
            return Err(CompactionError::validation(
                format!(
                    "The stub of turn {} was never computed.",
                    cutctx_model::py_repr_str(&id)
                ),
                details! { "turn_id" => &*id },
            ));
        }
        // Written in place, on the pool's threads for a long transcript: most of the work is
        // the first touch of the list's pages.
        let actions = cutctx_model::beside::zip_map(
            self.state.resolved,
            t.turn_id_arcs(),
            PARALLEL_ACTIONS,
            |r, id| {
                let id = id.clone();
                match r {
                    Resolved::Keep => TurnAction::keep(id),
                    Resolved::Mask { content, estimate } => TurnAction::mask(
                        id,
                        TurnReplacement {
                            content,
                            token_estimate: estimate,
                        },
                    ),
                    Resolved::PendingMask { .. } => {
                        debug_assert!(false, "no stub is pending: checked above");
                        TurnAction::keep(id)
                    }
                    Resolved::Summarize(g) => TurnAction::summarize(id, g),
                    Resolved::Drop => TurnAction::drop_turn(id),
                }
            },
        );
        let decisions = Decisions {
            actions,
            summarization_requests: requests.into_iter().map(|(_, r)| r).collect(),
            estimator_ratio: self.ratio,
        };
        build_plan(t, self.analysis, decisions, name, POLICY_VERSION)
    }
}

/// The fewest actions a plan's list is built with on the pool's threads (see
/// [`cutctx_model::beside::zip_map`]): below it, sharing costs more than it saves.
const PARALLEL_ACTIONS: usize = 20_000;

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
        self.decide_with_analysis(t, &Analysis::of(t, b))
    }

    fn decide_with_analysis(
        &self,
        t: &Transcript,
        analysis: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        self.decide_reading(t, analysis, None)
    }

    /// A chain whose members read no content reads none itself but its masks' digests: it
    /// reads those from `digests`.
    fn decide_with_digests(
        &self,
        t: &Transcript,
        analysis: &Analysis,
        digests: &dyn ContentDigests,
    ) -> Option<Result<CompactionPlan, CompactionError>> {
        self.policies
            .iter()
            .all(|p| p.reads() != Reads::Content)
            .then(|| self.decide_reading(t, analysis, Some(digests)))
    }

    /// What the chain needs of a transcript given to it: content, unless every member reads
    /// only the shape. A member that reads only structure may still mask with its digests
    /// deferred, and the chain computes those digests from the content of the transcript it
    /// was given: nested in another chain, it must be given real content, not a projection
    /// without it (whose stubs would digest placeholders).
    fn reads(&self) -> Reads {
        if self.policies.iter().all(|p| p.reads() == Reads::Shape) {
            Reads::Structure
        } else {
            Reads::Content
        }
    }
}

#[cfg(test)]
mod tests {
    use cutctx_model::TranscriptTurn;

    use super::*;

    /// A system turn, then `n` call / result / user triples; results are estimated at 300.
    fn agent(n: usize) -> Transcript {
        let mut turns =
            vec![TranscriptTurn::new("s", Role::System, "rules", 20).expect("valid turn")];
        for i in 0..n {
            let call = format!("c{i}");
            turns.push(
                TranscriptTurn::new(format!("a{i}"), Role::Assistant, "", 10)
                    .expect("valid turn")
                    .with_tool_call_id(call.as_str()),
            );
            turns.push(
                TranscriptTurn::new(format!("t{i}"), Role::Tool, "x".repeat(1200), 300)
                    .expect("valid turn")
                    .with_tool_call_id(call.as_str()),
            );
            turns.push(TranscriptTurn::new(format!("u{i}"), Role::User, "ok", 5).expect("valid"));
        }
        Transcript::new(turns).expect("unique ids")
    }

    #[test]
    fn a_long_plan_is_the_same_whether_its_actions_are_built_on_a_pool_or_here() {
        // Long enough that a pool's threads share the list of actions.
        let t = agent(PARALLEL_ACTIONS / 3 + 10);
        let total = t.token_estimate();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a pool");
        let chain = default_chain("p").expect("the default chain");
        // Masking alone, masking and summarizing, everything but the protected tail.
        for budget in [total / 2, total / 8, 1_000] {
            let b = CompactionBudget::new(budget).with_protected_recent_turns(4);
            let here = chain.decide(&t, &b).expect("a plan");
            let there = pool.install(|| chain.decide(&t, &b)).expect("a plan");
            assert_eq!(here, there, "{budget}");
            assert_eq!(here.canonical_json(), there.canonical_json(), "{budget}");
            let kinds: std::collections::BTreeSet<&str> =
                here.actions.iter().map(|a| a.action().as_str()).collect();
            assert!(kinds.len() >= 2, "{budget}: {kinds:?}");
        }
    }

    #[test]
    fn a_shape_with_every_turn_in_place_is_analysed_as_the_explicit_identity_projection() {
        let t = agent(6);
        let b = CompactionBudget::new(400).with_protected_recent_turns(4);
        let analysis = Analysis::of(&t, &b);
        let mut state = State {
            transcript: &t,
            resolved: vec![Resolved::Keep; t.len()],
            groups: BTreeMap::new(),
            jobs: Vec::new(),
            parallelism: Parallelism::Automatic,
            digests: None,
        };
        // Masks on two results, one of them in the protected tail, which no shipped member
        // would do: the floor must still count the estimate the shape shows.
        for p in [2, t.len() - 2] {
            state.resolved[p] = Resolved::PendingMask {
                job: 0,
                estimate: 30,
            };
        }
        let shape = state.shape().expect("no overflow");
        assert!(
            shape.origin.is_none(),
            "no turn removed: the identity shape"
        );
        assert_eq!(shape.total, t.token_estimate() - 2 * 270);
        let identity: Vec<Option<usize>> = (0..t.len()).map(Some).collect();
        let fixed = t.system_or_pinned();
        let explicit = analysis.project_shape(&identity, |j| fixed[j], |j| shape.estimates[j]);
        let fast = shape.analysis(&t, &analysis).expect("same length");
        assert_eq!(fast, explicit);
        assert_eq!(
            fast.untouchable_tokens(),
            analysis.untouchable_tokens() - 270
        );

        state.resolved[5] = Resolved::Drop;
        let shape = state.shape().expect("no overflow");
        assert_eq!(
            shape.origin.as_ref().map(Vec::len),
            Some(t.len() - 1),
            "a removal gives an explicit origin"
        );
        assert_eq!(shape.real(5), Some(6));
    }
}

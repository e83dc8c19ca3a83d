//! The tool-call partition of a transcript: which turns travel together.

use std::sync::Arc;

use crate::Transcript;

/// The tool-call partition of a transcript, by turn position.
///
/// Turns sharing a `tool_call_id` form one exchange, wherever they sit; a turn without one is
/// an exchange of its own. The two key spaces are separate, so a `tool_call_id` equal to some
/// turn's id merges nothing. Exchanges are ordered by their earliest member, and each lists
/// its members in transcript order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchanges {
    /// Per position: the index of its exchange.
    of_turn: Vec<usize>,
    /// Members of every exchange, exchange after exchange; exchange `e` is
    /// `flat[start[e]..start[e + 1]]`. Two flat arrays rather than a `Vec` per exchange: a
    /// transcript of agent turns has about as many exchanges as turns.
    flat: Vec<usize>,
    start: Vec<usize>,
}

impl Exchanges {
    /// The partition of `transcript`: the transcript's own, computed once and shared.
    #[must_use]
    pub fn of(transcript: &Transcript) -> Arc<Self> {
        Arc::clone(transcript.exchanges())
    }

    /// The partition of a projection, derived from the partition of its source without
    /// comparing a single id: `origin[j]` is the source position projection turn `j` stands
    /// for, or `None` for a turn the source does not have (which must carry no
    /// `tool_call_id`). Masking keeps `tool_call_id`, so exchanges only lose members.
    #[must_use]
    pub fn project(&self, origin: &[Option<usize>]) -> Self {
        let mut renumber: Vec<Option<usize>> = vec![None; self.len()];
        let mut count = 0_usize;
        let mut of_turn = Vec::with_capacity(origin.len());
        for o in origin {
            let exchange = match o {
                Some(p) => *renumber[self.of_turn[*p]].get_or_insert_with(|| {
                    count += 1;
                    count - 1
                }),
                None => {
                    count += 1;
                    count - 1
                }
            };
            of_turn.push(exchange);
        }
        Self::from_assignment(of_turn, count)
    }

    /// Lays out the members of `count` exchanges numbered by first appearance.
    pub(crate) fn from_assignment(of_turn: Vec<usize>, count: usize) -> Self {
        let mut start = vec![0_usize; count + 1];
        for &e in &of_turn {
            start[e + 1] += 1;
        }
        for e in 0..count {
            start[e + 1] += start[e];
        }
        let mut fill = start.clone();
        let mut flat = vec![0_usize; of_turn.len()];
        for (p, &e) in of_turn.iter().enumerate() {
            flat[fill[e]] = p;
            fill[e] += 1;
        }
        Self {
            of_turn,
            flat,
            start,
        }
    }

    /// The exchanges, each as the positions of its members.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[usize]> + '_ {
        self.start.windows(2).map(|w| &self.flat[w[0]..w[1]])
    }

    /// The number of exchanges.
    #[must_use]
    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// Whether there are none (the transcript is empty).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index of the exchange holding the turn at `position`.
    #[must_use]
    pub fn exchange_of(&self, position: usize) -> usize {
        self.of_turn[position]
    }

    /// The members of exchange `index`.
    #[must_use]
    pub fn members(&self, index: usize) -> &[usize] {
        &self.flat[self.start[index]..self.start[index + 1]]
    }

    /// The number of positions partitioned: the transcript's length.
    #[must_use]
    pub fn positions(&self) -> usize {
        self.of_turn.len()
    }
}

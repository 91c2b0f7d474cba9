//! [`plan`]: which slots to move so that every master carries its share of the load, not
//! just its share of the slots.
//!
//! `redis-cli --cluster rebalance` evens out slot counts. Here each slot has a *load* (keys,
//! bytes, operations per second or any mix the caller measured) and a *cost* (what moving it
//! costs, usually its bytes), each master a capacity, and the plan moves the slots that bring
//! every master's load within a ratio of its share at the lowest total cost it finds.
//!
//! The search is a greedy pass over single moves (each step takes the move that fixes most
//! of the masters' excess or shortfall per unit of cost; slots of one master with the same
//! load and cost are one candidate, so a step costs classes × masters, not slots × masters),
//! then a pass that takes back moves the balance does not need. When few slots carry load (at most
//! [`EXACT_ASSIGNMENTS`] assignments to try), a branch-and-bound search over every
//! assignment replaces it with the cheapest balanced plan there is.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

/// One slot as the planner sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotLoad {
    /// The master that serves the slot (an index into the capacities), or `None` for a slot
    /// no master serves, which is left alone.
    pub owner: Option<usize>,
    /// What the slot weighs in the balance.
    pub load: u64,
    /// What moving the slot costs (its bytes, usually).
    pub cost: u64,
}

/// The planner's options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// How far from its share a master's load may be, in thousandths: with 1200, every
    /// master ends between its share / 1.2 and its share × 1.2. At least 1000.
    pub ratio_permille: u32,
    /// Each master's capacity (1 for every master when they are alike). A master's share of
    /// the total load is its capacity over the sum. A capacity of 0 asks for the master to
    /// be emptied; any other master that serves a slot keeps at least one. Slots without
    /// load never move.
    pub capacities: Vec<u32>,
}

impl PlanOptions {
    /// Masters alike, within `ratio_permille` of the mean.
    pub fn even(masters: usize, ratio_permille: u32) -> Self {
        Self {
            ratio_permille,
            capacities: vec![1; masters],
        }
    }
}

/// One move of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// The slot (an index into the slots given).
    pub slot: usize,
    /// The master that serves it now.
    pub from: usize,
    /// The master that will.
    pub to: usize,
}

/// What [`plan`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The moves, grouped by source and target, each group in slot order. No slot appears
    /// twice.
    pub moves: Vec<Move>,
    /// Each master's load before the moves.
    pub before: Vec<u64>,
    /// Each master's load after them.
    pub after: Vec<u64>,
    /// The total cost of the moves.
    pub cost: u64,
    /// Whether every master ends within the ratio of its share. When it is false, the moves
    /// are the best the search found, and [`Plan::stuck`] may say why.
    pub balanced: bool,
    /// Slots that alone weigh more than any master may carry: moving them only moves the
    /// problem (one big key, one hot tag).
    pub stuck: Vec<usize>,
}

/// Why the options do not describe a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// `ratio_permille` is under 1000.
    #[error("the ratio must be at least 1.0 (1000 permille), not {0} permille")]
    Ratio(u32),
    /// No master has a capacity above 0.
    #[error("no master has a capacity above 0")]
    NoCapacity,
    /// A slot's owner is not a master of the capacities.
    #[error("slot {slot} is served by master {owner}, but there are {masters} masters")]
    Owner {
        /// The slot.
        slot: usize,
        /// Its owner.
        owner: usize,
        /// How many masters there are.
        masters: usize,
    },
}

/// At most this many assignments (masters to the power of the slots with load) are searched
/// exhaustively.
pub const EXACT_ASSIGNMENTS: u64 = 1 << 18;

/// The bounds of each master's load, as exact fractions: `load × scale` must lie within
/// `[low, high]` (integers, 128 bits, no rounding).
struct Bounds {
    scale: u128,
    low: Vec<u128>,
    high: Vec<u128>,
}

impl Bounds {
    fn new(total: u64, options: &PlanOptions) -> Self {
        let capacity: u128 = options.capacities.iter().map(|&c| u128::from(c)).sum();
        let ratio = u128::from(options.ratio_permille);
        // share_m = total × c_m / capacity; load within [share / ratio, share × ratio] with
        // ratio in thousandths, so: load × capacity × ratio ≥ total × c_m × 1000 and
        // load × capacity × 1000 ≤ total × c_m × ratio; both scaled by capacity × ratio × 1000.
        // Saturating: loads and capacities large enough to reach 2^128 only blur the bounds.
        let scale = capacity.saturating_mul(ratio).saturating_mul(1000);
        let shares = options
            .capacities
            .iter()
            .map(|&c| u128::from(total).saturating_mul(u128::from(c)));
        let low = shares
            .clone()
            .map(|share| share.saturating_mul(1_000_000))
            .collect();
        let high = shares
            .map(|share| share.saturating_mul(ratio).saturating_mul(ratio))
            .collect();
        Self { scale, low, high }
    }

    fn scaled(&self, load: u64) -> u128 {
        u128::from(load).saturating_mul(self.scale)
    }

    fn over(&self, master: usize, load: u64) -> u128 {
        self.scaled(load).saturating_sub(self.high[master])
    }

    fn under(&self, master: usize, load: u64) -> u128 {
        self.low[master].saturating_sub(self.scaled(load))
    }

    /// How far outside its bounds `master` is at `load`: 0 within them.
    fn off(&self, master: usize, load: u64) -> u128 {
        self.over(master, load)
            .saturating_add(self.under(master, load))
    }

    fn fits(&self, master: usize, load: u64) -> bool {
        self.off(master, load) == 0
    }

    /// The most `master` may carry.
    fn room(&self, master: usize, load: u64) -> u128 {
        self.high[master].saturating_sub(self.scaled(load))
    }
}

/// Plans the moves that balance `slots` among the masters of `options`.
///
/// ```
/// use redis_cluster_state::rebalance::{plan, PlanOptions, SlotLoad};
///
/// // Master 0 serves three slots of 10 keys, master 1 one slot of 10 keys.
/// let slot = |owner| SlotLoad { owner: Some(owner), load: 10, cost: 10 };
/// let slots = [slot(0), slot(0), slot(0), slot(1)];
/// let plan = plan(&slots, &PlanOptions::even(2, 1200))?;
/// assert!(plan.balanced);
/// assert_eq!(plan.moves.len(), 1);
/// assert_eq!(plan.after, [20, 20]);
/// # Ok::<(), redis_cluster_state::rebalance::PlanError>(())
/// ```
pub fn plan(slots: &[SlotLoad], options: &PlanOptions) -> Result<Plan, PlanError> {
    if options.ratio_permille < 1000 {
        return Err(PlanError::Ratio(options.ratio_permille));
    }
    let masters = options.capacities.len();
    if options.capacities.iter().all(|&c| c == 0) {
        return Err(PlanError::NoCapacity);
    }
    for (slot, s) in slots.iter().enumerate() {
        if let Some(owner) = s.owner.filter(|&o| o >= masters) {
            return Err(PlanError::Owner {
                slot,
                owner,
                masters,
            });
        }
    }
    let mut before = vec![0u64; masters];
    let mut counts = vec![0usize; masters];
    for s in slots {
        if let Some(owner) = s.owner {
            before[owner] = before[owner].saturating_add(s.load);
            counts[owner] += 1;
        }
    }
    let total = before.iter().fold(0u64, |sum, &l| sum.saturating_add(l));
    let bounds = Bounds::new(total, options);
    let search = Search {
        slots,
        options,
        bounds: &bounds,
        counts: &counts,
    };
    let mut owners: Vec<Option<usize>> = slots.iter().map(|s| s.owner).collect();
    search.greedy(&mut owners, &before);
    search.take_back(&mut owners);
    search.exact(&mut owners);

    let mut after = vec![0u64; masters];
    for (s, owner) in slots.iter().zip(&owners) {
        if let Some(owner) = owner {
            after[*owner] = after[*owner].saturating_add(s.load);
        }
    }
    let mut moves: Vec<Move> = slots
        .iter()
        .zip(&owners)
        .enumerate()
        .filter_map(|(slot, (s, to))| match (s.owner, *to) {
            (Some(from), Some(to)) if from != to => Some(Move { slot, from, to }),
            _ => None,
        })
        .collect();
    moves.sort_by_key(|m| (m.from, m.to, m.slot));
    let cost = moves
        .iter()
        .fold(0u64, |sum, m| sum.saturating_add(slots[m.slot].cost));
    let balanced = (0..masters).all(|m| bounds.fits(m, after[m]));
    let stuck = slots
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            let load = bounds.scaled(s.load);
            s.owner.is_some() && (0..masters).all(|m| bounds.room(m, 0) < load)
        })
        .map(|(slot, _)| slot)
        .collect();
    Ok(Plan {
        moves,
        before,
        after,
        cost,
        balanced,
        stuck,
    })
}

/// A move the greedy pass weighs: (gain, cost, from, the class (load, cost) of the slot, to);
/// gain / cost compared as fractions.
type Candidate = (u128, u64, usize, (u64, u64), usize);

struct Search<'a> {
    slots: &'a [SlotLoad],
    options: &'a PlanOptions,
    bounds: &'a Bounds,
    /// How many slots each master serves before the plan.
    counts: &'a [usize],
}

impl Search<'_> {
    fn masters(&self) -> usize {
        self.options.capacities.len()
    }

    fn loads(&self, owners: &[Option<usize>]) -> Vec<u64> {
        let mut loads = vec![0u64; self.masters()];
        for (s, owner) in self.slots.iter().zip(owners) {
            if let Some(owner) = owner {
                loads[*owner] = loads[*owner].saturating_add(s.load);
            }
        }
        loads
    }

    /// How far outside its bounds each master is, summed: 0 when balanced.
    fn violation(&self, loads: &[u64]) -> u128 {
        (0..self.masters())
            .map(|m| self.bounds.off(m, loads[m]))
            .fold(0u128, u128::saturating_add)
    }

    /// Whether `master` may give a slot away and still serve one, as asked.
    fn may_lose_last(&self, master: usize) -> bool {
        self.options.capacities[master] == 0
    }

    /// Single moves, each the best reduction of the total violation per unit of cost, until
    /// none reduces it. A slot moves at most once: it leaves its first owner only.
    fn greedy(&self, owners: &mut [Option<usize>], before: &[u64]) {
        let masters = self.masters();
        let mut loads = before.to_vec();
        let mut counts = self.counts.to_vec();
        // The slots each master may give, by (load, cost): slots alike are one candidate,
        // so a step costs classes × masters, not slots × masters. Each list is in
        // descending slot order, so that the smallest slot of a class goes first.
        let mut classes: Vec<BTreeMap<(u64, u64), Vec<usize>>> = vec![BTreeMap::new(); masters];
        for (slot, s) in self.slots.iter().enumerate().rev() {
            if let Some(from) = s.owner.filter(|_| s.load > 0) {
                classes[from]
                    .entry((s.load, s.cost))
                    .or_default()
                    .push(slot);
            }
        }
        let mut violation = self.violation(&loads);
        while violation > 0 {
            let mut best: Option<Candidate> = None;
            for (from, from_classes) in classes.iter().enumerate() {
                if counts[from] == 1 && !self.may_lose_last(from) {
                    continue;
                }
                let involved = self.bounds.off(from, loads[from]);
                for &(load, cost) in from_classes.keys() {
                    let shed = self.bounds.off(from, loads[from] - load);
                    for (to, &to_load) in loads.iter().enumerate() {
                        if to == from || self.options.capacities[to] == 0 {
                            continue;
                        }
                        let before = involved.saturating_add(self.bounds.off(to, to_load));
                        let grown = to_load.saturating_add(load);
                        let after = shed.saturating_add(self.bounds.off(to, grown));
                        if after >= before {
                            continue;
                        }
                        let gain = before - after;
                        let better = match best {
                            None => true,
                            // gain / cost > best_gain / best_cost, and on a tie the cheaper.
                            Some((best_gain, best_cost, ..)) => {
                                let ours = gain.saturating_mul(u128::from(best_cost.max(1)));
                                let theirs = best_gain.saturating_mul(u128::from(cost.max(1)));
                                ours > theirs || (ours == theirs && cost < best_cost)
                            }
                        };
                        if better {
                            best = Some((gain, cost, from, (load, cost), to));
                        }
                    }
                }
            }
            let Some((_, _, from, class, to)) = best else {
                return;
            };
            let Some(members) = classes[from].get_mut(&class) else {
                return;
            };
            let Some(slot) = members.pop() else {
                return;
            };
            if members.is_empty() {
                classes[from].remove(&class);
            }
            loads[from] -= class.0;
            loads[to] = loads[to].saturating_add(class.0);
            counts[from] -= 1;
            counts[to] += 1;
            owners[slot] = Some(to);
            violation = self.violation(&loads);
        }
    }

    /// Puts back, most costly first, every moved slot whose return keeps the plan as
    /// balanced as it is: the greedy pass may overshoot.
    fn take_back(&self, owners: &mut [Option<usize>]) {
        let mut moved: Vec<usize> = (0..self.slots.len())
            .filter(|&slot| owners[slot] != self.slots[slot].owner)
            .collect();
        moved.sort_by_key(|&slot| core::cmp::Reverse(self.slots[slot].cost));
        let mut loads = self.loads(owners);
        let mut violation = self.violation(&loads);
        for slot in moved {
            let (Some(from), Some(to)) = (owners[slot], self.slots[slot].owner) else {
                continue;
            };
            let load = self.slots[slot].load;
            loads[from] -= load;
            loads[to] = loads[to].saturating_add(load);
            let returned = self.violation(&loads);
            if returned <= violation {
                owners[slot] = Some(to);
                violation = returned;
            } else {
                loads[to] -= load;
                loads[from] = loads[from].saturating_add(load);
            }
        }
    }

    /// When few slots carry load, the cheapest balanced assignment of them, by branch and
    /// bound, if it beats `owners`.
    fn exact(&self, owners: &mut [Option<usize>]) {
        let masters = self.masters() as u64;
        let mut loaded: Vec<usize> = (0..self.slots.len())
            .filter(|&slot| self.slots[slot].owner.is_some() && self.slots[slot].load > 0)
            .collect();
        let mut assignments = 1u64;
        for _ in &loaded {
            assignments = assignments.saturating_mul(masters);
            if assignments > EXACT_ASSIGNMENTS {
                return;
            }
        }
        // Heavy slots first: the bounds prune sooner.
        loaded.sort_by_key(|&slot| core::cmp::Reverse(self.slots[slot].load));
        let current_loads = self.loads(owners);
        let mut best_cost = if self.violation(&current_loads) == 0 {
            self.cost(owners)
        } else {
            u64::MAX
        };
        // Slots without load stay where they are, and keep their masters from being empty.
        let mut kept = vec![0usize; self.masters()];
        for s in self.slots {
            if let (Some(owner), 0) = (s.owner, s.load) {
                kept[owner] += 1;
            }
        }
        let mut state = Exact {
            order: loaded,
            assignment: Vec::new(),
            loads: vec![0; self.masters()],
            kept,
            best: None,
            best_cost: &mut best_cost,
        };
        self.branch(&mut state, 0);
        if let Some(best) = state.best {
            for (&slot, &to) in state.order.iter().zip(&best) {
                owners[slot] = Some(to);
            }
        }
    }

    fn cost(&self, owners: &[Option<usize>]) -> u64 {
        self.slots
            .iter()
            .zip(owners)
            .filter(|(s, to)| s.owner != **to)
            .fold(0u64, |sum, (s, _)| sum.saturating_add(s.cost))
    }

    fn branch(&self, state: &mut Exact<'_>, cost: u64) {
        let depth = state.assignment.len();
        if depth == state.order.len() {
            let balanced = (0..self.masters()).all(|m| self.bounds.fits(m, state.loads[m]));
            let kept = (0..self.masters())
                .all(|m| self.counts[m] == 0 || state.kept[m] > 0 || self.may_lose_last(m));
            if balanced && kept && cost < *state.best_cost {
                *state.best_cost = cost;
                state.best = Some(state.assignment.clone());
            }
            return;
        }
        let slot = state.order[depth];
        let s = self.slots[slot];
        let owner = s.owner.unwrap_or(0);
        // The owner first: staying costs nothing.
        let targets = core::iter::once(owner).chain((0..self.masters()).filter(|&m| m != owner));
        for to in targets {
            let cost = if to == owner {
                cost
            } else {
                cost.saturating_add(s.cost)
            };
            if cost >= *state.best_cost {
                continue;
            }
            let grown = state.loads[to].saturating_add(s.load);
            // Loads only grow down the tree: a master over its bound stays over.
            if self.bounds.over(to, grown) > 0 {
                continue;
            }
            state.loads[to] = grown;
            state.kept[to] += 1;
            state.assignment.push(to);
            self.branch(state, cost);
            state.assignment.pop();
            state.kept[to] -= 1;
            state.loads[to] -= s.load;
        }
    }
}

struct Exact<'a> {
    order: Vec<usize>,
    assignment: Vec<usize>,
    loads: Vec<u64>,
    kept: Vec<usize>,
    best: Option<Vec<usize>>,
    best_cost: &'a mut u64,
}

/// A slot an interrupted migration left open, as the masters' own views show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenSlot {
    /// The master that serves the slot, in the view the plan was made from.
    pub owner: Option<usize>,
    /// `(master, target)`: `master` marks the slot as migrating to `target`.
    pub migrating: Vec<(usize, usize)>,
    /// `(master, source)`: `master` marks the slot as importing from `source`.
    pub importing: Vec<(usize, usize)>,
}

/// How to close an [`OpenSlot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closing {
    /// Keys have started to move: move the rest from `from` to `to`, then give `to` the
    /// slot (SETSLOT NODE on the target, the source and the others).
    Finish {
        /// The master the keys leave.
        from: usize,
        /// The master that ends with the slot.
        to: usize,
    },
    /// No key has moved: clear the marks (SETSLOT STABLE where they are).
    RollBack,
}

impl OpenSlot {
    /// How to close the slot so that no key is lost, as `redis-cli --cluster fix` reasons:
    /// the pair is the first migrating mark (source, target), else the first importing mark
    /// (its source, the importer). The move is finished when both sides carry their marks,
    /// when the target already holds keys of the slot (`target_has_keys`, asked only then),
    /// or when it already serves the slot; otherwise nothing moved and the marks are
    /// cleared.
    ///
    /// ```
    /// use redis_cluster_state::rebalance::{Closing, OpenSlot};
    ///
    /// // Master 0 migrates the slot to 1, and 1 imports it from 0: finish the move.
    /// let open = OpenSlot { owner: Some(0), migrating: vec![(0, 1)], importing: vec![(1, 0)] };
    /// assert_eq!(open.closing(|_| false), Closing::Finish { from: 0, to: 1 });
    /// // Only the importing mark, and the importer holds no key of it: roll back.
    /// let open = OpenSlot { owner: Some(0), migrating: vec![], importing: vec![(1, 0)] };
    /// assert_eq!(open.closing(|_| false), Closing::RollBack);
    /// ```
    pub fn closing(&self, target_has_keys: impl FnOnce(usize) -> bool) -> Closing {
        let pair = self
            .migrating
            .first()
            .copied()
            .or_else(|| self.importing.first().map(|&(at, from)| (from, at)));
        let Some((from, to)) = pair else {
            return Closing::RollBack;
        };
        let both = self.migrating.contains(&(from, to)) && self.importing.contains(&(to, from));
        if both || self.owner == Some(to) || target_has_keys(to) {
            Closing::Finish { from, to }
        } else {
            Closing::RollBack
        }
    }
}

//! S1's initial placement: walk the steps, free the blocks that died, then give each new
//! block the fastest tier with room (S1's spot rules inside it), honouring the search's
//! choices for particular blocks.

use super::Hierarchy;
use super::level::Level;

/// What the search fixed for one block; `None` fields follow the initial-placement rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Choice {
    /// Place it in this tier.
    pub tier: Option<usize>,
    /// At this offset (with `tier`).
    pub offset: Option<u64>,
    /// Overwrite its in-place candidate (default: yes, when the candidate's space allows).
    pub reuse: Option<bool>,
}

/// A tier and offset for every block.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// Tier of each block.
    pub tier: Vec<usize>,
    /// Offset of each block in its tier.
    pub offset: Vec<u64>,
    /// True when the block overwrites its in-place candidate.
    pub reused: Vec<bool>,
    /// Highest byte used in each tier.
    pub high_water: Vec<u64>,
}

/// Why a placement failed: a block that fits in no allowed tier at its step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// The block.
    pub block: usize,
    /// Its first step.
    pub step: usize,
}

/// Places every block, applying `choices` (indexed like the blocks).
pub fn place(h: &Hierarchy, choices: &[Choice]) -> Result<Placement, Stuck> {
    Ok(walk(h, choices, None)?.0)
}

/// Places blocks in step order; with `stop = Some(b)`, stops just before placing block `b`
/// and also returns the tiers' state at that moment.
pub(super) fn walk(
    h: &Hierarchy,
    choices: &[Choice],
    stop: Option<usize>,
) -> Result<(Placement, Vec<Level>), Stuck> {
    let n = h.blocks.len();
    let align = h.alignment.max(1);
    let mut levels: Vec<Level> = h.tiers.iter().map(|t| Level::new(t.capacity)).collect();
    let mut p = Placement {
        tier: vec![0; n],
        offset: vec![0; n],
        reused: vec![false; n],
        high_water: vec![0; h.tiers.len()],
    };
    let mut handed = vec![false; n];
    let mut placed = vec![false; n];
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&b| (h.blocks[b].first, b));
    let mut step = usize::MAX;
    for b in order {
        let block = &h.blocks[b];
        if block.first != step {
            step = block.first;
            for level in &mut levels {
                level.release(step);
            }
        }
        if stop == Some(b) {
            break;
        }
        placed[b] = true;
        if block.size == 0 {
            continue;
        }
        let choice = choices.get(b).copied().unwrap_or_default();
        let stuck = Stuck { block: b, step };
        // In-place: take the first bytes of the dying candidate's space.
        let candidate = block.reuses.filter(|&r| {
            choice.reuse != Some(false)
                && choice.offset.is_none()
                && placed[r]
                && !handed[r]
                && h.blocks[r].last == block.first
                && h.blocks[r].size >= block.size
                && choice.tier.is_none_or(|t| t == p.tier[r])
        });
        if let Some(r) = candidate {
            let t = p.tier[r];
            if let Some(at) = levels[t].hand_over(r, block.size, b, block.last) {
                handed[r] = true;
                (p.tier[b], p.offset[b], p.reused[b]) = (t, at, true);
                continue;
            }
        }
        if choice.reuse == Some(true) {
            return Err(stuck);
        }
        let spot = match (choice.tier, choice.offset) {
            (Some(t), Some(at)) => levels
                .get_mut(t)
                .is_some_and(|l| l.take(at, block.size, b, block.last))
                .then_some((t, at)),
            (Some(t), None) => levels.get_mut(t).and_then(|l| {
                let at = l.choose(block.size, align)?;
                l.take(at, block.size, b, block.last).then_some((t, at))
            }),
            _ => levels.iter_mut().enumerate().find_map(|(t, l)| {
                let at = l.choose(block.size, align)?;
                l.take(at, block.size, b, block.last).then_some((t, at))
            }),
        };
        let (t, at) = spot.ok_or(stuck)?;
        (p.tier[b], p.offset[b]) = (t, at);
        p.high_water[t] = p.high_water[t].max(at + block.size);
    }
    Ok((p, levels))
}

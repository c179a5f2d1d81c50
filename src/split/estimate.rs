//! Cheap arena estimates that rank candidate splits before the real planner scores the best
//! few: live bytes per step from a plan, and the working set of one tile.

use rustc_hash::{FxHashMap, FxHashSet};

use super::bands::assembled_inputs;
use super::chain::{Chain, Read};
use super::region::{Span, area, full};
use super::rules::shape_of;
use super::tiling::{TileRef, Tiling, first_row_read};
use crate::emit::Table;
use crate::ir::{Graph, NodeId, ValueId};

/// Work units charged per chain node (per kernel for a tile estimate, see [`visit_units`])
/// for each strip or tile an estimate visits (a region propagated, a tile's working set
/// summed): about 100 ns of one core, 33 ns a unit as the planners' units are (see
/// [`crate::plan::WORK_PER_SECOND`]; 57–124 ns measured on six models, ARCHITECTURE.md,
/// "Work units").
pub const UNITS_PER_NODE_VISIT: u64 = 3;

/// The work units of visiting every kernel of `chain` once, [`UNITS_PER_NODE_VISIT`] each: a
/// QDQ node unit is one kernel (its operator), visited with its QuantizeLinear and
/// DequantizeLinear nodes, as [`crate::split::chain::Walker::around`] counts a chain's length.
/// Charged a node visit each, a QDQ model's estimates took 4.8 ns a unit against its
/// QOperator form's 7.5 (ARCHITECTURE.md, "Work units").
pub fn visit_units(graph: &Graph, chain: &Chain) -> u64 {
    let kernel = |n: NodeId| graph.units_of(n).iter().all(|&u| graph.units[u].op == n);
    chain.nodes.iter().filter(|&&n| kernel(n)).count() as u64 * UNITS_PER_NODE_VISIT
}

/// The work of cutting a chain whose one visit costs `visit` units ([`visit_units`]) by
/// `grid`: its `rows + cols` strips propagated (which [`crate::split::tiling::tile_within`]
/// does before it gives up on a grid).
pub fn strips_work(visit: u64, [rows, cols]: [usize; 2]) -> u64 {
    visit * (rows + cols) as u64
}

/// The work of a tiling's `rows × cols` tiles of a chain whose one visit costs `visit`
/// units: each built from its strips and its working set estimated.
pub fn tiles_work(visit: u64, [rows, cols]: [usize; 2]) -> u64 {
    visit * (rows * cols) as u64
}

/// The work of building one chain over `steps` steps (each node's rule and reads looked up).
pub fn chain_work(steps: usize) -> u64 {
    steps as u64 * UNITS_PER_NODE_VISIT
}

/// Bytes in use at each step of a plan: the union of the byte ranges of the tensors live
/// there, summed over the arenas.
pub fn live_bytes(table: &Table) -> Vec<u64> {
    let placed: Vec<_> = table
        .tensors
        .iter()
        .filter_map(|t| Some((t.first, t.last, t.arena?, t.offset?, t.bytes?)))
        .filter(|t| t.4 > 0)
        .collect();
    let steps = table.schedule.len();
    // The tensors by first step, and those live at the step swept (a few dozen, where a
    // split plan has tens of thousands of tensors).
    let mut starting: Vec<Vec<usize>> = vec![Vec::new(); steps];
    for (i, t) in placed.iter().enumerate() {
        if t.0 < steps {
            starting[t.0].push(i);
        }
    }
    let mut live: Vec<usize> = Vec::new();
    (0..steps)
        .map(|step| {
            live.extend(&starting[step]);
            live.retain(|&i| step <= placed[i].1);
            let mut ranges: Vec<(usize, u64, u64)> = live
                .iter()
                .map(|&i| placed[i])
                .map(|t| (t.2, t.3, t.3 + t.4))
                .collect();
            ranges.sort_unstable();
            union_bytes(ranges)
        })
        .collect()
}

/// Bytes each step reads and writes at once: the union of the byte ranges of its node's
/// inputs and outputs that are in the arena (what a device budget must hold at that step).
pub fn step_operands(graph: &Graph, table: &Table) -> Vec<u64> {
    let entries: FxHashMap<&str, &crate::emit::TensorEntry> =
        table.tensors.iter().map(|t| (t.name.as_str(), t)).collect();
    table
        .schedule
        .iter()
        .map(|&n| {
            let node = &graph.nodes[n];
            let mut ranges: Vec<(usize, u64, u64)> = node
                .inputs
                .iter()
                .chain(&node.outputs)
                .flatten()
                .filter_map(|&v| entries.get(graph.values[v].name.as_str()))
                .filter_map(|t| Some((t.arena?, t.offset?, t.offset? + t.bytes?)))
                .collect();
            ranges.sort_unstable();
            union_bytes(ranges)
        })
        .collect()
}

/// Total bytes covered by `(arena, start, end)` ranges sorted by arena and start.
pub(super) fn union_bytes(ranges: Vec<(usize, u64, u64)>) -> u64 {
    let mut total = 0;
    let mut open: Option<(usize, u64, u64)> = None;
    for (arena, lo, hi) in ranges {
        match &mut open {
            Some((a, _, end)) if *a == arena && lo <= *end => *end = (*end).max(hi),
            _ => {
                if let Some((_, s, e)) = open {
                    total += e - s;
                }
                open = Some((arena, lo, hi));
            }
        }
    }
    total + open.map_or(0, |(_, s, e)| e - s)
}

/// The peak of `live` bytes at the steps outside `start..=end`.
pub fn outside_peak(live: &[u64], [start, end]: [usize; 2]) -> u64 {
    live.iter()
        .enumerate()
        .filter(|&(s, _)| s < start || s > end)
        .map(|(_, &b)| b)
        .max()
        .unwrap_or(0)
}

/// Bytes the plan holds at some step of `from..=to` that `nodes` (a chain about to be split)
/// do not make: what stays live around the chain. Every byte range is counted once (the union
/// of the ranges, as in [`live_bytes`]), so a tensor written in place of another or aliasing
/// one counts with the bytes it shares, whichever of them is live there.
pub fn crossing(graph: &Graph, table: &Table, nodes: &[NodeId], [from, to]: [usize; 2]) -> u64 {
    let made: FxHashSet<&str> = nodes
        .iter()
        .filter_map(|&n| graph.nodes[n].outputs[0])
        .map(|v| graph.values[v].name.as_str())
        .collect();
    let mut ranges: Vec<(usize, u64, u64)> = table
        .tensors
        .iter()
        .filter(|t| t.first <= to && from <= t.last && !made.contains(t.name.as_str()))
        .filter_map(|t| Some((t.arena?, t.offset?, t.offset? + t.bytes?)))
        .filter(|r| r.2 > r.1)
        .collect();
    ranges.sort_unstable();
    union_bytes(ranges)
}

/// The estimated arena once a chain (steps `start..=end` of the plan) runs tile by tile, for
/// any of its tilings: what does not depend on the grid is worked out once.
pub struct ChainEstimate {
    /// The peak of live bytes outside the chain.
    outside: u64,
    /// What crosses into the chain plus its outputs, which the tiles' results fill in place
    /// (strided views).
    fixed: u64,
    /// Whether each chain node ends its kernel: it is in no QDQ node unit, or it is the last
    /// chain node of its unit (which reads its inputs until it writes its outputs).
    kernel_ends: Vec<bool>,
    /// For each chain node, the earlier chain nodes whose outputs are read for the last time
    /// by the kernel it ends.
    freed_by: Vec<Vec<usize>>,
    /// For each chain node, its output's element type and elements per position (N × C).
    out: Vec<Option<PerPosition>>,
    /// For each chain node and input read per tile, the input's sizes and its H and W.
    inputs: Vec<Vec<Option<SpatialInput>>>,
    /// The inputs an earlier split assembled, which the tiles read as bands (see
    /// [`super::bands`]), when counted progressively ([`Banding`]). When there are any,
    /// `fixed` holds neither them nor the outputs:
    /// each band counts until the last tile reading it, and the outputs tile by tile, as the
    /// parts a later chain reads as bands in turn.
    banded: Vec<Banded>,
}

/// How an estimate counts the chain inputs an earlier split assembled, which the tiles read
/// as bands.
pub struct Banding<'a> {
    /// Whether a node was added by an earlier split.
    pub made_by_split: &'a dyn Fn(NodeId) -> bool,
    /// Count each band until the last tile reading it, and the chain's outputs tile by tile
    /// (the steady state once a later chain reads them as bands in turn); otherwise such
    /// inputs and the outputs count whole, as for any chain.
    pub progressive: bool,
}

/// An input read as bands: where the tiles read it, and its parts.
struct Banded {
    /// The (chain node, input) pairs reading it.
    reads: Vec<(usize, usize)>,
    /// The axis of the parts (0 for H, 1 for W).
    axis: usize,
    /// Each part's span along the axis and its bytes.
    parts: Vec<(Span, u64)>,
}

/// An element type and a number of elements per spatial position.
type PerPosition = (crate::ir::DType, u64);

/// A spatial input's sizes and its H and W.
type SpatialInput = (PerPosition, [i64; 2]);

impl ChainEstimate {
    /// The grid-independent parts of the chain's estimates, counting the inputs read as bands
    /// as `banding` says.
    pub fn new(
        graph: &Graph,
        (table, live): (&Table, &[u64]),
        chain: &Chain,
        [start, end]: [usize; 2],
        banding: &Banding,
    ) -> ChainEstimate {
        let output: u64 = chain
            .extra
            .iter()
            .chain([&chain.last])
            .map(|&k| {
                let [h, w] = chain.grids[k];
                let v = chain.value_of(graph, k);
                bytes(per_position(graph, v, chain.grids[k]), (h * w) as u64)
            })
            .sum();
        let units = chain_units(graph, chain);
        let ends = unit_ends(graph, chain, &units);
        let mut last_use = vec![0; chain.nodes.len()];
        for (k, reads) in chain.reads.iter().enumerate() {
            for read in reads {
                if let Read::Inside(j) = *read {
                    last_use[j] = last_use[j].max(ends[k]);
                }
            }
        }
        let mut freed_by = vec![Vec::new(); chain.nodes.len()];
        for (j, &k) in last_use.iter().enumerate() {
            if j < k {
                freed_by[k].push(j);
            }
        }
        let assembled = match banding.progressive {
            true => assembled_inputs(graph, chain, banding.made_by_split),
            false => Vec::new(),
        };
        let banded: Vec<Banded> = assembled
            .into_iter()
            .map(|a| {
                let reads = (0..chain.nodes.len())
                    .flat_map(|k| (0..chain.reads[k].len()).map(move |i| (k, i)))
                    .filter(|&(k, i)| graph.nodes[chain.nodes[k]].inputs[i] == Some(a.value))
                    .collect();
                let parts = a
                    .parts
                    .iter()
                    .map(|&(u, span)| {
                        let mut grid = a.size;
                        grid[a.axis - 2] = span.len();
                        let positions = (grid[0] * grid[1]) as u64;
                        (span, bytes(per_position(graph, u, grid), positions))
                    })
                    .collect();
                Banded {
                    reads,
                    axis: a.axis - 2,
                    parts,
                }
            })
            .collect();
        let crossing = crossing(graph, table, &chain.nodes, [start, start]);
        let fixed = match banded.is_empty() {
            true => crossing + output,
            false => {
                let held: u64 = banded.iter().flat_map(|b| &b.parts).map(|p| p.1).sum();
                crossing.saturating_sub(held)
            }
        };
        // The float tensors inside QDQ node units take no arena bytes: those of the units
        // with a node in the chain (the estimate runs per chain, so not every unit's).
        let fused: FxHashSet<ValueId> = units
            .iter()
            .flat_map(|&u| graph.units[u].internal.iter().copied())
            .collect();
        ChainEstimate {
            outside: outside_peak(live, [start, end]),
            fixed,
            kernel_ends: (0..ends.len()).map(|k| ends[k] == k).collect(),
            freed_by,
            out: chain
                .nodes
                .iter()
                .zip(&chain.grids)
                .map(|(&n, &grid)| {
                    let v = graph.nodes[n].outputs[0]?;
                    per_position(graph, v, grid).filter(|_| !fused.contains(&v))
                })
                .collect(),
            inputs: chain
                .nodes
                .iter()
                .enumerate()
                .map(|(k, &n)| {
                    (0..chain.reads[k].len())
                        .map(|i| {
                            let grid = chain.input_grid(graph, k, i)?;
                            Some((per_position(graph, graph.nodes[n].inputs[i]?, grid)?, grid))
                        })
                        .collect()
                })
                .collect(),
            banded,
        }
    }

    /// Whether the chain reads inputs as bands (then [`Self::bands_by_tile`] counts them).
    pub fn reads_bands(&self) -> bool {
        !self.banded.is_empty()
    }

    /// With inputs read as bands, for each tile: the bytes of their parts that tile or a
    /// later one still reads, plus the outputs of the tiles before it; all 0 otherwise.
    pub fn bands_by_tile(&self, chain: &Chain, tiling: &Tiling) -> Vec<u64> {
        let mut held = vec![0u64; tiling.len()];
        if self.banded.is_empty() {
            return held;
        }
        let tiles: Vec<TileRef> = tiling.each().collect();
        // Each part counts up to the last tile reading it.
        for b in &self.banded {
            for &(span, part) in &b.parts {
                let last = tiles.iter().rposition(|tile| {
                    b.reads.iter().any(|&(k, i)| {
                        tile.read(k, i).is_some_and(|r| {
                            let along = r[b.axis];
                            along.start < span.end && span.start < along.end
                        })
                    })
                });
                if let Some(last) = last {
                    held[..=last].iter_mut().for_each(|h| *h += part);
                }
            }
        }
        // The outputs of the tiles before each one.
        let mut done = 0;
        for (t, tile) in tiles.iter().enumerate() {
            held[t] += done;
            let extra = chain.extra.iter().enumerate();
            let parts = extra.map(|(o, &k)| (tile.extra_part(o), k));
            done += parts
                .chain([(tile.part(), chain.last)])
                .map(|(part, k)| bytes(self.out[k], area(part) as u64))
                .sum::<u64>();
        }
        held
    }

    /// Per tile of `tiling`, the bytes its own work holds at its peak: [`Self::tile_peak`]
    /// plus the rows carried from the tile before. It depends on the chain's signature
    /// ([`super::cuts::Cuts::signature`]) and the grid only, so the memo keeps it.
    pub fn by_tile(&self, chain: &Chain, tiling: &Tiling) -> Vec<u64> {
        let carried = self.carried_by_tile(chain, tiling);
        tiling
            .each()
            .zip(carried)
            .map(|(tile, carried)| self.tile_peak(chain, tile) + carried)
            .collect()
    }

    /// The estimated arena with a tiling whose [`Self::by_tile`] is `working` and whose
    /// [`Self::bands_by_tile`] is `bands`: the peak outside the chain, or what crosses into
    /// the chain plus one tile's working set plus the outputs. Returns that estimate and the
    /// chain's own part (without the peak outside), which ranks chains whose estimates the
    /// peak outside makes equal.
    pub fn of(&self, working: &[u64], bands: &[u64]) -> (u64, u64) {
        let peak = working
            .iter()
            .zip(bands)
            .map(|(work, held)| work + held)
            .max()
            .unwrap_or(0);
        let inside = self.fixed + peak;
        (self.outside.max(inside), inside)
    }

    /// For a streamed tiling, per tile, the rows of chain tensors that cross from the tile
    /// before it (the rows above its own that a tile reads, which the tile before kept); all 0
    /// otherwise.
    pub fn carried_by_tile(&self, chain: &Chain, tiling: &Tiling) -> Vec<u64> {
        let mut carried = vec![0u64; tiling.len()];
        if !tiling.streamed {
            return carried;
        }
        let tiles: Vec<TileRef> = tiling.each().collect();
        for t in 1..tiles.len() {
            let mut crossing = 0;
            for j in 0..chain.nodes.len() {
                let Some(from) = first_row_read(chain, tiles[t], j) else {
                    continue;
                };
                let before = tiles[t - 1].computed(j);
                let rows = (before[0].end - from).max(0);
                crossing += bytes(self.out[j], (rows * before[1].len()) as u64);
            }
            carried[t] = crossing;
        }
        carried
    }

    /// The most bytes one tile holds at once: its live intermediates, the slices a node reads
    /// and the node's output.
    fn tile_peak(&self, chain: &Chain, tile: TileRef) -> u64 {
        let held = |k: usize| bytes(self.out[k], area(tile.computed(k)) as u64);
        // The slices read by the kernel in progress, held until it ends.
        let (mut live, mut peak, mut slices) = (0u64, 0u64, 0u64);
        for k in 0..chain.nodes.len() {
            for (i, read) in chain.reads[k].iter().enumerate() {
                let (Some(need), Some((sizes, [h, w]))) = (tile.read(k, i), self.inputs[k][i])
                else {
                    continue;
                };
                let want = [need[0].clip(h), need[1].clip(w)];
                let source = match *read {
                    Read::Inside(j) => tile.computed(j),
                    _ => full(h, w),
                };
                if want != source {
                    slices += bytes(Some(sizes), area(want) as u64);
                }
            }
            let out = held(k);
            peak = peak.max(live + slices + out);
            live += out;
            if self.kernel_ends[k] {
                slices = 0;
            }
            for &j in &self.freed_by[k] {
                live -= held(j);
            }
        }
        peak
    }
}

/// For each chain node, the position of the chain node that ends its kernel: the last chain
/// node of its QDQ node unit (for a DequantizeLinear shared by units, of the last unit reading
/// it), or itself outside units; `units` are the chain's ([`chain_units`]). A unit runs as
/// one kernel, reading its inputs until it writes its outputs, so what its nodes read stays
/// live until then.
fn unit_ends(graph: &Graph, chain: &Chain, units: &[usize]) -> Vec<usize> {
    let mut ends: Vec<usize> = (0..chain.nodes.len()).collect();
    if graph.units.is_empty() {
        return ends;
    }
    let position: FxHashMap<NodeId, usize> =
        chain.nodes.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    for unit in units.iter().map(|&u| &graph.units[u]) {
        let at = |nodes: &[NodeId]| -> Vec<usize> {
            nodes.iter().filter_map(|n| position.get(n).copied()).collect()
        };
        let members = at(&unit.nodes);
        let Some(&last) = members.iter().max() else {
            continue;
        };
        for k in members.into_iter().chain(at(&unit.shared)) {
            ends[k] = ends[k].max(last);
        }
    }
    ends
}

/// The units (indices into [`Graph::units`], in order) with a node of `chain` among their
/// nodes or shared DQs.
fn chain_units(graph: &Graph, chain: &Chain) -> Vec<usize> {
    let mut units: Vec<usize> = chain
        .nodes
        .iter()
        .flat_map(|&n| graph.units_of(n))
        .copied()
        .collect();
    units.sort_unstable();
    units.dedup();
    units
}

/// The element type and elements per spatial position (N × C of an NCHW value) of a value
/// whose positions are `grid`.
fn per_position(graph: &Graph, value: ValueId, [h, w]: [i64; 2]) -> Option<PerPosition> {
    let (t, s) = (graph.values[value].tensor_type()?, shape_of(graph, value)?);
    let elements = s.iter().product::<i64>().max(0) / (h * w).max(1);
    Some((t.dtype, elements as u64))
}

/// Bytes of `positions` positions of a value of `sizes`.
fn bytes(sizes: Option<PerPosition>, positions: u64) -> u64 {
    sizes.map_or(0, |(dtype, n)| dtype.bytes_for(n * positions).unwrap_or(0))
}

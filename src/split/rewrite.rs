//! The rewrite: a chain's nodes replaced by one copy per tile (reading Slices of the tensors
//! made before the chain, with per-tile pads), the tiles' parts of the output assembled by
//! Concat under the output's original name.

use rustc_hash::{FxHashMap, FxHashSet};

use super::bands::{
    Bands, ConcatInputs, SliceReads, concat_inputs, mark_scatters, read_at_slices, scatter_inputs,
};
use super::chain::{Chain, Read, is_foldable_shape};
use super::dequantize::{crops_after_quantize, recomputed};
use super::glue::{Glue, ints_attribute, splice};
use super::layout::Layout;
use super::region::{Region, Span, area, full};
use super::rules::{Rule, shape_of};
use super::tiling::{TileRef, Tiling, first_row_read};
use super::upsample::{Upsample, UpsampleKind};
use crate::ir::{Graph, Node, NodeId, ValueKind};
use crate::onnx::proto::{ModelProto, NodeProto};

/// A model with chains split (one, or several repeated layers cut alike).
pub struct Rewritten {
    /// The new model: the old nodes in execution order, each chain replaced by its parts.
    pub model: ModelProto,
    /// For each node of the new model, the node of the old model it is (`None` for nodes
    /// the split made).
    pub kept: Vec<Option<usize>>,
    /// What each chain became, in the order the chains were given.
    pub parts: Vec<Parts>,
    /// The Concats of earlier splits the rewrite dropped: the tiles read their parts as bands.
    pub dropped: Vec<String>,
    /// The Slices of earlier splits the rewrite dropped: they read the chain's output, whose
    /// row strips are read as bands at their steps instead.
    pub unsliced: Vec<String>,
}

/// Which tensors a chain's tiles read as bands rather than whole (see [`super::bands`]).
pub struct BandSources<'a> {
    /// Scatter the graph inputs the tiles read.
    pub scatter_inputs: bool,
    /// Whether a node was added by an earlier split: the Concats among them assembling a
    /// tensor only this chain reads are dropped, their parts read as bands.
    pub made_by_split: &'a dyn Fn(NodeId) -> bool,
    /// Run the tiles of a chain reading such bands as soon as the bands they read are made,
    /// rather than at the chain's own step: they take the bytes of the bands they free while
    /// the earlier chain's later tiles still run.
    pub run_early: bool,
}

impl BandSources<'static> {
    /// Every tensor read whole.
    pub const NONE: BandSources<'static> = BandSources {
        scatter_inputs: false,
        made_by_split: &no_node,
        run_early: false,
    };
}

/// No node.
fn no_node(_: NodeId) -> bool {
    false
}

/// What one chain became.
pub struct Parts {
    /// For each chain node, the names of its copies, one per tile or block in order.
    pub copies: Vec<Vec<String>>,
    /// For each node of a row chain's passes before the last ([`super::rows::chain::Pass`]),
    /// the names of its copies in them, pass by pass, one per block in order; empty for other
    /// nodes.
    pub first_pass: Vec<Vec<String>>,
    /// The Slice and Concat nodes the split added.
    pub glue: Vec<String>,
    /// The global pools of a tensor the tiles read as bands, each with the nodes replacing
    /// it (see [`super::pools`]).
    pub pools: Vec<(NodeId, Vec<String>)>,
}

/// Rewrites `proto` (typed as `graph`) so that the chain, which occupies consecutive steps of
/// `order`, runs tile by tile; `label` tags the new names (e.g. `split1`); `sources` says
/// which tensors the tiles read as bands (see [`super::bands`]).
pub fn rewrite(
    proto: &ModelProto,
    graph: &Graph,
    order: &[NodeId],
    (chain, tiling): (&Chain, &Tiling),
    label: &str,
    sources: &BandSources,
) -> Rewritten {
    let old = &proto
        .graph
        .as_ref()
        .expect("a loaded model has a graph")
        .node;
    let end = order
        .iter()
        .position(|&n| n == chain.nodes[chain.nodes.len() - 1])
        .expect("the chain is in the order")
        + 1;
    let mut b = Glue::new(proto, graph, label);
    let (mut bands, scatters) = if sources.scatter_inputs {
        scatter_inputs(&mut b, graph, chain, tiling)
    } else {
        Default::default()
    };
    let ConcatInputs {
        bands: assembled,
        concats,
        pools,
    } = concat_inputs(graph, chain, sources.made_by_split);
    bands.extend(assembled);
    // Each pool of a banded input reduces the bands at its own step.
    let mut pooled = Vec::with_capacity(pools.len());
    let mut pool_rewrites = Vec::with_capacity(pools.len());
    for (id, pool, source) in pools {
        let step = order
            .iter()
            .position(|&n| n == id)
            .expect("the pool is in the order");
        let from = b.nodes.len();
        let parts = &bands[&source];
        let added = pool.over_bands(&mut b, graph, id, &parts.names(), parts.size());
        pool_rewrites.push((step, b.detach(from)));
        pooled.push((id, added));
    }
    let mut copies = vec![Vec::new(); chain.nodes.len()];
    // The chain's outputs (positions in the chain), the other outputs first.
    let outputs: Vec<usize> = chain.extra.iter().copied().chain([chain.last]).collect();
    let mut assembly: Vec<Assembly> = outputs
        .iter()
        .map(|&k| {
            let name = &graph.values[chain.value_of(graph, k)].name;
            Assembly::new(name, chain.layouts[k].concat_axes())
        })
        .collect();
    // A streamed chain's tensors read inside it, as the bands its tiles make.
    // A recomputed DQ is made whole for its reader by each tile (`dequantize::recomputed`).
    let recomputed: Vec<bool> = (0..chain.nodes.len())
        .map(|k| tiling.streamed && recomputed(graph, chain, k))
        .collect();
    if tiling.streamed {
        for k in (0..chain.nodes.len()).filter(|&k| !recomputed[k]) {
            if !chain.readers[k].is_empty() {
                let name = graph.values[chain.value_of(graph, k)].name.clone();
                bands.insert(name, Bands::along_rows(chain.grids[k]));
            }
        }
    }
    // The nodes whose copies make more than their tile needs and whose crop waits for their
    // QuantizeLinear reader (see [`crops_after_quantize`]).
    let quantized_crop: Vec<bool> = (0..chain.nodes.len())
        .map(|k| !tiling.streamed && !outputs.contains(&k) && crops_after_quantize(graph, chain, k))
        .collect();
    let tiles = tiling.tiles();
    let mut tile_starts = Vec::with_capacity(tiles.len());
    for (t, tile) in tiles.iter().enumerate() {
        tile_starts.push(b.nodes.len());
        let tag = format!("t{}_{}", tile.at[0], tile.at[1]);
        // Per streamed node, the row from which later tiles read it and the rows of this
        // tile's part they read (sliced off, so the part itself dies with this tile).
        let mut kept: Vec<Kept> = Vec::new();
        let mut made: Vec<String> = Vec::with_capacity(chain.nodes.len());
        let mut slices: FxHashMap<(String, Region), String> = FxHashMap::default();
        // The crop a QuantizeLinear's copy takes over from the node it reads.
        let mut crop_after = None;
        for (k, &id) in chain.nodes.iter().enumerate() {
            let node = &graph.nodes[id];
            let mut inputs = Vec::with_capacity(node.inputs.len());
            let mut pads = None;
            for (i, read) in chain.reads[k].iter().enumerate() {
                let input = node.inputs[i];
                if let Read::Inside(j) = *read
                    && quantized_crop[j]
                    && tile.produced[j] != tile.computed[j]
                {
                    // Quantized whole, then cropped: per element, so the same integers.
                    inputs.push(made[j].clone());
                    crop_after = Some(slice_bounds(
                        chain.layouts[j],
                        tile.produced[j],
                        tile.computed[k],
                    ));
                    continue;
                }
                // H × W of the input (`None` for inputs read whole or absent).
                let grid = chain.input_grid(graph, k, i);
                let (source, held, layout) = match *read {
                    Read::Absent => {
                        inputs.push(String::new());
                        continue;
                    }
                    Read::Whole => {
                        inputs.push(graph.values[input.expect("present")].name.clone());
                        continue;
                    }
                    // A streamed chain's tiles read the rows the earlier ones made too.
                    Read::Inside(j) if tiling.streamed && !recomputed[j] => {
                        let [h, w] = chain.grids[j];
                        let name = graph.values[chain.value_of(graph, j)].name.clone();
                        (name, full(h, w), chain.layouts[j])
                    }
                    Read::Inside(j) => (made[j].clone(), tile.computed[j], chain.layouts[j]),
                    Read::Outside(layout) => {
                        let [h, w] = grid.expect("tiles read a grid");
                        let name = graph.values[input.expect("present")].name.clone();
                        (name, full(h, w), layout)
                    }
                };
                let need = tile.reads[k][i].expect("spatial inputs have a region");
                let [h, w] = grid.expect("tiles read a grid");
                let want = [need[0].clip(h), need[1].clip(w)];
                if i == 0 {
                    pads = Some(pads_of(need, want));
                }
                let name = if want == held && !bands.contains_key(&source) {
                    source
                } else {
                    let key = (source.clone(), want);
                    match slices.get(&key) {
                        Some(name) => name.clone(),
                        None => {
                            let name = match bands.get(&source) {
                                Some(bands) => bands.read(&mut b, &source, want, &tag),
                                None => {
                                    let bounds = slice_bounds(layout, held, want);
                                    b.slice(&source, bounds, &tag)
                                }
                            };
                            slices.insert(key, name.clone());
                            name
                        }
                    }
                };
                inputs.push(name);
            }
            let source = &old[id];
            let out = b.fresh(&graph.values[chain.value_of(graph, k)].name, &tag);
            let node_name = b.fresh(
                if node.name.is_empty() {
                    &node.op_type
                } else {
                    &node.name
                },
                &tag,
            );
            let mut attribute = source.attribute.clone();
            match (&chain.rules[k], pads) {
                (Rule::Window(_), Some([hb, wb, he, we])) if node.op_type == "Pad" => {
                    // Pad lists every axis's begin, then every axis's end (N and C unpadded).
                    let all = vec![0, 0, hb, wb, 0, 0, he, we];
                    if inputs.len() == 1 {
                        attribute.retain(|a| a.name() != "pads" && a.name() != "paddings");
                        attribute.push(ints_attribute("pads", all));
                    } else {
                        inputs[1] = b.constant(all);
                    }
                }
                (Rule::Window(_), Some(p)) => {
                    attribute.retain(|a| a.name() != "pads" && a.name() != "auto_pad");
                    attribute.push(ints_attribute("pads", p.to_vec()));
                }
                (Rule::Upsample(up), _) => {
                    let shape = shape_of(graph, chain.value_of(graph, k))
                        .expect("chain outputs have shapes");
                    upsample_copy(&mut b, node, up, &shape, tile.produced[k], &mut inputs);
                    if up.kind == UpsampleKind::ConvTranspose {
                        // The copy runs unpadded; the crop below takes the padding off.
                        attribute.retain(|a| a.name() != "pads" && a.name() != "auto_pad");
                    }
                }
                (Rule::Rows, _) if node.op_type == "Reshape" => {
                    // The copy's own shape: the tile's positions on the output's axes.
                    let shape = shape_of(graph, chain.value_of(graph, k))
                        .expect("chain outputs have shapes");
                    let target = tile_shape(shape, chain.layouts[k], tile.produced[k]);
                    inputs[1] = b.constant(target);
                }
                _ => {}
            }
            b.nodes.push(NodeProto {
                input: inputs,
                output: vec![out.clone()],
                name: Some(node_name.clone()),
                attribute,
                ..source.clone()
            });
            copies[k].push(node_name);
            let made_k = if let Some(bounds) = crop_after.take() {
                b.slice(&out, bounds, &tag)
            } else if tile.produced[k] == tile.computed[k] || quantized_crop[k] {
                out
            } else {
                let bounds = slice_bounds(chain.layouts[k], tile.produced[k], tile.computed[k]);
                b.slice(&out, bounds, &tag)
            };
            if tiling.streamed {
                let name = &graph.values[chain.value_of(graph, k)].name;
                if let Some(parts) = bands.get_mut(name) {
                    let span = tile.computed[k][0];
                    parts.push(made_k.clone(), span);
                    let from = tiles
                        .get(t + 1)
                        .and_then(|next| first_row_read(chain, TileRef::whole(next), k))
                        .unwrap_or(i64::MAX);
                    let tail = (from > span.start && from < span.end).then(|| {
                        let mut rows = tile.computed[k];
                        rows[0] = Span::new(from, span.end);
                        let bounds = slice_bounds(chain.layouts[k], tile.computed[k], rows);
                        (b.slice(&made_k, bounds, &format!("{tag}/tail")), rows[0])
                    });
                    kept.push((k, from, tail));
                }
            }
            made.push(made_k);
        }
        for (k, from, tail) in kept {
            let name = &graph.values[chain.value_of(graph, k)].name;
            let parts = bands.get_mut(name).expect("streamed nodes have bands");
            parts.keep_from(from, tail);
        }
        for (o, &k) in outputs.iter().enumerate() {
            let part = if k == chain.last {
                tile.part
            } else {
                tile.extra_parts[o]
            };
            let result = if part == tile.computed[k] {
                made[k].clone()
            } else {
                let bounds = slice_bounds(chain.layouts[k], tile.computed[k], part);
                b.slice(&made[k], bounds, &tag)
            };
            assembly[o].push(&mut b, result, tile.at[0], tiling.grid);
        }
    }
    // Tiles reading an earlier split's bands run as soon as the bands they read are made, so
    // they take those bands' bytes while the earlier chain's later tiles still run.
    let (early, hoisted) = match !sources.run_early || concats.is_empty() || !scatters.is_empty() {
        true => (Vec::new(), Vec::new()),
        false => run_early(&mut b, &tile_starts, graph, order, end),
    };
    // The chain's output, when only earlier splits' Slices read it, is never assembled: each
    // Slice becomes a read of the row strips at its own step.
    let last = assembly.pop().expect("the chain's output is assembled");
    let strips = if chain.layouts[chain.last] == super::layout::NCHW {
        read_at_slices(&mut b, graph, order, (chain, tiling), &last.strips, sources)
    } else {
        None
    };
    let SliceReads {
        late,
        renamed,
        slices: unsliced,
    } = strips.unwrap_or_else(|| {
        assembly.push(last);
        SliceReads::default()
    });
    for a in assembly {
        a.finish(&mut b, tiling.grid);
    }

    let internal: FxHashSet<&str> = (0..chain.nodes.len())
        .filter(|k| !outputs.contains(k))
        .map(|k| graph.values[chain.value_of(graph, k)].name.as_str())
        .chain(concats.iter().chain(&unsliced).map(|&c| {
            let out = graph.nodes[c].outputs[0].expect("a Concat or Slice has an output");
            graph.values[out].name.as_str()
        }))
        .chain((!unsliced.is_empty()).then_some(graph.values[chain.output].name.as_str()))
        .collect();
    let in_chain: FxHashSet<NodeId> = chain.nodes.iter().copied().collect();
    // Shape nodes reading a tensor the chain no longer makes become its known value.
    let folded: Vec<NodeId> = (0..graph.nodes.len())
        .filter(|&n| {
            is_foldable_shape(graph, n)
                && graph.nodes[n]
                    .inputs
                    .iter()
                    .flatten()
                    .any(|&v| internal.contains(graph.values[v].name.as_str()))
        })
        .collect();
    b.fold_shapes(graph, &folded);
    let replaced = |n: NodeId| {
        in_chain.contains(&n)
            || folded.contains(&n)
            || concats.contains(&n)
            || unsliced.contains(&n)
            || pooled.iter().any(|p| p.0 == n)
    };
    // The tiles moved early come first: at the chain's own step they precede the assembly.
    let main = early.len();
    let rewrites = early
        .into_iter()
        .chain([(end, b)])
        .chain(late)
        .chain(pool_rewrites)
        .collect();
    let (mut model, mut kept, mut glue) = splice(proto, order, rewrites, &replaced, &internal);
    hoist(&mut model, &mut kept, &hoisted);
    if !renamed.is_empty() {
        let g = model.graph.as_mut().expect("a loaded model has a graph");
        for input in g.node.iter_mut().flat_map(|n| n.input.iter_mut()) {
            if let Some(to) = renamed.get(input) {
                *input = to.clone();
            }
        }
    }
    mark_scatters(&mut model, &scatters);
    Rewritten {
        model,
        kept,
        parts: vec![Parts {
            first_pass: Vec::new(),
            copies,
            glue: glue.swap_remove(main),
            pools: pooled,
        }],
        dropped: concats
            .iter()
            .map(|&c| graph.nodes[c].name.clone())
            .collect(),
        unsliced: unsliced
            .iter()
            .map(|&c| graph.nodes[c].name.clone())
            .collect(),
    }
}

/// Moves each tile's nodes (from `starts[t]` on in `b`, up to the next tile's) into a rewrite
/// of its own, at the step just after the last step of `order` making a tensor it reads (its
/// bands of an earlier split, the tensors it reads whole), no earlier than the tile before it
/// and no later than `end`, the chain's own step. A tensor made from constants alone (a
/// weight's DequantizeLinear) holds no tile back: its node is returned, to run first.
fn run_early(
    b: &mut Glue,
    starts: &[usize],
    graph: &Graph,
    order: &[NodeId],
    end: usize,
) -> (Vec<(usize, Glue)>, Vec<NodeId>) {
    let mut made_at: FxHashMap<&str, (usize, NodeId)> = FxHashMap::default();
    for (step, &n) in order.iter().enumerate() {
        for &v in graph.nodes[n].outputs.iter().flatten() {
            made_at.insert(graph.values[v].name.as_str(), (step, n));
        }
    }
    let mut tiles: Vec<Glue> = starts.iter().rev().map(|&from| b.detach(from)).collect();
    tiles.reverse();
    let mut step = 0;
    let mut made_by_tiles: FxHashSet<String> = FxHashSet::default();
    let mut hoisted = Vec::new();
    let mut placed = Vec::with_capacity(tiles.len());
    for tile in tiles {
        for node in &tile.nodes {
            for input in &node.input {
                if made_by_tiles.contains(input) {
                    continue;
                }
                match made_at.get(input.as_str()) {
                    Some(&(_, n)) if reads_constants_only(graph, n) => hoisted.push(n),
                    Some(&(at, _)) => step = step.max(at + 1),
                    None => {}
                }
            }
            made_by_tiles.extend(node.output.iter().cloned());
        }
        placed.push((step.min(end), tile));
    }
    hoisted.sort_unstable();
    hoisted.dedup();
    (placed, hoisted)
}

/// Node `n` reads only values that exist before the first step (initializers, constant graph
/// inputs) and makes no graph output, so it may run first. Stricter than
/// [`super::chain::is_constant`] and [`Graph::is_model_constant`]: a `Constant` node's or a
/// folded `Shape`'s output has a producer, which must run before its readers.
fn reads_constants_only(graph: &Graph, n: NodeId) -> bool {
    let node = &graph.nodes[n];
    node.inputs.iter().flatten().all(|&v| {
        let value = &graph.values[v];
        value.producer.is_none()
            && (value.kind == ValueKind::Initializer || value.constant.is_some())
    }) && node.outputs.iter().flatten().all(|&v| !graph.values[v].is_output)
}

/// Moves the `nodes` (old ids, as `kept` maps the new nodes to them) to the front of the
/// model, in their order there: they read constants alone, so any order keeps the graph
/// topological.
fn hoist(model: &mut ModelProto, kept: &mut Vec<Option<usize>>, nodes: &[NodeId]) {
    if nodes.is_empty() {
        return;
    }
    let g = model.graph.as_mut().expect("a loaded model has a graph");
    let (front, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut g.node)
        .into_iter()
        .zip(std::mem::take(kept))
        .partition(|(_, k)| k.is_some_and(|old| nodes.contains(&old)));
    (g.node, *kept) = front.into_iter().chain(rest).unzip();
}

/// A streamed chain node after a tile: its position in the chain, the first row of it later
/// tiles read, and the rows of the tile's part they read, sliced off (when they are not the
/// whole part).
type Kept = (usize, i64, Option<(String, Span)>);

/// The explicit pads of a window tile: how far the region read reaches before and after the
/// part of the input that exists, as ONNX `pads` (begin H, begin W, end H, end W).
fn pads_of(need: Region, want: Region) -> [i64; 4] {
    [
        want[0].start - need[0].start,
        want[1].start - need[1].start,
        need[0].end - want[0].end,
        need[1].end - want[1].end,
    ]
}

/// The Slice bounds (starts, ends, axes) cutting `want` out of a tensor laid out as `layout`
/// holding `held`: its H and W axes; of a token-major one, the tokens of the rows
/// (both regions span every column, `held`'s width).
pub(super) fn slice_bounds(layout: Layout, held: Region, want: Region) -> [Vec<i64>; 3] {
    let rel = |s: Span, h: Span| [s.start - h.start, s.end - h.start];
    let [h0, h1] = rel(want[0], held[0]);
    match layout {
        Layout::Grid([h, w]) => {
            let [w0, w1] = rel(want[1], held[1]);
            [vec![h0, w0], vec![h1, w1], vec![h as i64, w as i64]]
        }
        Layout::Tokens(axis) => {
            let width = held[1].len();
            [vec![h0 * width], vec![h1 * width], vec![axis as i64]]
        }
    }
}

/// The shape of a tile copy's output: `shape` with the positions of `region` on the axes
/// `layout` keeps them.
fn tile_shape(mut shape: Vec<i64>, layout: Layout, region: Region) -> Vec<i64> {
    match layout {
        Layout::Grid([h, w]) => {
            shape[h] = region[0].len();
            shape[w] = region[1].len();
        }
        Layout::Tokens(axis) => shape[axis] = area(region),
    }
    shape
}

/// The inputs of an upsampling node's tile copy: a Resize given `sizes` gets the sizes of
/// the region the copy makes (`produced`; `shape` is the whole output's), on the axes the
/// node's `axes` attribute names (all four by default).
fn upsample_copy(
    b: &mut Glue,
    node: &Node,
    up: &Upsample,
    shape: &[i64],
    produced: Region,
    inputs: &mut [String],
) {
    if up.kind != UpsampleKind::Resize || inputs.len() < 4 || inputs[3].is_empty() {
        return;
    }
    let dims = [shape[0], shape[1], produced[0].len(), produced[1].len()];
    let sizes = match node.attr_ints("axes") {
        Some(axes) => axes
            .iter()
            .map(|&a| dims[a.rem_euclid(4) as usize])
            .collect(),
        None => dims.to_vec(),
    };
    inputs[3] = b.constant(sizes);
}

/// The assembly of one chain output from the tiles' parts: a Concat along W per row of tiles
/// (a row strip), then a Concat along H of the strips, under the output's own name.
struct Assembly {
    name: String,
    /// The axes holding H and W.
    axes: [i64; 2],
    row: Vec<String>,
    strips: Vec<String>,
}

impl Assembly {
    fn new(name: &str, axes: [i64; 2]) -> Assembly {
        Assembly {
            name: name.to_string(),
            axes,
            row: Vec::new(),
            strips: Vec::new(),
        }
    }

    /// Adds the next tile's part (tiles come row by row); a full row becomes a strip.
    fn push(&mut self, b: &mut Glue, part: String, at_row: usize, grid: [usize; 2]) {
        self.row.push(part);
        if self.row.len() < grid[1] {
            return;
        }
        let row = std::mem::take(&mut self.row);
        if row.len() == 1 {
            self.strips.extend(row);
            return;
        }
        let strip = if grid[0] == 1 {
            self.name.clone()
        } else {
            b.fresh(&self.name, &format!("row{at_row}"))
        };
        b.concat(row, self.axes[1], &strip);
        self.strips.push(strip);
    }

    /// Concatenates the strips into the output (a single strip already is it).
    fn finish(self, b: &mut Glue, grid: [usize; 2]) {
        if grid[0] > 1 {
            b.concat(self.strips, self.axes[0], &self.name);
        }
    }
}

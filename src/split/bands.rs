//! Bands: a tensor a chain's tiles read held as parts along H or W, each freed once the last
//! tile reading it has run, so the whole tensor is never held and the tiles' results fill the
//! space it gives up. Its sources:
//! - a graph input, cut where each row of tiles starts reading by a Split the model names in
//!   its `memplan.scatter` metadata (see [`crate::ir::scatter_nodes`]): the runtime writes the
//!   input straight into the bands;
//! - the output of a Concat an earlier split added to assemble its chain's output along H or
//!   W: the tiles read that chain's parts, and the Concat goes;
//! - a chain's own output when only an earlier split's Slices read it (that split's tiles):
//!   each Slice becomes a read of the new chain's row strips at its step, and the output is
//!   never assembled.
//!
//! Global pools of an assembled tensor (a squeeze-and-excitation block's) read its bands too,
//! see [`super::pools`].

use std::collections::HashMap;

use super::chain::{Chain, Read};
use super::glue::Glue;
use super::layout::NCHW;
use super::pools::{GlobalPool, global_pool_of};
use super::region::{Region, Span};
use super::rewrite::slice_bounds;
use super::rules::shape_of;
use super::tiling::Tiling;
use crate::ir::{Graph, NodeId, SCATTER_KEY, ValueId, ValueKind};
use crate::liveness::rules::slice_window;
use crate::onnx::proto::{ModelProto, StringStringEntryProto};

/// One scattered input: its bands along one axis.
pub struct Bands {
    /// The axis cut (2 for H, 3 for W).
    axis: usize,
    /// Each band's tensor and its span along the axis.
    bands: Vec<(String, Span)>,
    /// The input's extent along H and W.
    size: [i64; 2],
}

impl Bands {
    /// The bands `bands` (each tensor and its span) cutting a tensor of H × W `size` along
    /// `axis` (2 for H, 3 for W).
    fn new(axis: usize, bands: Vec<(String, Span)>, size: [i64; 2]) -> Bands {
        Bands { axis, bands, size }
    }

    /// No bands yet of a tensor of H × W `size` cut along H, which a streamed chain's tiles
    /// make row strip by row strip ([`super::tiling::stream`]).
    pub fn along_rows(size: [i64; 2]) -> Bands {
        Bands::new(2, Vec::new(), size)
    }

    /// Adds a band below the others.
    pub fn push(&mut self, name: String, span: Span) {
        self.bands.push((name, span));
    }

    /// Drops the bands ending at or before `row`, and replaces the last band by `last` when
    /// given (the rows of it still to be read, sliced off).
    pub fn keep_from(&mut self, row: i64, last: Option<(String, Span)>) {
        if let Some(last) = last {
            self.bands.pop();
            self.bands.push(last);
        }
        self.bands.retain(|b| b.1.end > row);
    }

    /// The bands' tensors, in order along the axis.
    pub fn names(&self) -> Vec<String> {
        self.bands.iter().map(|b| b.0.clone()).collect()
    }

    /// The whole tensor's extent along H and W.
    pub fn size(&self) -> [i64; 2] {
        self.size
    }

    /// The tensor holding `want` (clipped to the input) for tile `tag`: one band, a Slice of
    /// one, or the Concat of the parts of the bands it crosses.
    pub fn read(&self, b: &mut Glue, source: &str, want: Region, tag: &str) -> String {
        let a = self.axis - 2;
        let mut parts = Vec::new();
        for (name, span) in &self.bands {
            let along = Span::new(want[a].start.max(span.start), want[a].end.min(span.end));
            if along.is_empty() {
                continue;
            }
            let mut held = [Span::new(0, self.size[0]), Span::new(0, self.size[1])];
            held[a] = *span;
            let mut part = want;
            part[a] = along;
            parts.push(if part == held {
                name.clone()
            } else {
                b.slice(name, slice_bounds(NCHW, held, part), tag)
            });
        }
        if parts.len() == 1 {
            return parts.pop().expect("one part");
        }
        let out = b.fresh(source, &format!("{tag}/bands"));
        b.concat(parts, self.axis as i64, &out);
        out
    }
}

/// A spatial input of a chain that an earlier split assembled: the Concat along H or W that
/// made it, and its parts.
pub struct Assembled {
    /// The assembled tensor.
    pub value: ValueId,
    /// The Concat making it.
    pub concat: NodeId,
    /// The Concat's axis (2 for H, 3 for W).
    pub axis: usize,
    /// Each part and its span along the axis, in the Concat's order.
    pub parts: Vec<(ValueId, Span)>,
    /// The tensor's extent along H and W.
    pub size: [i64; 2],
    /// The global pools of the tensor outside the chain, which read the parts too.
    pub pools: Vec<(NodeId, GlobalPool)>,
}

/// The chain's spatial inputs made by a Concat along H or W that an earlier split added
/// (`made_by_split`) and that only this chain and global pools of the whole tensor read, each
/// once.
pub fn assembled_inputs(
    graph: &Graph,
    chain: &Chain,
    made_by_split: &dyn Fn(NodeId) -> bool,
) -> Vec<Assembled> {
    let mut found: Vec<Assembled> = Vec::new();
    for (k, reads) in chain.reads.iter().enumerate() {
        for (i, read) in reads.iter().enumerate() {
            let Some(v) = graph.nodes[chain.nodes[k]].inputs[i] else {
                continue;
            };
            let value = &graph.values[v];
            let Some(p) = value.producer else { continue };
            let concat = &graph.nodes[p];
            let mut pools = Vec::new();
            let only_chain_and_pools = value.consumers.iter().all(|&c| {
                chain.nodes.contains(&c)
                    || global_pool_of(graph, &graph.nodes[c], v)
                        .map(|pool| pools.push((c, pool)))
                        .is_some()
            });
            if *read != Read::Outside(NCHW)
                || concat.op_type != "Concat"
                || !concat.domain.is_empty()
                || !made_by_split(p)
                || value.is_output
                || !only_chain_and_pools
                || found.iter().any(|a| a.value == v)
            {
                continue;
            }
            let Some(shape) = shape_of(graph, v).filter(|s| s.len() == 4) else {
                continue;
            };
            let axis = match concat.attr_int("axis") {
                Some(a @ (2 | 3)) => a as usize,
                Some(a @ (-2 | -1)) => (a + 4) as usize,
                _ => continue,
            };
            let mut parts = Vec::with_capacity(concat.inputs.len());
            let mut at = 0;
            for &part in &concat.inputs {
                let Some((u, len)) = part.and_then(|u| Some((u, *shape_of(graph, u)?.get(axis)?)))
                else {
                    break;
                };
                parts.push((u, Span::new(at, at + len)));
                at += len;
            }
            if parts.len() != concat.inputs.len() || at != shape[axis] {
                continue;
            }
            found.push(Assembled {
                value: v,
                concat: p,
                axis,
                parts,
                size: [shape[2], shape[3]],
                pools,
            });
        }
    }
    found
}

/// The chain's inputs an earlier split assembled ([`assembled_inputs`]), read as bands.
#[derive(Default)]
pub struct ConcatInputs {
    /// The bands, by input name.
    pub bands: HashMap<String, Bands>,
    /// The Concats that assembled them, which the rewrite drops.
    pub concats: Vec<NodeId>,
    /// The global pools of those inputs, each with the input's name: the rewrite replaces
    /// each by reductions of the bands.
    pub pools: Vec<(NodeId, GlobalPool, String)>,
}

/// The chain's inputs an earlier split assembled ([`assembled_inputs`]) as bands: their
/// parts, the Concats that go and the pools that read the parts instead.
pub fn concat_inputs(
    graph: &Graph,
    chain: &Chain,
    made_by_split: &dyn Fn(NodeId) -> bool,
) -> ConcatInputs {
    let mut found = ConcatInputs::default();
    for a in assembled_inputs(graph, chain, made_by_split) {
        let bands = a
            .parts
            .iter()
            .map(|&(u, span)| (graph.values[u].name.clone(), span))
            .collect();
        let name = &graph.values[a.value].name;
        found
            .bands
            .insert(name.clone(), Bands::new(a.axis, bands, a.size));
        found.concats.push(a.concat);
        found
            .pools
            .extend(a.pools.into_iter().map(|(n, p)| (n, p, name.clone())));
    }
    found
}

/// The readers of `v` when every one is a Slice an earlier split added (`made_by_split`)
/// that cuts H and W only, with unit steps, each with its step in `order` and the region it
/// takes (clipped to the tensor); `None` otherwise or without readers.
fn sliced_by_split(
    graph: &Graph,
    order: &[NodeId],
    v: ValueId,
    made_by_split: &dyn Fn(NodeId) -> bool,
) -> Option<Vec<(NodeId, usize, Region)>> {
    let value = &graph.values[v];
    let shape = shape_of(graph, v).filter(|s| s.len() == 4)?;
    if value.is_output || value.consumers.is_empty() {
        return None;
    }
    let mut found = Vec::with_capacity(value.consumers.len());
    for &c in &value.consumers {
        let node = &graph.nodes[c];
        if node.op_type != "Slice"
            || !node.domain.is_empty()
            || !made_by_split(c)
            || node.inputs.first().copied().flatten() != Some(v)
        {
            return None;
        }
        // Unit steps, cutting H and W only (N and C whole).
        let out = shape_of(graph, node.outputs.first().copied().flatten()?)?;
        let (begin, extent) = slice_window(graph, node, &shape, &out)?;
        if begin[..2] != [0, 0] || extent[..2] != shape[..2] {
            return None;
        }
        let region = [2, 3].map(|a| Span::new(begin[a], begin[a] + extent[a]));
        let step = order.iter().position(|&n| n == c)?;
        found.push((c, step, region));
    }
    found.sort_by_key(|f| f.1);
    Some(found)
}

/// The reads of a chain's row strips that replace the Slices earlier splits took of its
/// output ([`read_at_slices`]).
#[derive(Default)]
pub struct SliceReads {
    /// Each read, a rewrite of its own for the step of the Slice it replaces.
    pub late: Vec<(usize, Glue)>,
    /// Each Slice's output, renamed to its read.
    pub renamed: HashMap<String, String>,
    /// The Slices replaced.
    pub slices: Vec<NodeId>,
}

/// When only Slices that earlier splits added (`sources.made_by_split`) read the chain's
/// output, each cutting H and W only with unit steps, and its tiles come in several rows: the
/// same reads of its row `strips` (in row order) at the Slices' steps, so the output is never
/// assembled; `None` otherwise. The reads' nodes are made in `b` and moved to rewrites of
/// their own.
pub fn read_at_slices(
    b: &mut Glue,
    graph: &Graph,
    order: &[NodeId],
    (chain, tiling): (&Chain, &Tiling),
    strips: &[String],
    sources: &super::rewrite::BandSources,
) -> Option<SliceReads> {
    if tiling.grid[0] < 2 {
        return None;
    }
    let readers = sliced_by_split(graph, order, chain.output, sources.made_by_split)?;
    let rows = (0..tiling.grid[0]).map(|g| {
        let tile = tiling.each().find(|t| t.at() == [g, 0]);
        tile.expect("every row of tiles has a first tile").part()[0]
    });
    let bands = Bands::new(
        2,
        strips.iter().cloned().zip(rows).collect(),
        chain.grids[chain.last],
    );
    let name = &graph.values[chain.output].name;
    let mut reads = SliceReads::default();
    for (i, &(slice, step, region)) in readers.iter().enumerate() {
        let from = b.nodes.len();
        let read = bands.read(b, name, region, &format!("r{i}"));
        reads.late.push((step, b.detach(from)));
        let out = graph.nodes[slice].outputs[0].expect("a Slice has an output");
        reads.renamed.insert(graph.values[out].name.clone(), read);
        reads.slices.push(slice);
    }
    Some(reads)
}

/// Cuts every graph input the chain reads (and nothing else reads) into bands, one per row of
/// tiles (per column for a single row), starting where that row starts reading; adds the
/// Split nodes to `b` and returns the bands by input name with the Splits' names. An input
/// whose rows of tiles would not read in order, or that would make a single band, is left
/// whole.
pub fn scatter_inputs(
    b: &mut Glue,
    graph: &Graph,
    chain: &Chain,
    tiling: &Tiling,
) -> (HashMap<String, Bands>, Vec<String>) {
    let mut found: HashMap<String, Bands> = HashMap::new();
    let mut splits = Vec::new();
    let axis = match tiling.grid {
        [r, _] if r >= 2 => 2,
        [1, c] if c >= 2 => 3,
        _ => return (found, splits),
    };
    let a = axis - 2;
    for (k, reads) in chain.reads.iter().enumerate() {
        for (i, read) in reads.iter().enumerate() {
            let Some(v) = graph.nodes[chain.nodes[k]].inputs[i] else {
                continue;
            };
            let value = &graph.values[v];
            let only_chain = value.consumers.iter().all(|c| chain.nodes.contains(c));
            if *read != Read::Outside(NCHW)
                || value.kind != ValueKind::Input
                || value.is_output
                || !only_chain
                || found.contains_key(&value.name)
            {
                continue;
            }
            let Some(shape) = shape_of(graph, v) else {
                continue;
            };
            let size = [shape[2], shape[3]];
            let Some(cuts) = band_cuts(chain, tiling, v, graph, a, size[a]) else {
                continue;
            };
            let spans: Vec<Span> = cuts.windows(2).map(|c| Span::new(c[0], c[1])).collect();
            let names: Vec<String> = (0..spans.len())
                .map(|j| b.fresh(&value.name, &format!("band{j}")))
                .collect();
            let name = b
                .names
                .fresh(&format!("{}/{}/Scatter", value.name, b.label));
            let sizes: Vec<i64> = spans.iter().map(|s| s.len()).collect();
            b.split(&value.name, (axis as i64, sizes), &names, &name);
            splits.push(name);
            let bands = names.into_iter().zip(spans).collect();
            found.insert(value.name.clone(), Bands { axis, bands, size });
        }
    }
    (found, splits)
}

/// The band boundaries of input `v` along axis `a` (0 = H, 1 = W) of extent `size`: 0, where
/// each later row (column) of tiles starts reading it, and `size`; `None` when the starts go
/// backwards or make a single band.
fn band_cuts(
    chain: &Chain,
    tiling: &Tiling,
    v: usize,
    graph: &Graph,
    a: usize,
    size: i64,
) -> Option<Vec<i64>> {
    let groups = tiling.grid[a];
    let mut starts = vec![i64::MAX; groups];
    for tile in tiling.tiles() {
        for (k, reads) in tile.reads.iter().enumerate() {
            let node = &graph.nodes[chain.nodes[k]];
            for (i, region) in reads.iter().enumerate() {
                if let (Some(r), Some(input)) = (region, node.inputs.get(i).copied().flatten())
                    && input == v
                {
                    let g = tile.at[a];
                    starts[g] = starts[g].min(r[a].clip(size).start);
                }
            }
        }
    }
    let mut cuts = vec![0];
    for &s in &starts[1..] {
        let last = *cuts.last().expect("starts at 0");
        if s < last || s > size {
            return None;
        }
        if s > last && s < size {
            cuts.push(s);
        }
    }
    cuts.push(size);
    (cuts.len() > 2).then_some(cuts)
}

/// Adds `splits` to the model's `memplan.scatter` metadata entry (a JSON array of names).
pub fn mark_scatters(model: &mut ModelProto, splits: &[String]) {
    if splits.is_empty() {
        return;
    }
    let props = &mut model.metadata_props;
    let mut names: Vec<String> = props
        .iter()
        .find(|p| p.key() == SCATTER_KEY)
        .and_then(|p| serde_json::from_str(p.value()).ok())
        .unwrap_or_default();
    names.extend(splits.iter().cloned());
    props.retain(|p| p.key() != SCATTER_KEY);
    props.push(StringStringEntryProto {
        key: Some(SCATTER_KEY.to_string()),
        value: Some(serde_json::to_string(&names).expect("names serialise")),
    });
}

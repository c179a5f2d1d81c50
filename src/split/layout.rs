//! Where a chain tensor keeps its H × W positions. Convolution-like operators work on NCHW
//! tensors (H and W on axes 2 and 3); ConvNeXt's blocks permute them to channels-last NHWC for
//! a LayerNorm and Linears; a vision transformer's layers work on token-major tensors, one
//! axis of which holds the positions row by row (token `h·W + w`), made from H × W by
//! Reshapes and turned back by Reshapes (SegFormer's Mix-FFN runs a Linear, a depthwise Conv
//! over the tokens laid out as an image, and a Linear; onnxruntime's Gemm fusion flattens
//! `[1, H, W, C]` to `[H·W, C]` around each Gemm). A chain may hold every kind: a tile that is
//! a band of whole rows is a contiguous range of tokens.
//!
//! The layouts are resolved over a chain from its NCHW operators, through the row table
//! ([`super::rows::rules`]) of the other operators (each of H and W is a row axis of its own)
//! and the Reshapes that merge H and W into one axis or split one into both, forwards and
//! backwards until nothing changes.

use rustc_hash::FxHashMap;

use super::rows::rules::{RowRead, RuleSet, row_rule};
use super::rules::{Inputs, Rule, is_nchw_integer, shape_of};
use crate::ir::{Graph, Node, NodeId, ValueId};

/// Where a tensor keeps its positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// H on the first of these axes, W on the second.
    Grid([usize; 2]),
    /// One axis (this one) holds the positions row by row, token `h·W + w`.
    Tokens(usize),
}

/// The layout of NCHW tensors.
pub const NCHW: Layout = Layout::Grid([2, 3]);

impl Layout {
    /// The axes a Concat assembling parts along H (rows of tiles) and along W (columns)
    /// joins on; a token axis joins bands of whole rows only.
    pub fn concat_axes(self) -> [i64; 2] {
        match self {
            Layout::Grid([h, w]) => [h as i64, w as i64],
            Layout::Tokens(a) => [a as i64, a as i64],
        }
    }
}

/// A tensor's layout and its H × W.
pub type Placed = (Layout, [i64; 2]);

/// The product of some dimensions.
fn product(dims: &[i64]) -> i64 {
    dims.iter().product()
}

/// The axis `a` of `shape` that holds `n` positions with `before` elements before it and
/// `after` after it; `None` when there is none or `n < 2`.
fn token_axis(shape: &[i64], n: i64, [before, after]: [i64; 2]) -> Option<usize> {
    if n < 2 {
        return None;
    }
    (0..shape.len()).find(|&a| {
        shape[a] == n && product(&shape[..a]) == before && product(&shape[a + 1..]) == after
    })
}

/// The adjacent axes `[h, h + 1]` of `shape` that hold a `grid` with `before` elements before
/// them and `after` after them.
fn grid_axes(shape: &[i64], grid: [i64; 2], [before, after]: [i64; 2]) -> Option<usize> {
    if grid[0] * grid[1] < 2 {
        return None;
    }
    (0..shape.len().saturating_sub(1)).find(|&h| {
        shape[h..h + 2] == grid
            && product(&shape[..h]) == before
            && product(&shape[h + 2..]) == after
    })
}

/// Whether a node is a default-domain Reshape or Flatten (which may merge or split the axes
/// holding the positions).
fn reshapes(node: &Node) -> bool {
    node.domain.is_empty() && matches!(node.op_type.as_str(), "Reshape" | "Flatten")
}

/// Whether a node is an NCHW operator, which fixes where its tensors keep their positions: a
/// window, an upsampling, BatchNormalization, a channel Concat or an integer operator of the
/// QOperator form (QLinearAdd...). An elementwise or token-major node's layout follows its
/// neighbours'.
pub fn fixes_layout(rule: &Rule, node: &Node) -> bool {
    match rule {
        Rule::Rows => false,
        Rule::Pointwise(Inputs::All) => node.op_type == "Concat" || is_nchw_integer(node),
        Rule::Pointwise(Inputs::First) | Rule::Window(_) | Rule::Upsample(_) => true,
    }
}

/// H and W of an NCHW value.
fn nchw_grid(graph: &Graph, v: ValueId) -> Option<[i64; 2]> {
    let s = shape_of(graph, v)?;
    (s.len() == 4).then(|| [s[2], s[3]])
}

/// Where each input of a node placed as `out` keeps its positions, `None` for inputs read
/// whole (or absent): through the row table on the token axis, or on H and on W; through a
/// Reshape merging H and W into the token axis or splitting it. `None` when the node cannot
/// make `out` position by position.
pub fn input_places(
    graph: &Graph,
    node: &Node,
    placed: Placed,
    opset: i64,
) -> Option<Vec<Option<Placed>>> {
    places_by(graph, node, placed, &mut |axis| plain_reads(graph, node, axis, opset))
}

/// How `node` reads its inputs when blocks cut `axis` of its output, by the row table's
/// plain rule set (`None` when its rows along that axis are not independent).
fn plain_reads(graph: &Graph, node: &Node, axis: usize, opset: i64) -> Option<Vec<RowRead>> {
    row_rule(graph, node, axis, (opset, RuleSet::Plain)).map(|r| r.reads)
}

/// How a node reads its inputs when blocks cut one axis of its output: what
/// [`row_rule`] says for that axis, in its plain rule set.
type RowReads<'a> = &'a mut dyn FnMut(usize) -> Option<Vec<RowRead>>;

/// [`input_places`], with the node's row reads along each output axis from `rows`.
fn places_by(
    graph: &Graph,
    node: &Node,
    (layout, grid): Placed,
    rows: RowReads,
) -> Option<Vec<Option<Placed>>> {
    let out_shape = shape_of(graph, node.outputs.first().copied().flatten()?)?;
    if !holds(&out_shape, (layout, grid)) {
        return None;
    }
    let input_shape = |i: usize| shape_of(graph, node.inputs.get(i).copied().flatten()?);
    let places: Option<Vec<Option<Placed>>> = match layout {
        Layout::Tokens(a) => rows(a).and_then(|reads| {
            reads
                .iter()
                .enumerate()
                .map(|(i, read)| match *read {
                    RowRead::Rows(b) => (input_shape(i)?.get(b) == Some(&(grid[0] * grid[1])))
                        .then_some(Some((Layout::Tokens(b), grid))),
                    _ => Some(None),
                })
                .collect()
        }),
        Layout::Grid([h, w]) => rows(h).zip(rows(w)).and_then(|(along_h, along_w)| {
            along_h
                .iter()
                .zip(&along_w)
                .enumerate()
                .map(|(i, (&along_h, &along_w))| match (along_h, along_w) {
                    (RowRead::Rows(bh), RowRead::Rows(bw)) => {
                        let s = input_shape(i)?;
                        (s.get(bh) == Some(&grid[0]) && s.get(bw) == Some(&grid[1]))
                            .then_some(Some((Layout::Grid([bh, bw]), grid)))
                    }
                    (RowRead::Rows(_), _) | (_, RowRead::Rows(_)) => None,
                    _ => Some(None),
                })
                .collect()
        }),
    };
    if places.is_some() || !reshapes(node) {
        return places;
    }
    // A Reshape between H × W and one token axis: the elements before and after stay.
    let input = input_shape(0)?;
    let first = match layout {
        Layout::Tokens(a) => {
            let h = (0..input.len().saturating_sub(1)).find(|&h| {
                token_axis(&out_shape, input[h] * input[h + 1], around(&input, h, 2)) == Some(a)
                    && input[h..h + 2] == grid
            })?;
            (Layout::Grid([h, h + 1]), grid)
        }
        Layout::Grid([h, w]) if w == h + 1 => {
            let a = token_axis(&input, grid[0] * grid[1], around(&out_shape, h, 2))?;
            (Layout::Tokens(a), grid)
        }
        Layout::Grid(_) => return None,
    };
    let mut places = vec![None; node.inputs.len()];
    places[0] = Some(first);
    Some(places)
}

/// The elements before axis `at` and after the `n` axes from it.
fn around(shape: &[i64], at: usize, n: usize) -> [i64; 2] {
    [product(&shape[..at]), product(&shape[at + n..])]
}

/// Where the output of a node keeps its positions when its input `i` is placed as `input`:
/// the placement whose [`input_places`] reads that input so.
fn output_place(
    graph: &Graph,
    node: &Node,
    i: usize,
    (layout, grid): Placed,
    rows: RowReads,
) -> Option<Placed> {
    let out_shape = shape_of(graph, node.outputs.first().copied().flatten()?)?;
    let rank = out_shape.len();
    let mut tries: Vec<Layout> = match layout {
        Layout::Tokens(_) => (0..rank).map(Layout::Tokens).collect(),
        Layout::Grid(_) => (0..rank)
            .flat_map(|h| (0..rank).filter(move |&w| w != h).map(move |w| [h, w]))
            .map(Layout::Grid)
            .collect(),
    };
    if reshapes(node) && i == 0 {
        // A Reshape may turn the grid into tokens or tokens into a grid.
        let input = shape_of(graph, node.inputs[0]?)?;
        match layout {
            Layout::Tokens(b) => {
                if let Some(h) = grid_axes(&out_shape, grid, around(&input, b, 1)) {
                    tries.push(Layout::Grid([h, h + 1]));
                }
            }
            Layout::Grid([h, w]) if w == h + 1 => {
                let n = grid[0] * grid[1];
                if let Some(a) = token_axis(&out_shape, n, around(&input, h, 2)) {
                    tries.push(Layout::Tokens(a));
                }
            }
            Layout::Grid(_) => {}
        }
    }
    // Only a layout whose axes hold the grid can be read so (`places_by` checks it first:
    // checked here, the output's shape is not looked up again for each layout).
    tries
        .into_iter()
        .filter(|&l| holds(&out_shape, (l, grid)))
        .map(|l| (l, grid))
        .find(|&out| {
            places_by(graph, node, out, rows)
                .is_some_and(|places| places.get(i) == Some(&Some((layout, grid))))
        })
}

/// Whether the axes of `layout` in `shape` hold `grid`: its H and W, or H × W tokens.
fn holds(shape: &[i64], (layout, grid): Placed) -> bool {
    match layout {
        Layout::Tokens(a) => shape.get(a) == Some(&(grid[0] * grid[1])),
        Layout::Grid([h, w]) => shape.get(h) == Some(&grid[0]) && shape.get(w) == Some(&grid[1]),
    }
}

/// The layout each node of a chain (`nodes`, with their `rules`) makes its output in, with its
/// H × W; `None` when a tensor would need two layouts or a node's layout cannot be found.
/// Elementwise nodes of rank 4 that no layout reaches are NCHW. `opset` is the default
/// domain's version.
pub fn resolve(graph: &Graph, nodes: &[NodeId], rules: &[Rule], opset: i64) -> Option<Vec<Placed>> {
    let mut known: FxHashMap<ValueId, Placed> = FxHashMap::default();
    // Records a layout: `Some(true)` when it is new, `None` when it contradicts one known.
    let set = |known: &mut FxHashMap<ValueId, Placed>, v: ValueId, p: Placed| match known.get(&v) {
        Some(old) if *old == p => Some(false),
        Some(_) => None,
        None => {
            known.insert(v, p);
            Some(true)
        }
    };
    let output = |id: NodeId| graph.nodes[id].outputs.first().copied().flatten();
    // What fixes a layout: the NCHW operators. (A rank-4 tensor elsewhere need not be NCHW:
    // a transformer's `[B, S, heads, dh]` is not.)
    let mut free = Vec::new();
    for (&id, rule) in nodes.iter().zip(rules) {
        let node = &graph.nodes[id];
        let out = output(id)?;
        if !fixes_layout(rule, node) {
            free.push(id);
            continue;
        }
        let spatial: &[Option<ValueId>] = match rule {
            Rule::Pointwise(Inputs::All) => &node.inputs,
            _ => &node.inputs[..1],
        };
        let grid = nchw_grid(graph, out)?;
        set(&mut known, out, (NCHW, grid))?;
        for &v in spatial.iter().flatten() {
            // A pointwise operator's scalar operands (a QLinearAdd's scales) are read whole.
            let rank = shape_of(graph, v).map(|s| s.len());
            if matches!(rule, Rule::Pointwise(Inputs::All)) && rank != Some(4) {
                continue;
            }
            set(&mut known, v, (NCHW, nchw_grid(graph, v)?))?;
        }
    }
    // Through the other nodes, both ways, until nothing changes. A node whose inputs were
    // placed from its output's layout, or whose output no layout of the input it was tried
    // from makes, would only do the same again (a layout once known never changes): each
    // is done once. Each free node's row reads along an axis are asked for once (the same
    // node is asked about the same axes again for each layout tried).
    let mut reads: FxHashMap<(NodeId, usize), Option<Vec<RowRead>>> = FxHashMap::default();
    let mut placed_inputs = vec![false; free.len()];
    let mut tried_from: Vec<Option<(usize, Placed)>> = vec![None; free.len()];
    loop {
        let mut changed = false;
        for (k, &id) in free.iter().enumerate() {
            let node = &graph.nodes[id];
            let out = output(id)?;
            let mut rows = |axis: usize| {
                reads
                    .entry((id, axis))
                    .or_insert_with(|| plain_reads(graph, node, axis, opset))
                    .clone()
            };
            match known.get(&out).copied() {
                Some(_) if placed_inputs[k] => {}
                Some(placed) => {
                    placed_inputs[k] = true;
                    let places = places_by(graph, node, placed, &mut rows)?;
                    for (v, p) in node.inputs.iter().zip(places) {
                        if let (Some(v), Some(p)) = (*v, p) {
                            changed |= set(&mut known, v, p)?;
                        }
                    }
                }
                None => {
                    let from = node.inputs.iter().enumerate().find_map(|(i, v)| {
                        let p = known.get(&(*v)?).copied()?;
                        Some((i, p))
                    });
                    if from.is_none() || from == tried_from[k] {
                        continue;
                    }
                    tried_from[k] = from;
                    if let Some(p) =
                        from.and_then(|(i, p)| output_place(graph, node, i, p, &mut rows))
                    {
                        changed |= set(&mut known, out, p)?;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    nodes
        .iter()
        .zip(rules)
        .map(|(&id, rule)| {
            let out = output(id)?;
            match known.get(&out) {
                Some(p) => Some(*p),
                None if matches!(rule, Rule::Pointwise(_)) => Some((NCHW, nchw_grid(graph, out)?)),
                None => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_axis_worked_by_hand() {
        // [1, 64, 256] holds 16 × 16 positions after 1 · 64 elements: axis 2.
        assert_eq!(token_axis(&[1, 64, 256], 256, [64, 1]), Some(2));
        // Flatten(axis = 2) of [1, 64, 16, 16]: [64, 256], axis 1.
        assert_eq!(token_axis(&[64, 256], 256, [64, 1]), Some(1));
        // onnxruntime's Gemm input [3136, 96] from NHWC [1, 56, 56, 96]: axis 0, 96 after.
        assert_eq!(token_axis(&[3136, 96], 3136, [1, 96]), Some(0));
        // [1, 256, 64] has channels after the tokens: not a token axis for 64 elements before.
        assert_eq!(token_axis(&[1, 256, 64], 256, [64, 1]), None);
        // A single position is no axis to cut.
        assert_eq!(token_axis(&[4, 1], 1, [4, 1]), None);
    }

    #[test]
    fn grid_axes_worked_by_hand() {
        // The Gemm's output [3136, 384] back to [1, 56, 56, 384]: axes 1 and 2.
        assert_eq!(grid_axes(&[1, 56, 56, 384], [56, 56], [1, 384]), Some(1));
        // [1, 64, 16, 16] from [1, 64, 256]: axes 2 and 3.
        assert_eq!(grid_axes(&[1, 64, 16, 16], [16, 16], [64, 1]), Some(2));
        assert_eq!(grid_axes(&[1, 64, 16, 16], [16, 16], [1, 64]), None);
    }
}

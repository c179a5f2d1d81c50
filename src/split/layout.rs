//! Where a chain tensor keeps its H × W positions. Convolution-like operators work on NCHW
//! tensors (H and W on axes 2 and 3). A vision transformer's layers work on token-major
//! tensors, one axis of which holds the positions row by row (token `h·W + w`), turned into
//! NCHW and back by Reshapes: SegFormer's Mix-FFN runs a Linear, a depthwise Conv over the
//! tokens laid out as an image, and a Linear. A chain may hold both kinds: a tile that is a
//! band of whole rows is a contiguous range of tokens, so token-major nodes take a band's
//! tokens (with the halo rows a later Conv reads) as row blocks do.
//!
//! The layouts are resolved over a chain from its NCHW operators, through the Reshapes between
//! a token axis and H × W and the row table ([`super::rows::rules`]) of the token-major
//! operators, forwards and backwards until nothing changes.

use std::collections::HashMap;

use super::rows::rules::{RowRead, row_rule};
use super::rules::{Inputs, Rule, shape_of};
use crate::ir::{Graph, Node, NodeId, ValueId};

/// Where a tensor keeps its positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Rank 4: H on axis 2, W on axis 3.
    Nchw,
    /// One axis (this one) holds the positions row by row, token `h·W + w`.
    Tokens(usize),
}

impl Layout {
    /// The axes a Concat assembling parts along H (rows of tiles) and along W (columns)
    /// joins on; a token axis joins bands of whole rows only.
    pub fn concat_axes(self) -> [i64; 2] {
        match self {
            Layout::Nchw => [2, 3],
            Layout::Tokens(a) => [a as i64, a as i64],
        }
    }
}

/// A tensor's layout and its H × W.
pub type Placed = (Layout, [i64; 2]);

/// The axis `a` of `shape` that holds `n` positions with `before` elements before it and
/// none after it; `None` when there is none or `n < 2`.
fn token_axis(shape: &[i64], n: i64, before: i64) -> Option<usize> {
    if n < 2 {
        return None;
    }
    (0..shape.len()).find(|&a| {
        shape[a] == n
            && shape[..a].iter().product::<i64>() == before
            && shape[a + 1..].iter().product::<i64>() == 1
    })
}

/// For a Reshape from a token-major tensor to NCHW (`[B, C, H·W]` → `[B, C, H, W]`), the
/// input's token axis.
pub fn fold_axis(graph: &Graph, node: &Node) -> Option<usize> {
    if node.op_type != "Reshape" || !node.domain.is_empty() {
        return None;
    }
    let out = shape_of(graph, node.outputs.first().copied().flatten()?)?;
    let input = shape_of(graph, node.inputs.first().copied().flatten()?)?;
    let [b, c, h, w] = out.as_slice().try_into().ok()?;
    token_axis(&input, h * w, b * c)
}

/// For a Reshape or Flatten from NCHW to a token-major tensor (`[B, C, H, W]` →
/// `[B, C, H·W]`), the output's token axis.
pub fn unfold_axis(graph: &Graph, node: &Node) -> Option<usize> {
    if !matches!(node.op_type.as_str(), "Reshape" | "Flatten") || !node.domain.is_empty() {
        return None;
    }
    let out = shape_of(graph, node.outputs.first().copied().flatten()?)?;
    let input = shape_of(graph, node.inputs.first().copied().flatten()?)?;
    let [b, c, h, w] = input.as_slice().try_into().ok()?;
    token_axis(&out, h * w, b * c)
}

/// H and W of an NCHW value.
fn nchw_grid(graph: &Graph, v: ValueId) -> Option<[i64; 2]> {
    let s = shape_of(graph, v)?;
    (s.len() == 4).then(|| [s[2], s[3]])
}

/// The layout each node of a chain (`nodes`, with their `rules`) makes its output in, with its
/// H × W; `None` when a tensor would need two layouts or a token-major node's layout cannot be
/// found. Elementwise nodes of rank 4 that no layout reaches are NCHW. `opset` is the default
/// domain's version.
pub fn resolve(graph: &Graph, nodes: &[NodeId], rules: &[Rule], opset: i64) -> Option<Vec<Placed>> {
    let mut known: HashMap<ValueId, Placed> = HashMap::new();
    // Records a layout: `Some(true)` when it is new, `None` when it contradicts one known.
    let set = |known: &mut HashMap<ValueId, Placed>, v: ValueId, p: Placed| match known.get(&v) {
        Some(old) if *old == p => Some(false),
        Some(_) => None,
        None => {
            known.insert(v, p);
            Some(true)
        }
    };
    let output = |id: NodeId| graph.nodes[id].outputs.first().copied().flatten();
    // What fixes a layout: the NCHW operators and the Reshapes between tokens and H × W.
    for (&id, rule) in nodes.iter().zip(rules) {
        let node = &graph.nodes[id];
        let (out, first) = (output(id)?, node.inputs.first().copied().flatten()?);
        let spatial: &[Option<ValueId>] = match rule {
            Rule::Window(_) | Rule::Upsample(_) | Rule::Pointwise(Inputs::First) => {
                &node.inputs[..1]
            }
            Rule::Pointwise(Inputs::All) if node.op_type == "Concat" => &node.inputs,
            Rule::Pointwise(Inputs::All) => continue,
            Rule::Rows => {
                if let Some(a) = fold_axis(graph, node) {
                    let grid = nchw_grid(graph, out)?;
                    set(&mut known, out, (Layout::Nchw, grid))?;
                    set(&mut known, first, (Layout::Tokens(a), grid))?;
                } else if let Some(a) = unfold_axis(graph, node) {
                    let grid = nchw_grid(graph, first)?;
                    set(&mut known, first, (Layout::Nchw, grid))?;
                    set(&mut known, out, (Layout::Tokens(a), grid))?;
                }
                continue;
            }
        };
        set(&mut known, out, (Layout::Nchw, nchw_grid(graph, out)?))?;
        for &v in spatial.iter().flatten() {
            set(&mut known, v, (Layout::Nchw, nchw_grid(graph, v)?))?;
        }
    }
    // Through the elementwise and token-major nodes, both ways, until nothing changes.
    let free: Vec<NodeId> = nodes
        .iter()
        .zip(rules)
        .filter(|&(&id, rule)| match rule {
            Rule::Pointwise(Inputs::All) => graph.nodes[id].op_type != "Concat",
            Rule::Rows => {
                fold_axis(graph, &graph.nodes[id]).is_none()
                    && unfold_axis(graph, &graph.nodes[id]).is_none()
            }
            _ => false,
        })
        .map(|(&id, _)| id)
        .collect();
    loop {
        let mut changed = false;
        for &id in &free {
            let node = &graph.nodes[id];
            let out = output(id)?;
            let out_shape = shape_of(graph, out)?;
            match known.get(&out).copied() {
                Some((Layout::Tokens(a), grid)) => {
                    let rule = row_rule(graph, node, a, opset)?;
                    for (read, v) in rule.reads.iter().zip(&node.inputs) {
                        if let (RowRead::Rows(b), Some(v)) = (*read, *v) {
                            if shape_of(graph, v)?.get(b) != Some(&(grid[0] * grid[1])) {
                                return None;
                            }
                            changed |= set(&mut known, v, (Layout::Tokens(b), grid))?;
                        }
                    }
                }
                Some((Layout::Nchw, grid)) => {
                    if matches!(rules[nodes.iter().position(|&n| n == id)?], Rule::Rows) {
                        return None;
                    }
                    for &v in node.inputs.iter().flatten() {
                        if nchw_grid(graph, v) == Some(grid) {
                            changed |= set(&mut known, v, (Layout::Nchw, grid))?;
                        }
                    }
                }
                None => {
                    let from = node.inputs.iter().enumerate().find_map(|(i, v)| {
                        let p = known.get(&(*v)?).copied()?;
                        Some((i, p))
                    });
                    let placed = match from {
                        Some((i, (Layout::Tokens(b), grid))) => (0..out_shape.len())
                            .find(|&a| {
                                out_shape[a] == grid[0] * grid[1]
                                    && row_rule(graph, node, a, opset)
                                        .is_some_and(|r| r.reads.get(i) == Some(&RowRead::Rows(b)))
                            })
                            .map(|a| (Layout::Tokens(a), grid)),
                        Some((_, (Layout::Nchw, grid))) => (out_shape.len() == 4
                            && out_shape[2..] == grid)
                            .then_some((Layout::Nchw, grid)),
                        None => None,
                    };
                    if let Some(p) = placed {
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
                None if matches!(rule, Rule::Pointwise(_)) => {
                    Some((Layout::Nchw, nchw_grid(graph, out)?))
                }
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
        assert_eq!(token_axis(&[1, 64, 256], 256, 64), Some(2));
        // Flatten(axis = 2) of [1, 64, 16, 16]: [64, 256], axis 1.
        assert_eq!(token_axis(&[64, 256], 256, 64), Some(1));
        // [1, 256, 64] has channels after the tokens: not a token axis for 64 elements before.
        assert_eq!(token_axis(&[1, 256, 64], 256, 64), None);
        // A single position is no axis to cut.
        assert_eq!(token_axis(&[4, 1], 1, 4), None);
    }
}

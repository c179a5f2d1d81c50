//! Choosing which Concat/Split/Slice nodes form slice aliases. In-place and full aliases never
//! raise the peak of live bytes, but a slice alias can: it keeps the whole Concat output alive
//! from its earliest input on (DenseNet's growing concatenations), or a whole Split (or Slice)
//! input alive until its last part dies. So each slice site is kept only where it does not raise the bound.


use anyhow::Result;

use super::groups::{Analyser, Liveness, LivenessOptions, Sharing};
use super::rules::ReuseRule;
use crate::ir::{Graph, NodeId};

/// Work budget: analyses × tensors stays under this, so huge graphs try fewer sites.
const WORK_BUDGET: usize = 4_000_000;

/// [`Flips::NearPeak`] works within this fraction (1/n) of [`WORK_BUDGET`].
const TRIAL_SHARE: usize = 4;

/// Which slice-alias sites [`analyse_best`] flips one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flips {
    /// None: a quick estimate (two analyses), to rank orders by.
    None,
    /// Every site, while the work budget lasts; where the bound alone ranks groupings (not
    /// `blockwise`), after a first pass as [`Flips::NearPeak`]'s, and before a last pass over
    /// the sites near the peak that tells equal bounds apart by the crowding.
    All,
    /// A split trial's, which only ranks a rewrite: where the bound alone ranks groupings
    /// (not `blockwise`), only the sites whose tensors, or the buffers holding them, live at a
    /// step within 1% of the peak of live bytes (a flip elsewhere cannot lower that peak
    /// unless it moves groupings far downstream); under `blockwise` every site, as there a
    /// flip away from the peak may still thin it. Either way within a quarter of the work
    /// budget.
    NearPeak,
}

/// One pass of [`analyse_best`] over the sites, in execution order, each tried at most once.
struct Pass {
    /// Only the sites living at a step near the peak (see [`NearPeak`]).
    near_peak_only: bool,
    /// The analyses tried, over all passes, by this pass's end.
    until: usize,
    /// Whether equal bounds are told apart by the [`crowding`]: a site in one of several
    /// repeated blocks (or layers) lowers its own peak while another's holds the bound, and
    /// one away from the peak still frees bytes for longer; the repeats' flips then lower the
    /// bound together. A flip is kept only if the bound does not rise, so such a pass never
    /// ends above the bound it began with.
    crowded: bool,
    /// Whether the sites the passes before tried may be tried again.
    fresh: bool,
}

/// Live bytes within this fraction (1/n) of the peak count as reaching it in
/// [`Flips::NearPeak`].
const NEAR_PEAK: u64 = 100;

/// The analysis with the set of slice-alias sites chosen greedily to minimise `bound`: start
/// from the better of "all sites" and "no site", then flip the sites `flips` names (in
/// execution order, each at most once per [`Pass`]) while the work budget lasts, keeping a
/// flip when the bound strictly drops, or in a crowded pass when it stays and the crowding
/// drops.
pub fn analyse_best(
    graph: &Graph,
    order: &[NodeId],
    options: LivenessOptions,
    bound: &dyn Fn(&Liveness) -> u64,
    flips: Flips,
) -> Result<Liveness> {
    let analyser = Analyser::new(graph, order.to_vec(), options)?;
    let all = analyser.run(&|_| true);
    let all_bound = bound(&all);
    // Sites where a slice alias formed and the bytes involved (the largest tensor at the node:
    // the Concat output, the Split or Slice input) could move the bound by 1% or more.
    let sites: Vec<NodeId> = order
        .iter()
        .copied()
        .filter(|&n| {
            let tensors = || node_tensors(graph, &analyser, n);
            let formed = tensors().any(|t| {
                all.part_of[t].is_some()
                    || matches!(
                        all.sharing[t],
                        Some(Sharing::Alias {
                            offset: Some(_),
                            ..
                        })
                    )
            });
            let largest = tensors()
                .map(|t| all.tensors[t].bytes.unwrap_or(0))
                .max()
                .unwrap_or(0);
            matches!(
                analyser.rule(n),
                ReuseRule::ConcatSlices | ReuseRule::SplitSlices | ReuseRule::SliceView
            ) && formed
                && largest.saturating_mul(100) >= all_bound
        })
        .collect();
    if sites.is_empty() {
        return Ok(all);
    }
    // The sites enabled, by node.
    let run = |enabled: &[bool]| -> (Liveness, u64) {
        let l = analyser.run(&|n| enabled[n]);
        let b = bound(&l);
        (l, b)
    };
    let no_site = vec![false; graph.nodes.len()];
    let (none, none_bound) = run(&no_site);
    let (mut enabled, mut best, mut best_bound): (Vec<bool>, Liveness, u64) =
        if none_bound < all_bound {
            (no_site, none, none_bound)
        } else {
            let mut every = no_site;
            for &site in &sites {
                every[site] = true;
            }
            (every, all, all_bound)
        };
    let tries = |share: usize| (WORK_BUDGET / share / graph.values.len().max(1)).max(8);
    let pass = |near_peak_only, until, crowded, fresh| Pass {
        near_peak_only,
        until,
        crowded,
        fresh,
    };
    // Where the bound alone ranks (not `blockwise`) an output's flips begin with a trial's
    // pass, so its bound is never above the trial's that ranked its rewrite: in execution
    // order, the whole budget could go to sites far from the peak. A last pass then tells
    // equal bounds apart by the crowding, which never raises the bound (see [`Pass`]).
    let passes: &[Pass] = match (flips, options.blockwise) {
        (Flips::None, _) => &[],
        (Flips::NearPeak, blockwise) => &[pass(!blockwise, tries(TRIAL_SHARE), blockwise, true)],
        (Flips::All, false) => &[
            pass(true, tries(TRIAL_SHARE), false, true),
            pass(false, tries(1), false, false),
            pass(true, tries(1) + tries(TRIAL_SHARE), true, true),
        ],
        (Flips::All, true) => &[pass(false, tries(1), true, true)],
    };
    let mut tried = 0;
    let mut done = vec![false; graph.nodes.len()];
    for p in passes {
        let key = |l: &Liveness, b: u64| match p.crowded {
            true => (b, crowding(l)),
            false => (b, (0, 0, 0)),
        };
        let mut best_key = key(&best, best_bound);
        if p.fresh {
            done.fill(false);
        }
        let mut near = p.near_peak_only.then(|| NearPeak::of(&best));
        for &site in &sites {
            if tried >= p.until {
                break;
            }
            if done[site]
                || near.as_ref().is_some_and(|near| {
                    !node_tensors(graph, &analyser, site).any(|t| near.reached_by(&best, t))
                })
            {
                continue;
            }
            (tried, done[site]) = (tried + 1, true);
            let mut flipped = enabled.clone();
            flipped[site] = !flipped[site];
            let (l, b) = run(&flipped);
            let k = key(&l, b);
            if k < best_key {
                (enabled, best, best_bound, best_key) = (flipped, l, b, k);
                if let Some(near) = near.as_mut() {
                    *near = NearPeak::of(&best);
                }
            }
        }
    }
    Ok(best)
}

/// The tensors (indices into [`Liveness::tensors`]) node `n` reads and writes.
fn node_tensors<'a>(
    graph: &'a Graph,
    analyser: &'a Analyser,
    n: NodeId,
) -> impl Iterator<Item = usize> + 'a {
    let node = &graph.nodes[n];
    node.inputs
        .iter()
        .chain(&node.outputs)
        .flatten()
        .filter_map(|&v| analyser.tensor(v))
}

/// The steps of an analysis whose live bytes are within [`NEAR_PEAK`] of its peak, counted
/// up to each step (so whether a span of steps reaches one is two lookups).
struct NearPeak(Vec<usize>);

impl NearPeak {
    /// The near-peak steps of `l`.
    fn of(l: &Liveness) -> NearPeak {
        let load = live_per_step(l);
        let peak = load.iter().copied().max().unwrap_or(0);
        let near = peak - peak / NEAR_PEAK as i128;
        let mut counted = Vec::with_capacity(load.len() + 1);
        counted.push(0);
        for &b in &load {
            let last = counted[counted.len() - 1];
            counted.push(last + usize::from(b >= near));
        }
        NearPeak(counted)
    }

    /// Whether tensor `t`, or the buffer holding it in `l`, lives at a near-peak step.
    fn reached_by(&self, l: &Liveness, t: usize) -> bool {
        let life = &l.tensors[t];
        let buffer = l.buffer_of[t].map(|b| &l.buffers[b]);
        let first = buffer.map_or(life.first, |b| b.first.min(life.first));
        let last = buffer.map_or(life.last, |b| b.last.max(life.last));
        let end = (last + 1).min(self.0.len() - 1);
        first < end && self.0[end] > self.0[first]
    }
}

/// The bytes the buffers of `l` hold at each step (their exact sizes).
fn live_per_step(l: &Liveness) -> Vec<i128> {
    let steps = l.order.len();
    let mut delta = vec![0i128; steps + 1];
    for b in &l.buffers {
        delta[b.first.min(steps)] += i128::from(b.bytes);
        delta[(b.last + 1).min(steps)] -= i128::from(b.bytes);
    }
    let mut live = 0i128;
    delta[..steps]
        .iter()
        .map(|d| {
            live += d;
            live
        })
        .collect()
}

/// The most bytes the buffers hold at one step (their exact sizes), how many steps hold that
/// many, and the bytes held summed over the steps.
fn crowding(l: &Liveness) -> (u64, usize, u128) {
    let (mut peak, mut count, mut area) = (0i128, 0usize, 0u128);
    for live in live_per_step(l) {
        area += u128::try_from(live).unwrap_or(0);
        if live > peak {
            (peak, count) = (live, 1);
        } else if live == peak {
            count += 1;
        }
    }
    (u64::try_from(peak).unwrap_or(0), count, area)
}

#[cfg(test)]
mod tests {
    use super::super::groups::analyse_with;
    use super::*;
    use crate::ir::{DType, ValueType, known_shape};
    use crate::onnx::proto::{GraphProto, NodeProto, ValueInfoProto};

    fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute: if op == "Concat" {
                vec![crate::onnx::proto::AttributeProto {
                    name: Some("axis".into()),
                    i: Some(1),
                    r#type: Some(2),
                    ..Default::default()
                }]
            } else {
                Vec::new()
            },
            ..Default::default()
        }
    }

    /// Max over steps of the live buffers' bytes (alignment 1).
    fn peak(l: &Liveness) -> u64 {
        let steps = l.order.len();
        (0..steps)
            .map(|s| {
                l.buffers
                    .iter()
                    .filter(|b| b.first <= s && s <= b.last)
                    .map(|b| b.bytes)
                    .sum()
            })
            .max()
            .unwrap_or(0)
    }

    /// The peaks of `g` (stored order, alignment 1) with no slice-alias site, with every
    /// site, as a trial's flips ([`Flips::NearPeak`]) and an output's ([`Flips::All`]) leave
    /// them; and the output's analysis.
    fn peaks_of(g: &Graph) -> ([u64; 4], Liveness) {
        let order: Vec<NodeId> = (0..g.nodes.len()).collect();
        let options = LivenessOptions {
            alignment: 1,
            ..LivenessOptions::default()
        };
        let sites = |all: bool| analyse_with(g, order.clone(), options, &move |_| all).unwrap();
        let flipped = |flips| analyse_best(g, &order, options, &peak, flips).unwrap();
        let best = flipped(Flips::All);
        let peaks = [
            peak(&sites(false)),
            peak(&sites(true)),
            peak(&flipped(Flips::NearPeak)),
            peak(&best),
        ];
        (peaks, best)
    }

    /// a = Relu(x) [1×16] is made at step 0 but concatenated only at step 4, after the big
    /// t = Exp(x) [1×256] lived at steps 1–3. Worked by hand (float32): with the slice alias
    /// the Concat output (128 B) is live from step 0, so step 1 holds x 1024 + y 128 + t 1024
    /// = 2176 B; without it, x 1024 + a 64 + t 1024 = 2112 B. The chooser must drop the alias.
    #[test]
    fn drops_a_concat_alias_that_raises_the_peak() {
        let g = float_rows(block_f().to_vec(), &["y"], |n| width_in_f(n).unwrap_or(16));
        // The Concat output lives at the peak step (1): a trial's flips try it too.
        let (peaks, best) = peaks_of(&g);
        assert_eq!(peaks, [2112, 2176, 2112, 2112]);
        assert!(
            best.sharing
                .iter()
                .all(|s| !matches!(s, Some(super::super::Sharing::Alias { .. })))
        );
    }

    /// The block F of [`drops_a_concat_alias_that_raises_the_peak`]: a = Relu(x), t = Exp(x),
    /// u = Sigmoid(t), z = Relu(u), y = Concat(a, z).
    fn block_f() -> [NodeProto; 5] {
        [
            node("Relu", &["x"], &["a"]),
            node("Exp", &["x"], &["t"]),
            node("Sigmoid", &["t"], &["u"]),
            node("Relu", &["u"], &["z"]),
            node("Concat", &["a", "z"], &["y"]),
        ]
    }

    /// The widths of F's values ([1 × width] floats): x, t and u 256, y 32, a and z 16.
    fn width_in_f(name: &str) -> Option<i64> {
        match name {
            "x" | "t" | "u" => Some(256),
            "y" => Some(32),
            "a" | "z" => Some(16),
            _ => None,
        }
    }

    /// The graph of `nodes` reading x and writing `outputs`, every value typed by hand as a
    /// float [1 × `width` of its name].
    fn float_rows(nodes: Vec<NodeProto>, outputs: &[&str], width: impl Fn(&str) -> i64) -> Graph {
        let info = |n: &str| ValueInfoProto {
            name: Some(n.into()),
            ..Default::default()
        };
        let mut g = Graph::from_proto(&GraphProto {
            node: nodes,
            input: vec![info("x")],
            output: outputs.iter().map(|&n| info(n)).collect(),
            ..Default::default()
        })
        .unwrap();
        for v in &mut g.values {
            let shape = known_shape(&[1, width(&v.name)]);
            v.ty = Some(ValueType::tensor(DType::Float, shape));
        }
        g
    }

    /// The graph of [`drops_a_concat_alias_that_raises_the_peak`] after `fillers` small blocks
    /// (p → Relu → a_i [1×4], p → Sigmoid → b_i [1×4], Concat → c_i [1×8], the next p), and
    /// before a block G whose alias must stay: y → Relu → g_a [1×200], y → Sigmoid → g_b
    /// [1×200], Concat → g [1×400], a graph output.
    fn behind_fillers(fillers: usize) -> Graph {
        let mut nodes = Vec::new();
        let mut p = "x".to_string();
        for i in 0..fillers {
            let (a, b, c) = (format!("a{i}"), format!("b{i}"), format!("c{i}"));
            nodes.push(node("Relu", &[&p], &[&a]));
            nodes.push(node("Sigmoid", &[&p], &[&b]));
            nodes.push(node("Concat", &[&a, &b], &[&c]));
            p = c;
        }
        nodes.extend(block_f());
        nodes.extend([
            node("Relu", &["y"], &["g_a"]),
            node("Sigmoid", &["y"], &["g_b"]),
            node("Concat", &["g_a", "g_b"], &["g"]),
        ]);
        float_rows(nodes, &["y", "g"], |n| {
            width_in_f(n).unwrap_or(match n {
                "g_a" | "g_b" => 200,
                "g" => 400,
                n if n.starts_with('c') => 8,
                _ => 4,
            })
        })
    }

    /// An output's flips begin where a trial's do, so its bound is never above the trial's.
    /// Worked by hand (float32, alignment 1): the blocks before F stay under 1,024 B of x and
    /// 64 B of theirs; G holds y 128 + g 1,600 = 1,728 B with its alias, and without it g_a
    /// 800 + g_b 800 + g 1,600 + y 128 = 3,328 B, so every site's alias (bound 2,176 at F, as
    /// in the test above) beats none (3,328). Dropping F's alias gives 2,112. 1,500 fillers
    /// make 4,509 values: the budget allows 4,000,000 / 4,509 = 887 analyses, all spent on
    /// the fillers' sites (in execution order, none lowering the bound) before F's.
    #[test]
    fn an_output_flips_the_sites_at_the_peak_before_the_rest() {
        let g = behind_fillers(1500);
        assert_eq!(g.values.len(), 4509);
        assert_eq!(peaks_of(&g).0, [3328, 2176, 2112, 2112]);
    }

    /// Block F of [`drops_a_concat_alias_that_raises_the_peak`], then two equal layers: for
    /// i in 1, 2, a_i = Relu(q_i), b_i = Sigmoid(q_i) [1×134], c_i = Concat(a_i, b_i)
    /// [1×268], s_i = ReduceMean(c_i) [1×32], reading q_1 = y and q_2 = s_1; s_2 is the
    /// output. Worked by hand (float32, alignment 1): without its alias a layer's Concat step
    /// holds a_i 536 + b_i 536 + c_i 1,072 = 2,144 B; with it, a_i and b_i lie inside c_i, so
    /// the layer never holds more than q_i 128 + c_i 1,072 = 1,200 B. No site: the bound is
    /// 2,144 (both layers); every site: 2,176 (F's alias, as above). So the flips start from
    /// no site, and by the bound alone keep no layer's alias: each leaves the other layer's
    /// 2,144. Told apart by the crowding, the first leaves one step at 2,144 instead of two,
    /// and the second lowers the bound to F's 2,112.
    #[test]
    fn equal_layers_keep_their_aliases_together() {
        let mut nodes = block_f().to_vec();
        for (i, q) in [(1, "y"), (2, "s1")] {
            let [a, b, c, s] = ["a", "b", "c", "s"].map(|v| format!("{v}{i}"));
            nodes.extend([
                node("Relu", &[q], &[&a]),
                node("Sigmoid", &[q], &[&b]),
                node("Concat", &[&a, &b], &[&c]),
                node("ReduceMean", &[&c], &[&s]),
            ]);
        }
        let g = float_rows(nodes, &["s2"], |n| {
            width_in_f(n).unwrap_or(match n {
                "a1" | "b1" | "a2" | "b2" => 134,
                "c1" | "c2" => 268,
                _ => 32,
            })
        });
        assert_eq!(peaks_of(&g).0, [2144, 2176, 2144, 2112]);
    }
}

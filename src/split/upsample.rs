//! The split rule of upsampling operators (Resize by whole factors, ConvTranspose): a tile runs
//! the operator on the input rows and columns its part of the output needs, which makes an
//! aligned region of the output at least as large as the part, and keeps the part (a crop).
//!
//! Both operators are translation-equivariant on whole input steps: the output of the input
//! slice `[i0, i1)` is, element for element, rows `[i0·s, …)` of the whole output (shifted by
//! the begin padding for ConvTranspose), except near the slice's edges where the whole output
//! would read rows the slice lacks. The need below holds every row an element of the part
//! reads, so the part is exact; at the tensor's own edges the slice's edges are the tensor's,
//! so the operator's clamping (Resize) or missing contributions (ConvTranspose) are the same.

use super::region::{Region, Span};
use super::rules::shape_of;
use crate::ir::{Graph, Node};

/// An upsampling on the two split axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upsample {
    /// The mapping along H and along W.
    pub axes: [Stretch; 2],
    /// Resize or ConvTranspose.
    pub kind: UpsampleKind,
}

/// Which operator, for the rewrite of the tile copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpsampleKind {
    /// Resize: a tile copy with a `sizes` input gets the sizes of its slice.
    Resize,
    /// ConvTranspose: tile copies run without padding (the crop removes it).
    ConvTranspose,
}

/// How one axis of the output reads one axis of input 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stretch {
    /// The input's length on this axis.
    pub input: i64,
    /// The whole upscale factor (Resize) or stride (ConvTranspose).
    pub factor: i64,
    /// How output positions map to input positions.
    pub map: Map,
}

/// The coordinate mapping of one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Map {
    /// Resize: output `o` samples input coordinate `x(o)` (see [`Transform`]) with `sampling`.
    Resize(Transform, Sampling),
    /// ConvTranspose: output `o` receives input `i` through kernel tap `k` when
    /// `o + pad = i·stride + k·dilation`; `extent` is `(kernel − 1)·dilation + 1`.
    Transposed {
        /// Padding before the first output row.
        pad: i64,
        /// Rows one input row spreads over.
        extent: i64,
    },
}

/// Resize's `coordinate_transformation_mode`s that commute with whole-row shifts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform {
    /// `x = o / s` (`asymmetric`, and every opset-10 Resize).
    Asymmetric,
    /// `x = (o + ½) / s − ½` (`half_pixel`; `pytorch_half_pixel` and `half_pixel_symmetric`
    /// are the same when the output is `s` times the input and longer than one row).
    HalfPixel,
}

/// How Resize turns a coordinate into the input rows it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// `linear`: rows `floor(x)` and `floor(x) + 1` (clamped to the input).
    Linear,
    /// `nearest` with a known rounding.
    Nearest(Rounding),
    /// `nearest` of opset 10, whose rounding the operator leaves open: any of
    /// `floor(x)` and `floor(x) + 1`, as for linear.
    NearestAny,
}

/// Resize's `nearest_mode`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// `round_prefer_floor`.
    PreferFloor,
    /// `round_prefer_ceil`.
    PreferCeil,
    /// `floor`.
    Floor,
    /// `ceil`.
    Ceil,
}

impl Stretch {
    /// The input rows a copy making `out` (rows of the output) reads, clipped to the input:
    /// every row an element of `out` reads, and enough for the copy to make all of `out`.
    pub fn need(&self, out: Span) -> Span {
        let s = self.factor;
        let (lo, hi) = match self.map {
            Map::Resize(transform, sampling) => {
                // x(o) = num(o) / (2s), exactly.
                let num = |o: i64| match transform {
                    Transform::Asymmetric => 2 * o,
                    Transform::HalfPixel => 2 * o + 1 - s,
                };
                let den = 2 * s;
                let row = |o: i64, last: bool| match sampling {
                    Sampling::Linear | Sampling::NearestAny => {
                        num(o).div_euclid(den) + i64::from(last)
                    }
                    Sampling::Nearest(r) => round(num(o), den, r),
                };
                // The copy must also make every row of `out`: rows [i0·s, i1·s) need
                // i0 ≤ start div s and i1 ≥ ceil(end / s) (a rounding mode may read a
                // row past them).
                (
                    row(out.start, false).min(out.start.div_euclid(s)),
                    row(out.end - 1, true).max(div_ceil(out.end, s) - 1),
                )
            }
            Map::Transposed { pad, extent } => (
                div_ceil(out.start + pad - (extent - 1), s),
                (out.end - 1 + pad).div_euclid(s),
            ),
        };
        let last = self.input - 1;
        Span::new(lo.clamp(0, last), hi.clamp(0, last) + 1)
    }

    /// The output rows a tile copy reading input rows `read` makes, in the whole output's
    /// coordinates (it may start before row 0: a ConvTranspose copy runs without padding).
    pub fn produced(&self, read: Span) -> Span {
        let s = self.factor;
        match self.map {
            Map::Resize(..) => Span::new(read.start * s, read.end * s),
            Map::Transposed { pad, extent } => {
                Span::new(read.start * s - pad, (read.end - 1) * s + extent - pad)
            }
        }
    }
}

impl Upsample {
    /// The input region `out` reads.
    pub fn need(&self, out: Region) -> Region {
        [self.axes[0].need(out[0]), self.axes[1].need(out[1])]
    }

    /// The output region a copy reading `read` makes.
    pub fn produced(&self, read: Region) -> Region {
        [
            self.axes[0].produced(read[0]),
            self.axes[1].produced(read[1]),
        ]
    }
}

/// `ceil(a / b)` for `b > 0`.
fn div_ceil(a: i64, b: i64) -> i64 {
    -(-a).div_euclid(b)
}

/// The nearest row of coordinate `num / den` (`den > 0`) under `rounding`.
fn round(num: i64, den: i64, rounding: Rounding) -> i64 {
    let floor = num.div_euclid(den);
    let rest = num.rem_euclid(den);
    match rounding {
        Rounding::Floor => floor,
        Rounding::Ceil => floor + i64::from(rest > 0),
        Rounding::PreferFloor => floor + i64::from(2 * rest > den),
        Rounding::PreferCeil => floor + i64::from(2 * rest >= den),
    }
}

/// The rule of a Resize node, or `None` for the forms a tile cannot reproduce exactly: any
/// factor but a whole one on H and W (N and C kept), `cubic`, `align_corners`,
/// `tf_crop_and_resize`, `tf_half_pixel_for_nn`, `antialias`, a `keep_aspect_ratio_policy`
/// other than `stretch` with `sizes`, and scales that are not known constants equal to the
/// factors.
pub fn resize(graph: &Graph, node: &Node) -> Option<Upsample> {
    let input = shape_of(graph, node.inputs.first().copied().flatten()?)?;
    let output = shape_of(graph, node.outputs[0]?)?;
    if input.len() != 4 || output.len() != 4 || input[..2] != output[..2] {
        return None;
    }
    let mut factors = [0; 2];
    for a in 0..2 {
        let (i, o) = (input[2 + a], output[2 + a]);
        if i < 1 || o % i != 0 {
            return None;
        }
        factors[a] = o / i;
    }
    // Opset 10's form is (X, scales); from opset 11 on it is (X, roi, scales, sizes).
    let opset10 = node.inputs.len() == 2;
    let present = |i: usize| node.inputs.get(i).copied().flatten();
    let scales = present(if opset10 { 1 } else { 2 });
    let sizes = if opset10 { None } else { present(3) };
    let axes: Vec<i64> = node.attr_ints("axes").map_or(vec![0, 1, 2, 3], |a| {
        a.iter().map(|&x| if x < 0 { x + 4 } else { x }).collect()
    });
    if let Some(v) = scales {
        let values = graph.values[v].constant.as_ref()?.to_f64_vec()?;
        if !values.is_empty() {
            if values.len() != axes.len() {
                return None;
            }
            for (&axis, &scale) in axes.iter().zip(&values) {
                let want = match axis {
                    0 | 1 => 1,
                    2 | 3 => factors[axis as usize - 2],
                    _ => return None,
                };
                if scale as f32 != want as f32 {
                    return None;
                }
            }
        } else if sizes.is_none() {
            return None;
        }
    }
    if sizes.is_some()
        && !matches!(
            node.attr_string("keep_aspect_ratio_policy").as_deref(),
            None | Some("stretch")
        )
    {
        return None;
    }
    if node.attr_int("antialias").unwrap_or(0) != 0 {
        return None;
    }
    let transform = if opset10 {
        Transform::Asymmetric
    } else {
        match node
            .attr_string("coordinate_transformation_mode")
            .as_deref()
        {
            None | Some("half_pixel" | "pytorch_half_pixel" | "half_pixel_symmetric") => {
                Transform::HalfPixel
            }
            Some("asymmetric") => Transform::Asymmetric,
            Some(_) => return None,
        }
    };
    let sampling = match node.attr_string("mode").as_deref() {
        None | Some("nearest") if opset10 => Sampling::NearestAny,
        None | Some("nearest") => {
            Sampling::Nearest(match node.attr_string("nearest_mode").as_deref() {
                None | Some("round_prefer_floor") => Rounding::PreferFloor,
                Some("round_prefer_ceil") => Rounding::PreferCeil,
                Some("floor") => Rounding::Floor,
                Some("ceil") => Rounding::Ceil,
                Some(_) => return None,
            })
        }
        Some("linear") => Sampling::Linear,
        Some(_) => return None,
    };
    let stretch = |a: usize| Stretch {
        input: input[2 + a],
        factor: factors[a],
        map: Map::Resize(transform, sampling),
    };
    Some(Upsample {
        axes: [stretch(0), stretch(1)],
        kind: UpsampleKind::Resize,
    })
}

/// The rule of a 2-D ConvTranspose, or `None` for the forms a tile cannot reproduce exactly:
/// `output_shape`, `output_padding`, `auto_pad` SAME_*, and a stride longer than the kernel's
/// extent (output rows no input reaches).
pub fn conv_transpose(graph: &Graph, node: &Node) -> Option<Upsample> {
    let input = shape_of(graph, node.inputs.first().copied().flatten()?)?;
    let weight = shape_of(graph, node.inputs.get(1).copied().flatten()?)?;
    if input.len() != 4 || weight.len() != 4 || node.attr("output_shape").is_some() {
        return None;
    }
    if node
        .attr_ints("output_padding")
        .is_some_and(|p| p.iter().any(|&x| x != 0))
    {
        return None;
    }
    let pair = |name: &str, default: [i64; 2]| -> Option<[i64; 2]> {
        match node.attr_ints(name) {
            None => Some(default),
            Some(&[a, b]) if a >= 1 && b >= 1 => Some([a, b]),
            Some(_) => None,
        }
    };
    let kernel = pair("kernel_shape", [weight[2], weight[3]])?;
    if kernel != [weight[2], weight[3]] {
        return None;
    }
    let strides = pair("strides", [1, 1])?;
    let dilations = pair("dilations", [1, 1])?;
    let pads = match node.attr_string("auto_pad").as_deref() {
        None | Some("" | "NOTSET") => match node.attr_ints("pads") {
            None => [0, 0],
            Some(&[hb, wb, he, we]) if [hb, wb, he, we].iter().all(|&p| p >= 0) => [hb, wb],
            Some(_) => return None,
        },
        Some("VALID") => [0, 0],
        Some(_) => return None,
    };
    let stretch = |a: usize| {
        let extent = (kernel[a] - 1) * dilations[a] + 1;
        (extent >= strides[a]).then_some(Stretch {
            input: input[2 + a],
            factor: strides[a],
            map: Map::Transposed {
                pad: pads[a],
                extent,
            },
        })
    };
    Some(Upsample {
        axes: [stretch(0)?, stretch(1)?],
        kind: UpsampleKind::ConvTranspose,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize_axis(input: i64, factor: i64, transform: Transform, sampling: Sampling) -> Stretch {
        Stretch {
            input,
            factor,
            map: Map::Resize(transform, sampling),
        }
    }

    #[test]
    fn bilinear_half_pixel_need_worked_by_hand() {
        // ×2 half_pixel over 8 rows: x(o) = (o + ½)/2 − ½. Output rows [5, 9): x(5) = 2.25,
        // x(8) = 3.75, so rows 2 and 3 .. 3 and 4: input [2, 5); the copy makes [4, 10).
        let a = resize_axis(8, 2, Transform::HalfPixel, Sampling::Linear);
        assert_eq!(a.need(Span::new(5, 9)), Span::new(2, 5));
        assert_eq!(a.produced(Span::new(2, 5)), Span::new(4, 10));
        // Row 0: x = −0.25, floor −1 and 0, clamped to row 0; the last row 15: x = 7.25 reads
        // 7 and 8, clamped to 7.
        assert_eq!(a.need(Span::new(0, 1)), Span::new(0, 1));
        assert_eq!(a.need(Span::new(15, 16)), Span::new(7, 8));
    }

    #[test]
    fn nearest_need_worked_by_hand() {
        // ×2 asymmetric floor: output o reads floor(o/2); rows [3, 7) read [1, 4).
        let floor = resize_axis(
            8,
            2,
            Transform::Asymmetric,
            Sampling::Nearest(Rounding::Floor),
        );
        assert_eq!(floor.need(Span::new(3, 7)), Span::new(1, 4));
        // ×2 half_pixel round_prefer_floor: x(o) = o/2 − ¼; rows [3, 7) have x = 1.25 .. 2.75,
        // rounding to 1 .. 3.
        let round = resize_axis(
            8,
            2,
            Transform::HalfPixel,
            Sampling::Nearest(Rounding::PreferFloor),
        );
        assert_eq!(round.need(Span::new(3, 7)), Span::new(1, 4));
        // ×3 asymmetric round_prefer_ceil: rows [4, 6) have x = 4/3 (rounds to 1) and 5/3
        // (rounds to 2).
        let ceil = resize_axis(
            8,
            3,
            Transform::Asymmetric,
            Sampling::Nearest(Rounding::PreferCeil),
        );
        assert_eq!(ceil.need(Span::new(4, 6)), Span::new(1, 3));
        // ×2 asymmetric ceil: row 7 reads ceil(3.5) = 4, but a copy starting at input row 4
        // makes output rows from 8 on: the copy starts at 7 div 2 = 3. ×3 half_pixel floor:
        // rows [0, 4) read input rows 0 to floor(3.5/3 − ½) = 0, yet a one-row copy makes
        // only rows [0, 3): it reads [0, ceil(4/3)) = [0, 2).
        let ceil2 = resize_axis(
            8,
            2,
            Transform::Asymmetric,
            Sampling::Nearest(Rounding::Ceil),
        );
        assert_eq!(ceil2.need(Span::new(7, 9)), Span::new(3, 5));
        let floor3 = resize_axis(
            8,
            3,
            Transform::HalfPixel,
            Sampling::Nearest(Rounding::Floor),
        );
        assert_eq!(floor3.need(Span::new(0, 4)), Span::new(0, 2));
    }

    #[test]
    fn transposed_need_worked_by_hand() {
        // k = s = 2, no pads: output o comes from input o div 2 alone; rows [3, 6) need [1, 3).
        let t = Stretch {
            input: 8,
            factor: 2,
            map: Map::Transposed { pad: 0, extent: 2 },
        };
        assert_eq!(t.need(Span::new(3, 6)), Span::new(1, 3));
        assert_eq!(t.produced(Span::new(1, 3)), Span::new(2, 6));
        // k = 3, s = 2, pad 1: o + 1 = 2i + k, k ∈ {0,1,2}; rows [3, 5) need i from
        // ceil((3 + 1 − 2)/2) = 1 to floor((4 + 1)/2) = 2; the copy makes [1, 6).
        let overlap = Stretch {
            input: 8,
            factor: 2,
            map: Map::Transposed { pad: 1, extent: 3 },
        };
        assert_eq!(overlap.need(Span::new(3, 5)), Span::new(1, 3));
        assert_eq!(overlap.produced(Span::new(1, 3)), Span::new(1, 6));
    }
}

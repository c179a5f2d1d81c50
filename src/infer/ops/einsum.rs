//! Einsum equations: parsing (explicit and implicit output, `...` ellipsis) and output shapes.

use std::collections::BTreeMap;

use crate::infer::dims;
use crate::ir::{Dim, Shape};

/// One operand's subscripts: letters, with the ellipsis position if any.
struct Term {
    letters: Vec<char>,
    ellipsis: Option<usize>,
}

fn parse_term(text: &str) -> Result<Term, String> {
    let mut letters = Vec::new();
    let mut ellipsis = None;
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            if ellipsis.replace(letters.len()).is_some() {
                return Err(format!("term '{text}' has two ellipses"));
            }
            rest = r;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c.is_ascii_alphabetic() {
            letters.push(c);
        } else if !c.is_whitespace() {
            return Err(format!("invalid character '{c}' in einsum term '{text}'"));
        }
        rest = &rest[c.len_utf8()..];
    }
    Ok(Term { letters, ellipsis })
}

/// The output shape of `equation` applied to operands of the given shapes.
pub fn output_shape(equation: &str, shapes: &[&[Dim]]) -> Result<Shape, String> {
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation, None),
    };
    let terms: Vec<Term> = lhs.split(',').map(parse_term).collect::<Result<_, _>>()?;
    if terms.len() != shapes.len() {
        return Err(format!(
            "equation '{equation}' has {} operands, the node {}",
            terms.len(),
            shapes.len()
        ));
    }
    let mut sizes: BTreeMap<char, Dim> = BTreeMap::new();
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let mut ellipsis_shapes: Vec<&[Dim]> = Vec::new();
    for (term, shape) in terms.iter().zip(shapes) {
        let named = term.letters.len();
        let ell_len = match term.ellipsis {
            Some(_) if shape.len() >= named => shape.len() - named,
            None if shape.len() == named => 0,
            _ => {
                return Err(format!(
                    "operand of rank {} does not fit its subscripts",
                    shape.len()
                ));
            }
        };
        let at = term.ellipsis.unwrap_or(named);
        if term.ellipsis.is_some() {
            ellipsis_shapes.push(&shape[at..at + ell_len]);
        }
        for (i, &c) in term.letters.iter().enumerate() {
            let d = &shape[if i < at { i } else { i + ell_len }];
            *counts.entry(c).or_default() += 1;
            let merged = match sizes.get(&c) {
                None => d.clone(),
                Some(prev) => {
                    dims::broadcast(&[std::slice::from_ref(prev), std::slice::from_ref(d)])
                        .map_err(|_| format!("subscript '{c}' has sizes {prev} and {d}"))?
                        .remove(0)
                }
            };
            sizes.insert(c, merged);
        }
    }
    let ellipsis = dims::broadcast(&ellipsis_shapes)?;
    let out_term = match rhs {
        Some(r) => parse_term(r)?,
        None => Term {
            letters: counts
                .iter()
                .filter(|(_, n)| **n == 1)
                .map(|(c, _)| *c)
                .collect(),
            ellipsis: (!ellipsis_shapes.is_empty()).then_some(0),
        },
    };
    let mut out = Vec::new();
    for (i, c) in out_term.letters.iter().enumerate() {
        if out_term.ellipsis == Some(i) {
            out.extend(ellipsis.iter().cloned());
        }
        out.push(
            sizes
                .get(c)
                .cloned()
                .ok_or_else(|| format!("output subscript '{c}' is not an input subscript"))?,
        );
    }
    if out_term.ellipsis == Some(out_term.letters.len()) {
        out.extend(ellipsis);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::known_shape;

    fn shape(eq: &str, shapes: &[&[i64]]) -> Result<Shape, String> {
        let owned: Vec<Shape> = shapes.iter().map(|s| known_shape(s)).collect();
        let refs: Vec<&[Dim]> = owned.iter().map(|s| s.as_slice()).collect();
        output_shape(eq, &refs)
    }

    #[test]
    fn explicit_implicit_and_ellipsis() {
        assert_eq!(
            shape("ij,jk->ik", &[&[2, 3], &[3, 4]]).unwrap(),
            known_shape(&[2, 4])
        );
        assert_eq!(
            shape("ij,jk", &[&[2, 3], &[3, 4]]).unwrap(),
            known_shape(&[2, 4])
        );
        assert_eq!(
            shape("ji", &[&[2, 3]]).unwrap(),
            known_shape(&[2, 3]).into_iter().rev().collect::<Vec<_>>()
        );
        assert_eq!(
            shape("...ij,...jk->...ik", &[&[5, 2, 3], &[1, 3, 4]]).unwrap(),
            known_shape(&[5, 2, 4])
        );
        assert_eq!(
            shape("...ii->...i", &[&[3, 5, 5]]).unwrap(),
            known_shape(&[3, 5])
        );
        assert_eq!(shape("i,i", &[&[3], &[3]]).unwrap(), known_shape(&[]));
        assert_eq!(
            shape("b...,b", &[&[2, 7, 8], &[2]]).unwrap(),
            known_shape(&[7, 8])
        );
        assert!(shape("ij,jk->ik", &[&[2, 3], &[4, 5]]).is_err());
    }
}

//! String operators: `StringNormalizer`, `StringSplit`, `StringConcat`, `RegexFullMatch`,
//! `TfIdfVectorizer`. Data-dependent sizes are folded when the strings are known.

use anyhow::Result;

use super::Entry;
use super::util::{broadcast_inputs, shape_of_input};
use crate::infer::NodeCtx;
use crate::ir::{ConstData, DType, Dim};

/// This family's rows of the rule table.
pub const RULES: &[Entry] = &[
    ("", "StringNormalizer", string_normalizer),
    ("", "StringSplit", string_split),
    ("", "StringConcat", string_concat),
    ("", "RegexFullMatch", regex_full_match),
    ("", "TfIdfVectorizer", tf_idf_vectorizer),
];

fn strings<'a>(ctx: &NodeCtx<'a>, i: usize) -> Option<&'a ndarray::ArrayD<String>> {
    match &ctx.constant(i)?.data {
        ConstData::Str(a) => Some(a),
        _ => None,
    }
}

/// `[C]` or `[1, C]` with the stop words removed (`[1]`/`[1, 1]` when nothing is left).
fn string_normalizer(ctx: &mut NodeCtx) -> Result<()> {
    let Some(input) = ctx.shape(0)? else {
        ctx.set_tensor(0, DType::String, None);
        return Ok(());
    };
    let stopwords: Vec<String> = ctx
        .attr("stopwords")
        .map(|a| a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect())
        .unwrap_or_default();
    let sensitive = ctx.attr_i("is_case_sensitive", 0)? == 1;
    let kept = match strings(ctx, 0) {
        Some(values) => {
            let stop = |w: &String| {
                stopwords
                    .iter()
                    .any(|s| if sensitive { s == w } else { s.to_lowercase() == w.to_lowercase() })
            };
            Dim::Known(values.iter().filter(|w| !stop(w)).count().max(1) as i64)
        }
        None if stopwords.is_empty() => input.last().cloned().unwrap_or(Dim::Unknown),
        None => Dim::Unknown,
    };
    let mut out = input.to_vec();
    if let Some(last) = out.last_mut() {
        *last = kept;
    }
    ctx.set_shape(0, DType::String, out);
    Ok(())
}

/// `StringSplit`: substrings `[..., max pieces]` and the int64 piece counts.
fn string_split(ctx: &mut NodeCtx) -> Result<()> {
    let input = ctx.shape(0)?.map(<[Dim]>::to_vec);
    let delimiter = ctx.attr_s("delimiter").filter(|d| !d.is_empty());
    let maxsplit = ctx.attr_opt_i("maxsplit")?;
    let pieces = strings(ctx, 0).map(|values| {
        values
            .iter()
            .map(|s| {
                let n = match &delimiter {
                    Some(d) => s.split(d.as_str()).count(),
                    None => s.split_whitespace().count(),
                };
                maxsplit.map_or(n, |m| n.min(m.max(0) as usize + 1))
            })
            .max()
            .unwrap_or(0)
    });
    ctx.set_tensor(1, DType::Int64, input.clone());
    let y = input.map(|mut s| {
        s.push(pieces.map_or(Dim::Unknown, |p| Dim::Known(p as i64)));
        s
    });
    ctx.set_tensor(0, DType::String, y);
    Ok(())
}

/// Broadcast string concatenation.
fn string_concat(ctx: &mut NodeCtx) -> Result<()> {
    let shape = broadcast_inputs(ctx, [0, 1])?;
    ctx.set_tensor(0, DType::String, shape);
    Ok(())
}

/// Bool, like the input.
fn regex_full_match(ctx: &mut NodeCtx) -> Result<()> {
    shape_of_input(ctx, 0, 0, DType::Bool)
}

/// Float `[.., max(ngram_indexes) + 1]`.
fn tf_idf_vectorizer(ctx: &mut NodeCtx) -> Result<()> {
    let width = ctx
        .attr_ints("ngram_indexes")
        .and_then(|v| v.iter().max())
        .map_or(Dim::Unknown, |m| Dim::Known(m + 1));
    let out = match ctx.shape(0)? {
        Some([_]) => Some(vec![width]),
        Some([n, _]) => Some(vec![n.clone(), width]),
        Some(s) => return Err(ctx.error(format!("input rank {} is not 1 or 2", s.len()))),
        None => None,
    };
    ctx.set_tensor(0, DType::Float, out);
    Ok(())
}

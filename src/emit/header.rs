//! The C header of a plan (`plan --header`): each arena's size, the alignment and the offset of
//! the graph's inputs and outputs (or of every placed tensor), as C99 macros of `<stdint.h>`
//! types, for firmware that holds the arena in a static buffer. docs/format.md ("C header")
//! specifies it, with the identifier rule of [`identifiers`].

use std::collections::HashSet;
use std::fmt::Write;

use super::table::{Table, TensorEntry};

/// Which tensors the header lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderTensors {
    /// Graph inputs and outputs with an offset.
    Io,
    /// Every tensor with an offset.
    All,
}

/// The C header of `table` for a model whose file stem is `stem` (macros are prefixed with
/// [`c_prefix`] of it). Tensors are listed in schedule order (by the step that writes them,
/// then in the table's order).
pub fn render_header(table: &Table, stem: &str, which: HeaderTensors) -> String {
    let prefix = c_prefix(stem);
    let listed = listed_tensors(table, which);
    let names = identifiers(listed.iter().map(|t| t.name.as_str()));
    let wide = needs_64_bits(table);
    let (ty, lit) = if wide {
        ("uint64_t", "UINT64_C")
    } else {
        ("uint32_t", "UINT32_C")
    };
    let num = |v: u64| format!("{lit}({v})");
    let mut h = String::new();
    let guard = format!("{prefix}_MEMPLAN_H");
    let _ = writeln!(
        h,
        "/* Memory plan of {} made by onnx-memplan ({}); do not edit.",
        comment_text(if table.model.file.is_empty() {
            "<model>"
        } else {
            &table.model.file
        }),
        super::table::FORMAT
    );
    let _ = writeln!(
        h,
        " * Sizes and offsets are in bytes; offsets are from the start of their arena.\n * Values are {ty} constants. */"
    );
    let _ = writeln!(
        h,
        "#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n"
    );
    let _ = writeln!(
        h,
        "/* SHA-256 of the model the plan describes ({}). */",
        comment_text(if table.model.file.is_empty() {
            "<model>"
        } else {
            &table.model.file
        })
    );
    let _ = writeln!(
        h,
        "#define {prefix}_MODEL_SHA256 \"{}\"",
        table.model.sha256
    );
    if let Some(splits) = &table.splits {
        let _ = writeln!(
            h,
            "/* SHA-256 of the model given to the split pass ({}). */\n#define {prefix}_SOURCE_SHA256 \"{}\"",
            comment_text(&splits.source.file),
            splits.source.sha256
        );
    }
    let _ = writeln!(
        h,
        "/* Every offset is a multiple of it. */\n#define {prefix}_ALIGNMENT {}\n",
        num(table.options.alignment)
    );
    let _ = writeln!(h, "#define {prefix}_ARENA_COUNT {}", table.arenas.len());
    for arena in &table.arenas {
        let _ = writeln!(
            h,
            "#define {prefix}_ARENA{}_SIZE {} /* \"{}\" */",
            arena.id,
            num(arena.bytes),
            comment_text(&arena.name)
        );
    }
    let sizes: Vec<String> = table.arenas.iter().map(|a| num(a.bytes)).collect();
    let _ = writeln!(
        h,
        "/* Initialiser of a {ty}[{prefix}_ARENA_COUNT] of the sizes, by arena id. */\n#define {prefix}_ARENA_SIZES {{ {} }}\n",
        sizes.join(", ")
    );
    let _ = writeln!(
        h,
        "/* {} tensor(s): {}, in schedule order. */\n#define {prefix}_TENSOR_COUNT {}\n",
        listed.len(),
        match which {
            HeaderTensors::Io => "the graph inputs and outputs placed in an arena",
            HeaderTensors::All => "every tensor placed in an arena",
        },
        listed.len()
    );
    for (i, (t, id)) in listed.iter().zip(&names).enumerate() {
        let _ = writeln!(h, "/* {} */", describe(t));
        let m = format!("{prefix}_TENSOR_{id}");
        let _ = writeln!(h, "#define {m}_INDEX {i}");
        let _ = writeln!(h, "#define {m}_ARENA {}", t.arena.unwrap_or(0));
        let _ = writeln!(h, "#define {m}_OFFSET {}", num(t.offset.unwrap_or(0)));
        let _ = writeln!(h, "#define {m}_SIZE {}", num(size_of(t)));
    }
    let array = |what: &str, items: Vec<String>| {
        format!(
            "/* Initialiser of a {}[{prefix}_TENSOR_COUNT] of the tensors' {what}, in schedule order. */\n#define {prefix}_TENSOR_{} {{ {} }}\n",
            if what == "names" { "const char *" } else { ty },
            what.to_uppercase(),
            items.join(", ")
        )
    };
    let _ = writeln!(h);
    h.push_str(&array(
        "arenas",
        listed
            .iter()
            .map(|t| t.arena.unwrap_or(0).to_string())
            .collect(),
    ));
    h.push_str(&array(
        "offsets",
        listed.iter().map(|t| num(t.offset.unwrap_or(0))).collect(),
    ));
    h.push_str(&array(
        "sizes",
        listed.iter().map(|t| num(size_of(t))).collect(),
    ));
    h.push_str(&array(
        "names",
        listed.iter().map(|t| c_string(&t.name)).collect(),
    ));
    let _ = writeln!(h, "\n#endif /* {guard} */");
    h
}

/// The macro prefix of a model stem: [`c_identifier`] of it (`mobilenet_v2` → `MOBILENET_V2`),
/// `MODEL` when that is empty.
pub fn c_prefix(stem: &str) -> String {
    let id = c_identifier(stem);
    if id.is_empty() { "MODEL".into() } else { id }
}

/// A C identifier part for a name: ASCII letters upper-cased, digits kept, every run of other
/// characters one `_`, no `_` at either end; `T_` before one that would start with a digit.
/// Empty for a name with no letter or digit.
pub fn c_identifier(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    while out.ends_with('_') {
        out.pop();
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert_str(0, "T_");
    }
    out
}

/// Unique identifier parts for `names`, in their order: each takes its [`c_identifier`]
/// (`T` when empty), or when an earlier name took it, the first `<ID>_<k>` (k = 2, 3, ...)
/// none has taken.
pub fn identifiers<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut taken = HashSet::new();
    names
        .map(|name| {
            let mut base = c_identifier(name);
            if base.is_empty() {
                base = "T".into();
            }
            let mut id = base.clone();
            let mut k = 2;
            while taken.contains(&id) {
                id = format!("{base}_{k}");
                k += 1;
            }
            taken.insert(id.clone());
            id
        })
        .collect()
}

/// The tensors the header lists, in schedule order.
fn listed_tensors(table: &Table, which: HeaderTensors) -> Vec<&TensorEntry> {
    let mut listed: Vec<&TensorEntry> = table
        .tensors
        .iter()
        .filter(|t| t.arena.is_some() && t.offset.is_some())
        .filter(|t| which == HeaderTensors::All || t.kind == "input" || t.kind == "output")
        .collect();
    listed.sort_by_key(|t| t.first);
    listed
}

/// The bytes a tensor takes in its arena: what it stores (a partition's quantised copy) or its
/// exact size.
fn size_of(t: &TensorEntry) -> u64 {
    t.placement.stored_bytes.or(t.bytes).unwrap_or(0)
}

/// True when a size or offset does not fit 32 bits.
fn needs_64_bits(table: &Table) -> bool {
    let big = |v: u64| v > u64::from(u32::MAX);
    big(table.options.alignment)
        || table.arenas.iter().any(|a| big(a.bytes))
        || table
            .tensors
            .iter()
            .any(|t| big(t.offset.unwrap_or(0)) || big(size_of(t)))
}

/// A tensor's comment: name, kind, dtype and shape, steps.
fn describe(t: &TensorEntry) -> String {
    let shape = match &t.shape {
        Some(s) => format!(
            "[{}]",
            s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
        None => "[?]".into(),
    };
    format!(
        "\"{}\": {} {}{shape}, steps {}..{}",
        comment_text(&t.name),
        t.kind,
        comment_text(
            t.placement
                .stored_dtype
                .as_deref()
                .or(t.dtype.as_deref())
                .unwrap_or("value")
        ),
        t.first,
        t.last
    )
}

/// Text safe inside a C comment: printable ASCII, no `*/` and no `??` (trigraphs).
fn comment_text(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect();
    while out.contains("*/") || out.contains("??") {
        out = out.replace("*/", "* /").replace("??", "? ?");
    }
    out
}

/// A C string literal of `s`'s UTF-8 bytes (escapes for `"`, `\`, `?` and bytes outside
/// printable ASCII, as three-digit octal).
fn c_string(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' | b'\\' | b'?' => {
                out.push('\\');
                out.push(b as char);
            }
            b' '..=b'~' => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_follow_the_documented_rule() {
        // Worked by hand from the rule: upper-case, runs of other characters → one `_`, no
        // `_` at the ends, `T_` before a digit, `T` for nothing, `_k` from 2 on a collision.
        let names = [
            "conv1/out:0",
            "conv1.out.0",
            "Conv1_Out_0",
            "123",
            "",
            "///",
            "T",
            "conv1_out_0_2",
        ];
        let ids = identifiers(names.iter().copied());
        assert_eq!(
            ids,
            [
                "CONV1_OUT_0",
                "CONV1_OUT_0_2",
                "CONV1_OUT_0_3",
                "T_123",
                "T",
                "T_2",
                "T_3",
                "CONV1_OUT_0_2_2",
            ]
        );
        assert_eq!(c_prefix("mobilenet_v2"), "MOBILENET_V2");
        assert_eq!(c_prefix("--"), "MODEL");
    }

    #[test]
    fn comments_and_strings_cannot_break_out() {
        assert_eq!(comment_text("a*/b??/c\u{e9}"), "a* /b? ?/c?");
        assert_eq!(c_string("a\"b\\c?\u{e9}"), "\"a\\\"b\\\\c\\?\\303\\251\"");
    }
}

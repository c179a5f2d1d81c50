//! MiniMalloc's CSV format: one buffer a row, `id,lower,upper,size`, lifetime `[lower, upper)`.
//!
//! Also accepted, as MiniMalloc's reader does: `buffer` or `buffer_id` for `id`, `begin` or
//! `start` for `lower`, an inclusive `end` instead of `upper`, an `alignment` column (one value for
//! all rows), and `hint` and `gaps` columns (`hint` is ignored; `gaps` must be empty).
//! A solution is written back with an `offset` column, which the reader ignores, so a solved
//! file reads as the same problem.

use std::fmt::Write as _;
use std::path::Path;

use super::problem::{Buffer, Problem};

/// A problem read from CSV, with the buffer ids of its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvProblem {
    /// The `id` of each row, in file order (indices match `problem.buffers`).
    pub ids: Vec<String>,
    /// The buffers; the alignment is the file's `alignment` column, or 1.
    pub problem: Problem,
}

/// A CSV file that cannot be read, located by file and line.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    /// The file could not be read.
    #[error("{file}: {error}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error (in the message, so the error reads as one line).
        error: std::io::Error,
    },
    /// The content is malformed.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// The file (or a description of the text's source).
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The rows parse but no planner can take them (sizes adding up past
    /// [`super::MAX_TOTAL`]).
    #[error("{file}: {error}")]
    Problem {
        /// The file.
        file: String,
        /// Why the problem cannot be planned.
        error: super::PlanError,
    },
}

/// Reads a problem from a CSV file.
pub fn read_csv(path: &Path) -> Result<CsvProblem, CsvError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| CsvError::Io {
        file: file.clone(),
        error,
    })?;
    parse_csv(&text, &file)
}

/// Where each known column sits in a row.
struct Columns {
    id: usize,
    lower: usize,
    upper: Upper,
    size: usize,
    alignment: Option<usize>,
    gaps: Option<usize>,
    count: usize,
}

enum Upper {
    Exclusive(usize),
    Inclusive(usize),
}

impl Columns {
    fn from_header(header: &str) -> Result<Self, String> {
        let names: Vec<String> = header
            .split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .collect();
        let find = |aliases: &[&str]| names.iter().position(|n| aliases.contains(&n.as_str()));
        let missing = |what: &str| format!("header lacks a `{what}` column (got `{header}`)");
        let upper = match (find(&["upper"]), find(&["end"])) {
            (Some(u), _) => Upper::Exclusive(u),
            (None, Some(e)) => Upper::Inclusive(e),
            (None, None) => return Err(missing("upper")),
        };
        if let Some(unknown) = names.iter().find(|n| {
            ![
                "id",
                "buffer",
                "buffer_id",
                "lower",
                "begin",
                "start",
                "upper",
                "end",
                "size",
                "alignment",
                "hint",
                "gaps",
                "offset",
            ]
            .contains(&n.as_str())
        }) {
            return Err(format!("unknown column `{unknown}`"));
        }
        Ok(Columns {
            id: find(&["id", "buffer", "buffer_id"]).ok_or_else(|| missing("id"))?,
            lower: find(&["lower", "begin", "start"]).ok_or_else(|| missing("lower"))?,
            upper,
            size: find(&["size"]).ok_or_else(|| missing("size"))?,
            alignment: find(&["alignment"]),
            gaps: find(&["gaps"]),
            count: names.len(),
        })
    }
}

/// Parses CSV text; `source` names the file in error messages.
pub fn parse_csv(text: &str, source: &str) -> Result<CsvProblem, CsvError> {
    let syntax = |line: usize, message: String| CsvError::Syntax {
        file: source.to_string(),
        line,
        message,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let (header_line, header) = lines.next().ok_or_else(|| {
        syntax(
            1,
            "empty file: expected a header `id,lower,upper,size`".into(),
        )
    })?;
    let columns = Columns::from_header(header).map_err(|m| syntax(header_line, m))?;
    let mut ids = Vec::new();
    let mut buffers = Vec::new();
    let mut alignment: Option<u64> = None;
    for (line, row) in lines {
        let fields: Vec<&str> = row.split(',').map(str::trim).collect();
        if fields.len() != columns.count {
            return Err(syntax(
                line,
                format!("expected {} fields, found {}", columns.count, fields.len()),
            ));
        }
        let number = |index: usize, name: &str| -> Result<u64, CsvError> {
            fields[index].parse::<u64>().map_err(|_| {
                syntax(
                    line,
                    format!(
                        "`{name}` is not a non-negative integer: `{}`",
                        fields[index]
                    ),
                )
            })
        };
        let step = |value: u64, name: &str| -> Result<u32, CsvError> {
            u32::try_from(value)
                .map_err(|_| syntax(line, format!("`{name}` {value} exceeds {}", u32::MAX)))
        };
        let lower = step(number(columns.lower, "lower")?, "lower")?;
        let upper = match columns.upper {
            Upper::Exclusive(i) => step(number(i, "upper")?, "upper")?,
            Upper::Inclusive(i) => step(number(i, "end")?.saturating_add(1), "end + 1")?,
        };
        if upper < lower {
            return Err(syntax(
                line,
                format!("lifetime ends ({upper}) before it starts ({lower})"),
            ));
        }
        let size = number(columns.size, "size")?;
        if let Some(i) = columns.alignment {
            let a = number(i, "alignment")?;
            if a == 0 || alignment.is_some_and(|prev| prev != a) {
                return Err(syntax(
                    line,
                    format!(
                        "alignment {a} differs from the others or is zero (one alignment for all rows is supported)"
                    ),
                ));
            }
            alignment = Some(a);
        }
        if let Some(i) = columns.gaps
            && !fields[i].is_empty()
        {
            return Err(syntax(line, "`gaps` are not supported".into()));
        }
        ids.push(fields[columns.id].to_string());
        buffers.push(Buffer {
            size,
            start: lower,
            end: upper,
        });
    }
    let problem = Problem {
        buffers,
        alignment: alignment.unwrap_or(1),
    };
    // What the reader accepts, every planner can take.
    problem.validate().map_err(|error| CsvError::Problem {
        file: source.to_string(),
        error,
    })?;
    Ok(CsvProblem { ids, problem })
}

/// Formats a solved problem as CSV: `id,lower,upper,size,offset`, plus an `alignment` column
/// when the alignment is not 1.
pub fn format_csv(problem: &CsvProblem, offsets: &[u64]) -> String {
    let alignment = problem.problem.alignment;
    let mut out = String::from("id,lower,upper,size,offset");
    if alignment != 1 {
        out.push_str(",alignment");
    }
    out.push('\n');
    for ((id, b), offset) in problem
        .ids
        .iter()
        .zip(&problem.problem.buffers)
        .zip(offsets)
    {
        // Writing into a String cannot fail.
        let _ = write!(out, "{id},{},{},{},{offset}", b.start, b.end, b.size);
        if alignment != 1 {
            let _ = write!(out, ",{alignment}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_minimalloc_rows() {
        let text = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n\n";
        let csv = parse_csv(text, "x.csv").expect("valid");
        assert_eq!(csv.ids, ["b1", "b2"]);
        assert_eq!(
            csv.problem.buffers,
            [
                Buffer {
                    size: 4,
                    start: 0,
                    end: 3
                },
                Buffer {
                    size: 4,
                    start: 3,
                    end: 9
                }
            ]
        );
        assert_eq!(csv.problem.alignment, 1);
    }

    #[test]
    fn refuses_sizes_no_planner_can_add_up() {
        // The solve_csv fuzz target's finding: a size past 2^62 (the others' sum is small).
        let text = "id,lower,upper,size\na,0,3,4\nb,0,9,5125555555555555550\n";
        let err = parse_csv(text, "big.csv").expect_err("refused");
        assert_eq!(
            err.to_string(),
            "big.csv: buffer sizes add up to more than 2^62 bytes"
        );
    }

    #[test]
    fn accepts_aliases_an_inclusive_end_and_an_alignment() {
        let text = "buffer_id,start,end,size,alignment,hint\na,2,4,10,8,\nb,0,0,3,8,7\n";
        let csv = parse_csv(text, "x.csv").expect("valid");
        assert_eq!(
            csv.problem.buffers,
            [
                Buffer {
                    size: 10,
                    start: 2,
                    end: 5
                },
                Buffer {
                    size: 3,
                    start: 0,
                    end: 1
                }
            ]
        );
        assert_eq!(csv.problem.alignment, 8);
        let begin = parse_csv("buffer,begin,upper,size\nq,1,2,3\n", "y").expect("valid");
        assert_eq!(
            begin.problem.buffers[0],
            Buffer {
                size: 3,
                start: 1,
                end: 2
            }
        );
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let cases = [
            ("", "f.csv:1: empty file"),
            ("id,lower,size\n", "f.csv:1: header lacks a `upper` column"),
            (
                "id,lower,upper,size,color\n",
                "f.csv:1: unknown column `color`",
            ),
            (
                "id,lower,upper,size\na,0,1\n",
                "f.csv:2: expected 4 fields, found 3",
            ),
            (
                "id,lower,upper,size\n\na,0,1,-4\n",
                "f.csv:3: `size` is not a non-negative integer",
            ),
            (
                "id,lower,upper,size\na,5,1,4\n",
                "f.csv:2: lifetime ends (1) before it starts (5)",
            ),
            (
                "id,lower,upper,size\na,0,4294967296,4\n",
                "f.csv:2: `upper` 4294967296 exceeds",
            ),
            (
                "id,lower,upper,size,gaps\na,0,1,4,2-3\n",
                "f.csv:2: `gaps` are not supported",
            ),
            (
                "id,lower,upper,size,alignment\na,0,1,4,8\nb,0,1,4,16\n",
                "f.csv:3: alignment 16",
            ),
        ];
        for (text, expected) in cases {
            let message = parse_csv(text, "f.csv").expect_err(text).to_string();
            assert!(message.starts_with(expected), "{message:?} vs {expected:?}");
            assert!(!message.contains('\n'), "one line: {message:?}");
        }
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let err = read_csv(Path::new("/nonexistent/p.csv")).expect_err("no file");
        assert!(err.to_string().starts_with("/nonexistent/p.csv: "));
    }

    #[test]
    fn formats_rows_with_offsets() {
        let csv = parse_csv("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n", "x").expect("valid");
        assert_eq!(
            format_csv(&csv, &[0, 4]),
            "id,lower,upper,size,offset\nb1,0,3,4,0\nb2,3,9,4,4\n"
        );
        let aligned = parse_csv("id,lower,upper,size,alignment\nb,0,1,4,8\n", "x").expect("ok");
        let text = format_csv(&aligned, &[8]);
        assert_eq!(text, "id,lower,upper,size,offset,alignment\nb,0,1,4,8,8\n");
        let back = parse_csv(&text, "x").expect("round trip");
        assert_eq!(back.problem, aligned.problem);
    }
}

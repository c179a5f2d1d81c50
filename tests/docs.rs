//! The documentation stays true: every relative link and `#anchor` in README.md and
//! docs/**/*.md resolves, docs/guide/cli.md is exactly the command line's `--help` for every
//! subcommand, and the shell blocks fenced as `sh runnable` run and succeed. (The `rust`
//! blocks of README.md and the guide run as doctests, see src/lib.rs.)

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_onnx-memplan");
const REGENERATE: &str = "MEMPLAN_BLESS=1 cargo test --release --test docs";

/// README.md and every Markdown file under docs/.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.path());
        for entry in entries {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![Path::new(ROOT).join("README.md")];
    walk(&Path::new(ROOT).join("docs"), &mut files);
    files
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
        } else if !inside {
            out.push((i + 1, line));
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped except `-` and `_`,
/// spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (duplicates numbered as GitHub does).
fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, line) in prose_lines(text) {
        let Some(rest) = line.strip_prefix('#') else {
            continue;
        };
        let base = slug(rest.trim_start_matches('#'));
        let seen = out
            .iter()
            .filter(|a| *a == &base || a.starts_with(&format!("{base}-")))
            .count();
        out.push(if seen == 0 {
            base
        } else {
            format!("{base}-{seen}")
        });
    }
    out
}

/// The targets of the inline links `[text](target)` on a line.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    out
}

#[test]
fn relative_links_and_anchors_resolve() {
    // Worked by hand from GitHub's rule: `## Splitting (\`--split auto\`)`.
    assert_eq!(
        slug(" Splitting (`--split auto`)"),
        "splitting---split-auto"
    );
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let resolved = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                let here = format!("{}:{number}: {target}", file.display());
                if !resolved.exists() {
                    broken.push(format!("{here}: no such file"));
                } else if !anchor.is_empty() {
                    let target_text = std::fs::read_to_string(&resolved).unwrap_or_default();
                    if !anchors(&target_text).iter().any(|a| a == anchor) {
                        broken.push(format!("{here}: no heading with that anchor"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The help text of `onnx-memplan ARGS --help`.
fn help(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The CLI reference as generated from the command line's help.
fn cli_reference() -> String {
    let top = help(&[]);
    let subcommands: Vec<&str> = top
        .split("Commands:")
        .nth(1)
        .expect("the help lists its commands")
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    let mut doc = format!(
        "# CLI reference\n\n<!-- Generated from `onnx-memplan --help` by tests/docs.rs; do not \
         edit. Regenerate with `{REGENERATE}`. -->\n\n\
         What the flags do is in [Options in depth](options.md).\n\n\
         ## `onnx-memplan`\n\n```text\n{}```\n",
        top
    );
    for name in subcommands {
        doc.push_str(&format!(
            "\n## `onnx-memplan {name}`\n\n```text\n{}```\n",
            help(&[name])
        ));
    }
    doc
}

#[test]
fn cli_reference_is_the_generated_help() {
    let path = Path::new(ROOT).join("docs/guide/cli.md");
    let generated = cli_reference();
    if std::env::var_os("MEMPLAN_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "docs/guide/cli.md differs from the command line's help; regenerate it with `{REGENERATE}`"
    );
    // Every subcommand the binary dispatches has a section.
    for name in ["plan", "shapes", "verify", "solve", "conformance"] {
        assert!(
            written.contains(&format!("## `onnx-memplan {name}`")),
            "{name}"
        );
    }
}

/// The code blocks of `text` whose fence line is exactly "```{info}", with the line each
/// starts on.
fn fenced(text: &str, info: &str) -> Vec<(usize, String)> {
    let opening = format!("```{info}");
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match current.as_mut() {
            Some(_) if line.trim_start().starts_with("```") => out.extend(current.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None if line.trim() == opening => current = Some((i + 1, String::new())),
            None => {}
        }
    }
    out
}

#[test]
fn runnable_shell_examples_run() {
    // `cargo run --release --` is this test's own binary: no nested cargo.
    let mut ran = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, body) in fenced(&text, "sh runnable") {
            let script = body.replace("cargo run --release --", BIN);
            let out = Command::new("sh")
                .args(["-eu", "-c", &script])
                .current_dir(ROOT)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}:{line}: the example failed:\n{}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(
        ran >= 2,
        "expected the guide's runnable examples (getting started, runtime)"
    );
}

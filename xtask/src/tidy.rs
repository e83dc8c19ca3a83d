//! `cargo xtask tidy`: text rules over the workspace's sources and manifests, std only.
//!
//! * every `.rs` file under `crates/` and `xtask/` (skipping `target/`, `fuzz/` and hidden
//!   directories) starts with a `//!` line;
//! * every member's `Cargo.toml` has `[lints] workspace = true`, without which the workspace
//!   lints silently do not apply;
//! * every member's `src/lib.rs` (or `src/main.rs` when it has no library) carries
//!   `#![forbid(unsafe_code)]`, visible and independent of `[lints]`;
//! * except the crates of [`UNSAFE_GLUE_CRATES`] (Python bindings), whose generated glue is
//!   `unsafe`: each has its own `[lints]` table with `unsafe_code = "deny"`, a crate root with
//!   `#![deny(unsafe_code)]`, and no `unsafe` written in any of its sources;
//! * `docs/ARCHITECTURE.md` names every crate of `order` as `` `name` ``;
//! * the `pure` crates' sources use no file system, network, process, environment, standard
//!   stream, clock, randomness or randomly ordered collection, and their manifests declare no
//!   known I/O or randomness crate.
//!
//! The member list and the `order`/`pure` lists come from `cargo metadata`, the same input as
//! [`crate::layering`]. Every rule is a pure function over file text, so the tests feed it
//! snippets.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::layering::Workspace;

/// Tokens the pure crates' sources may not contain, with the reason shown to the reader.
///
/// A token matches only at an identifier boundary, so `eprint!` does not match `print!` and
/// `FxHashMap` does not match `HashMap`.
const FORBIDDEN_TOKENS: &[(&str, &str)] = &[
    ("std::fs", "file system access"),
    ("std::net", "network access"),
    ("std::process", "process control"),
    ("std::env", "environment access"),
    ("io::stdin", "standard stream access"),
    ("io::stdout", "standard stream access"),
    ("io::stderr", "standard stream access"),
    ("SystemTime", "clock access"),
    ("Instant", "clock access"),
    ("println!", "standard stream access"),
    ("eprintln!", "standard stream access"),
    ("print!", "standard stream access"),
    ("eprint!", "standard stream access"),
    ("dbg!", "standard stream access"),
    ("rand::", "randomness"),
    ("getrandom", "randomness"),
    ("HashMap", "random iteration order; use BTreeMap"),
    ("HashSet", "random iteration order; use BTreeSet"),
];

/// Module names that may not appear inside a `use std::{...}` group in a pure crate.
const FORBIDDEN_GROUP_WORDS: &[(&str, &str)] = &[
    ("fs", "file system access"),
    ("net", "network access"),
    ("env", "environment access"),
    ("process", "process control"),
    ("time", "clock access"),
    ("stdin", "standard stream access"),
    ("stdout", "standard stream access"),
    ("stderr", "standard stream access"),
];

/// Crates a pure crate may not depend on: they do I/O, read the clock or produce randomness.
const FORBIDDEN_CRATES: &[&str] = &["rand", "getrandom", "tokio", "reqwest", "chrono", "time"];

/// Crates allowed `deny` instead of `forbid` for `unsafe_code`: the Python binding.
///
/// PyO3's macros write the extension's init symbol and the type objects' slots as `unsafe`
/// code under their own `#[allow(unsafe_code)]`, which a `forbid` (workspace-wide or in the
/// crate root) would reject. Such a crate cannot inherit the workspace lints, so it mirrors them
/// in its own `[lints]` table with `unsafe_code = "deny"`; its root says
/// `#![deny(unsafe_code)]`; and tidy scans its sources for a hand-written `unsafe`, so that the
/// generated glue stays the only unsafe code in it.
pub(crate) const UNSAFE_GLUE_CRATES: &[&str] = &["cutctx-python"];

/// One problem found by tidy: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    /// `path` or `path:line`, relative to the workspace root where possible.
    pub(crate) location: String,
    /// What is wrong, as a lower-case sentence.
    pub(crate) message: String,
}

impl Problem {
    /// A problem at `location`.
    fn new(location: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}\n  --> {}", self.message, self.location)
    }
}

/// Runs every tidy rule over the workspace at `root`.
///
/// Returns a one-line summary on success, or a report listing every problem.
pub(crate) fn run(root: &Path) -> Result<String, String> {
    let metadata = crate::cargo_metadata(root, &[])?;
    let workspace =
        Workspace::from_metadata(&metadata).map_err(|error| format!("tidy failed: {error}"))?;
    let mut problems = Vec::new();

    // Every source file opens with a `//!` line.
    let mut files = Vec::new();
    for dir in ["crates", "xtask"] {
        collect_rs_files(&root.join(dir), &mut files)
            .map_err(|error| format!("tidy failed: cannot list {dir}/: {error}"))?;
    }
    for file in &files {
        let text = read(root, file, &mut problems);
        problems.extend(check_doc_header(&display(root, file), &text));
    }

    // Every member: `[lints] workspace = true` and a visible `#![forbid(unsafe_code)]`.
    for member in &workspace.members {
        let manifest = Path::new(&member.manifest_path);
        let dir = manifest.parent().unwrap_or(root);
        let manifest_text = read(root, manifest, &mut problems);
        let glue = UNSAFE_GLUE_CRATES.contains(&member.name.as_str());
        if glue {
            problems.extend(check_glue_lints(&display(root, manifest), &manifest_text));
            let mut sources = Vec::new();
            collect_rs_files(&dir.join("src"), &mut sources)
                .map_err(|error| format!("tidy failed: cannot list {}: {error}", dir.display()))?;
            for file in &sources {
                let text = read(root, file, &mut problems);
                problems.extend(scan_hand_written_unsafe(&display(root, file), &text));
            }
        } else {
            problems.extend(check_lints_table(&display(root, manifest), &manifest_text));
        }
        let lib = dir.join("src/lib.rs");
        let main = dir.join("src/main.rs");
        let crate_root = if lib.is_file() { lib } else { main };
        if crate_root.is_file() {
            let text = read(root, &crate_root, &mut problems);
            let path = display(root, &crate_root);
            problems.extend(if glue {
                check_deny_unsafe(&path, &text)
            } else {
                check_forbid_unsafe(&path, &text)
            });
        } else {
            problems.push(Problem::new(
                display(root, dir),
                format!("`{}` has neither src/lib.rs nor src/main.rs", member.name),
            ));
        }
    }

    // The architecture document names every layered crate.
    let architecture = root.join("docs/ARCHITECTURE.md");
    match fs::read_to_string(&architecture) {
        Ok(text) => problems.extend(check_architecture(
            &display(root, &architecture),
            &text,
            &workspace.layering.order,
        )),
        Err(error) => problems.push(Problem::new(
            display(root, &architecture),
            format!("cannot read the architecture document: {error}"),
        )),
    }

    // The pure crates: sources and manifests.
    let mut pure_files = 0usize;
    for name in &workspace.layering.pure {
        // A pure name that is not a member is reported by `cargo xtask layering`.
        let Some(member) = workspace.members.iter().find(|m| &m.name == name) else {
            continue;
        };
        let manifest = Path::new(&member.manifest_path);
        let manifest_text = read(root, manifest, &mut problems);
        problems.extend(check_pure_manifest(
            &display(root, manifest),
            name,
            &manifest_text,
        ));
        let mut sources = Vec::new();
        let src = manifest.parent().unwrap_or(root).join("src");
        collect_rs_files(&src, &mut sources)
            .map_err(|error| format!("tidy failed: cannot list {}: {error}", src.display()))?;
        for file in &sources {
            let text = read(root, file, &mut problems);
            problems.extend(scan_pure_source(&display(root, file), name, &text));
        }
        pure_files += sources.len();
    }

    if problems.is_empty() {
        Ok(format!(
            "tidy: {} .rs files, {} crates, {} pure crates ({pure_files} files scanned): clean",
            files.len(),
            workspace.members.len(),
            workspace.layering.pure.len()
        ))
    } else {
        let listed: Vec<String> = problems.iter().map(Problem::to_string).collect();
        Err(format!(
            "tidy check failed ({} problem(s)):\n\n{}",
            problems.len(),
            listed.join("\n\n")
        ))
    }
}

/// Reads a file, recording a problem (and returning an empty text) when it cannot be read.
fn read(root: &Path, path: &Path, problems: &mut Vec<Problem>) -> String {
    fs::read_to_string(path).unwrap_or_else(|error| {
        problems.push(Problem::new(
            display(root, path),
            format!("cannot read file: {error}"),
        ));
        String::new()
    })
}

/// `path` relative to `root` when it lies below it, for shorter messages.
fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Appends every `.rs` file below `dir` to `files`, sorted, skipping `target/`, `fuzz/` and
/// hidden directories. A missing `dir` adds nothing.
pub(crate) fn collect_rs_files(dir: &Path, files: &mut Vec<PathBuf>) -> io::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    let mut entries = fs::read_dir(dir)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<io::Result<Vec<_>>>()?;
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            // A directory entry always has a name; none would match no rule below.
            .unwrap_or_default();
        if path.is_dir() {
            if name != "target" && name != "fuzz" && !name.starts_with('.') {
                collect_rs_files(&path, files)?;
            }
        } else if name.ends_with(".rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// The file's first line must start with `//!`: every module says what it is for.
pub(crate) fn check_doc_header(path: &str, text: &str) -> Option<Problem> {
    let first = text.lines().next().unwrap_or("");
    let first = first.strip_prefix('\u{feff}').unwrap_or(first);
    (!first.starts_with("//!")).then(|| {
        Problem::new(
            format!("{path}:1"),
            "the first line is not a `//!` module doc comment; say what this module is for",
        )
    })
}

/// A manifest's `key = value` lines with the table each sits in, comments stripped and
/// whitespace removed from keys and values: enough to find one setting, not a TOML parser.
fn toml_entries(manifest: &str) -> impl Iterator<Item = (String, String, String)> + '_ {
    let mut section = String::new();
    manifest.lines().filter_map(move |line| {
        let line = strip_toml_comment(line).trim();
        if line.starts_with('[') {
            section = table_header(line);
            return None;
        }
        let (key, value) = line.split_once('=')?;
        let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        Some((section.clone(), squeeze(key), squeeze(value)))
    })
}

/// The manifest must contain `[lints]` with `workspace = true` (or `lints.workspace = true`).
pub(crate) fn check_lints_table(path: &str, manifest: &str) -> Option<Problem> {
    let inherits = toml_entries(manifest).any(|(section, key, value)| {
        match (section.as_str(), key.as_str()) {
            ("lints", "workspace") | ("", "lints.workspace") => value == "true",
            ("", "lints") => value == "{workspace=true}",
            _ => false,
        }
    });
    if inherits {
        return None;
    }
    Some(Problem::new(
        path,
        "no `[lints] workspace = true`: without it the workspace lints silently do not apply",
    ))
}

/// The crate root must carry `#![forbid(unsafe_code)]`.
pub(crate) fn check_forbid_unsafe(path: &str, text: &str) -> Option<Problem> {
    let found = text.lines().any(|line| {
        let line: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        line.starts_with("#![forbid(")
            && line
                .trim_start_matches("#![forbid(")
                .split([',', ')'])
                .any(|lint| lint == "unsafe_code")
    });
    (!found).then(|| Problem::new(path, "the crate root has no `#![forbid(unsafe_code)]`"))
}

/// `docs/ARCHITECTURE.md` must name every layered crate as `` `name` ``.
/// The crate root of an [`UNSAFE_GLUE_CRATES`] member carries `#![deny(unsafe_code)]`.
pub(crate) fn check_deny_unsafe(path: &str, text: &str) -> Option<Problem> {
    let found = text.lines().any(|line| {
        let line: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        line.starts_with("#![deny(")
            && line
                .trim_start_matches("#![deny(")
                .split([',', ')'])
                .any(|lint| lint == "unsafe_code")
    });
    (!found).then(|| {
        Problem::new(
            path,
            "the binding crate's root has no `#![deny(unsafe_code)]` (its exception to \
             `forbid` is for generated glue only)",
        )
    })
}

/// The manifest of an [`UNSAFE_GLUE_CRATES`] member has its own `[lints.rust]` table with
/// `unsafe_code = "deny"` (it cannot inherit the workspace's `forbid`).
pub(crate) fn check_glue_lints(path: &str, manifest: &str) -> Option<Problem> {
    let denies = toml_entries(manifest).any(|(section, key, value)| {
        matches!(
            (section.as_str(), key.as_str()),
            ("lints.rust", "unsafe_code") | ("lints", "rust.unsafe_code")
        ) && value == "\"deny\""
    });
    if denies {
        return None;
    }
    Some(Problem::new(
        path,
        "the binding crate has no `[lints.rust] unsafe_code = \"deny\"`: it mirrors the \
         workspace lints with `deny` in place of `forbid`",
    ))
}

/// Lines of a binding crate's source that write `unsafe` themselves.
pub(crate) fn scan_hand_written_unsafe(path: &str, text: &str) -> Vec<Problem> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| contains_token(strip_rust_comment(line), "unsafe"))
        .map(|(index, _)| {
            Problem::new(
                format!("{path}:{}", index + 1),
                "hand-written `unsafe` in the binding crate: only PyO3's generated glue may be \
                 unsafe",
            )
        })
        .collect()
}

pub(crate) fn check_architecture(path: &str, text: &str, order: &[String]) -> Vec<Problem> {
    order
        .iter()
        .filter(|name| !text.contains(&format!("`{name}`")))
        .map(|name| {
            Problem::new(
                path,
                format!("the architecture document does not name `{name}` (as `` `{name}` ``)"),
            )
        })
        .collect()
}

/// Scans one source file of the pure crate `krate` for I/O, clock, environment, randomness and
/// randomly ordered collections. Lines starting with `//` and trailing `//` comments are
/// ignored; string literals are not (a forbidden name in a string is worth a second look).
/// A line may carry a reasoned exception for one token as a trailing
/// `// tidy:allow(Token) reason` comment.
pub(crate) fn scan_pure_source(path: &str, krate: &str, text: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut in_std_group = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        let code = strip_rust_comment(line);
        let mut found: Vec<&str> = Vec::new();
        for &(token, why) in FORBIDDEN_TOKENS {
            // A reasoned exception on the line itself: `// tidy:allow(Token) why`.
            if line.contains(&format!("tidy:allow({token})")) {
                continue;
            }
            if contains_token(code, token) {
                found.push(token);
                problems.push(Problem::new(
                    format!("{path}:{}", index + 1),
                    format!("pure crate `{krate}` uses `{token}` ({why})"),
                ));
            }
        }

        // `use std::{fs, ...}` and friends, possibly over several lines.
        let group_text = if in_std_group {
            Some(code)
        } else {
            std_group_start(code).map(|start| &code[start..])
        };
        if let Some(group_text) = group_text {
            for &(word, why) in FORBIDDEN_GROUP_WORDS {
                let already = found.iter().any(|token| token.ends_with(word));
                if !already && contains_token(group_text, word) {
                    problems.push(Problem::new(
                        format!("{path}:{}", index + 1),
                        format!(
                            "pure crate `{krate}` uses `{word}` in a `use std::{{..}}` group ({why})"
                        ),
                    ));
                }
            }
            in_std_group = !group_text.contains(';');
        }
    }
    problems
}

/// Where a `use std::...{` group starts on this line, if one does.
fn std_group_start(code: &str) -> Option<usize> {
    let start = code
        .find("use std::")
        .or_else(|| code.find("use ::std::"))?;
    let rest = &code[start..];
    let path_end = rest.find(';').unwrap_or(rest.len());
    rest[..path_end].contains('{').then_some(start)
}

/// Checks the pure crate's manifest for dependencies on known I/O or randomness crates, in any
/// dependency table (normal, dev, build, target-specific).
pub(crate) fn check_pure_manifest(path: &str, krate: &str, manifest: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut section = String::new();
    for (index, line) in manifest.lines().enumerate() {
        let line = strip_toml_comment(line).trim();
        let mut names: Vec<String> = Vec::new();
        if line.starts_with('[') {
            section = table_header(line);
            // `[dependencies.rand]`, `[target.'cfg(unix)'.dev-dependencies.tokio]`
            if let Some(name) = dependency_table_name(&section) {
                names.push(name);
            }
        } else if let Some((key, value)) = line.split_once('=') {
            let key = key.trim();
            if is_dependency_section(&section) {
                // `rand = "0.9"`, `rand.workspace = true`, `"rand" = { ... }`
                let name = key.split('.').next().unwrap_or(key);
                names.push(unquote(name).to_owned());
            }
            if (is_dependency_section(&section) || dependency_table_name(&section).is_some())
                && let Some(package) = package_rename(key, value)
            {
                names.push(package);
            }
        }
        for name in names {
            if FORBIDDEN_CRATES.contains(&name.as_str()) {
                problems.push(Problem::new(
                    format!("{path}:{}", index + 1),
                    format!(
                        "pure crate `{krate}` depends on `{name}`, which does I/O, reads the \
                         clock or produces randomness"
                    ),
                ));
            }
        }
    }
    problems
}

/// The real package of a renamed dependency: `package = "rand"` as a key, or inside an inline
/// table.
fn package_rename(key: &str, value: &str) -> Option<String> {
    if key == "package" {
        return Some(unquote(value.trim()).to_owned());
    }
    let at = value.find("package")?;
    let rest = value[at + "package".len()..]
        .trim_start()
        .strip_prefix('=')?;
    let rest = rest.trim_start().strip_prefix('"')?;
    rest.split('"').next().map(str::to_owned)
}

/// Whether the section's keys are dependency names.
fn is_dependency_section(section: &str) -> bool {
    ["dependencies", "dev-dependencies", "build-dependencies"]
        .iter()
        .any(|table| section == *table || section.ends_with(&format!(".{table}")))
}

/// The dependency named by a `[dependencies.<name>]`-style header, if it is one.
fn dependency_table_name(section: &str) -> Option<String> {
    ["dependencies.", "dev-dependencies.", "build-dependencies."]
        .iter()
        .filter_map(|table| {
            let at = section.rfind(table)?;
            let at_boundary = at == 0 || section[..at].ends_with('.');
            at_boundary.then(|| unquote(&section[at + table.len()..]).to_owned())
        })
        .next()
}

/// The name of a `[table]` or `[[array]]` header, without brackets or spaces.
fn table_header(line: &str) -> String {
    line.trim_matches(|c| c == '[' || c == ']')
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

/// Removes surrounding quotes from a TOML key or string.
fn unquote(text: &str) -> &str {
    text.trim().trim_matches(|c| c == '"' || c == '\'')
}

/// The part of a TOML line before a `#` comment that is not inside a string.
fn strip_toml_comment(line: &str) -> &str {
    let mut quote = None;
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..at],
            (None, '"' | '\'') => quote = Some(c),
            (Some(open), c) if c == open => quote = None,
            _ => {}
        }
    }
    line
}

/// The part of a Rust line before a `//` comment that is not inside a string literal.
fn strip_rust_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut in_string = false;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' if in_string => at += 1,
            // A `'"'` char literal does not open a string.
            b'"' if !(at > 0 && bytes[at - 1] == b'\'' && bytes.get(at + 1) == Some(&b'\'')) => {
                in_string = !in_string;
            }
            b'/' if !in_string && bytes.get(at + 1) == Some(&b'/') => return &line[..at],
            _ => {}
        }
        at += 1;
    }
    line
}

/// Whether `token` occurs in `code` at an identifier boundary on both ends.
fn contains_token(code: &str, token: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let starts_ident = token.chars().next().is_some_and(is_ident);
    let ends_ident = token.chars().last().is_some_and(is_ident);
    code.match_indices(token).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + token.len()..].chars().next();
        let joined_before = starts_ident && before.is_some_and(is_ident);
        let joined_after = ends_ident && after.is_some_and(is_ident);
        !joined_before && !joined_after
    })
}

#[cfg(test)]
mod tests {
    use super::{
        UNSAFE_GLUE_CRATES, check_architecture, check_deny_unsafe, check_doc_header,
        check_forbid_unsafe, check_glue_lints, check_lints_table, check_pure_manifest,
        scan_hand_written_unsafe, scan_pure_source,
    };

    /// A pure-crate file that follows every rule.
    const CLEAN: &str = "\
//! Plans: which messages to drop.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::{fmt, io::Write as _};

/// Orders messages; never prints. See std::fs for what we don't do.
pub fn plan(budget: usize) -> BTreeMap<usize, BTreeSet<usize>> {
    // A HashMap would make the order random; println! is banned here.
    let mut out = BTreeMap::new(); // not a HashMap
    out.insert(budget, BTreeSet::new());
    let _ = format!(\"{}\", \"a // b\");
    let _ = '\"';
    let _ = fmt::Error;
    let _ = core::time::Duration::from_secs(1);
    out
}
";

    fn messages(problems: &[super::Problem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn clean_snippet_passes_every_rule() {
        let path = "crates/cutctx-policies/src/lib.rs";
        assert_eq!(check_doc_header(path, CLEAN), None);
        assert_eq!(check_forbid_unsafe(path, CLEAN), None);
        assert_eq!(
            messages(&scan_pure_source(path, "cutctx-policies", CLEAN)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn missing_module_doc_is_caught() {
        let problem = check_doc_header("crates/cutctx-model/src/hash.rs", "use sha2::Sha256;\n")
            .expect("no //! line");
        assert_eq!(problem.location, "crates/cutctx-model/src/hash.rs:1");
        // A plain `//` or `///` comment is not a module doc.
        assert!(check_doc_header("a.rs", "// Hashing.\n").is_some());
        assert!(check_doc_header("a.rs", "/// Hashing.\n").is_some());
        assert!(check_doc_header("a.rs", "").is_some());
        assert!(check_doc_header("a.rs", "//! Hashing.\n").is_none());
    }

    #[test]
    fn file_system_access_in_a_pure_crate_is_caught() {
        let text =
            "//! Loads.\nfn load() -> Vec<u8> {\n    std::fs::read(\"x\").expect(\"read\")\n}\n";
        let problems = scan_pure_source("crates/cutctx-model/src/load.rs", "cutctx-model", text);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].location, "crates/cutctx-model/src/load.rs:3");
        assert!(problems[0].message.contains("`std::fs`"), "{problems:?}");
        assert!(
            problems[0].message.contains("`cutctx-model`"),
            "{problems:?}"
        );
    }

    #[test]
    fn hash_collections_in_a_pure_crate_are_caught() {
        let allowed = "//! Ids.\ntype M = std::collections::HashMap<u8, u8>; // tidy:allow(HashMap) never iterated\n";
        assert!(scan_pure_source("a.rs", "k", allowed).is_empty());
        let text = "//! Sets.\nuse std::collections::HashMap;\n\nfn f(s: std::collections::HashSet<u8>) {}\n";
        let problems = scan_pure_source("lib.rs", "cutctx-policies", text);
        let rendered = messages(&problems);
        assert_eq!(problems.len(), 2, "{rendered:?}");
        assert_eq!(problems[0].location, "lib.rs:2");
        assert!(problems[0].message.contains("`HashMap`"));
        assert_eq!(problems[1].location, "lib.rs:4");
        assert!(problems[1].message.contains("`HashSet`"));
    }

    #[test]
    fn clock_environment_streams_and_randomness_are_caught() {
        let text = "\
let t = std::time::Instant::now();
let s = SystemTime::now();
let v = std::env::var(\"HOME\");
println!(\"x\");
eprintln!(\"x\");
print!(\"x\");
dbg!(1);
let r = rand::random::<u8>();
let o = std::io::stdout();
std::process::exit(1);
";
        let problems = scan_pure_source("lib.rs", "cutctx-executor", text);
        let tokens: Vec<&str> = problems
            .iter()
            .map(|p| p.message.split('`').nth(3).unwrap_or(""))
            .collect();
        assert_eq!(
            tokens,
            [
                "Instant",
                "SystemTime",
                "std::env",
                "println!",
                "eprintln!",
                "print!",
                "dbg!",
                "rand::",
                "io::stdout",
                "std::process"
            ]
        );
    }

    #[test]
    fn std_use_groups_are_caught_across_lines() {
        let text = "\
use std::{fs, collections::BTreeMap};
use std::{
    collections::BTreeSet,
    env,
    io::{stdin, Read},
};
use std::collections::{BTreeMap as Map};
";
        let problems = scan_pure_source("lib.rs", "cutctx-model", text);
        let found: Vec<(String, bool)> = problems
            .iter()
            .map(|p| (p.location.clone(), p.message.contains("use std::{..}")))
            .collect();
        assert_eq!(
            found,
            [
                ("lib.rs:1".to_owned(), true),
                ("lib.rs:4".to_owned(), true),
                ("lib.rs:5".to_owned(), true),
            ]
        );
    }

    #[test]
    fn tokens_match_at_identifier_boundaries_only() {
        let text = "let a = FxHashMap::default();\nlet b = operand::x();\nlet c = Instants;\n";
        assert!(scan_pure_source("lib.rs", "cutctx-model", text).is_empty());
    }

    #[test]
    fn lints_table_is_required() {
        let good = "[package]\nname = \"a\"\n\n[lints]\nworkspace = true\n";
        assert_eq!(check_lints_table("Cargo.toml", good), None);
        assert_eq!(
            check_lints_table("Cargo.toml", "[package]\nlints.workspace = true\n"),
            Some(super::Problem::new(
                "Cargo.toml",
                "no `[lints] workspace = true`: without it the workspace lints silently do not apply"
            )),
            "a dotted key inside [package] is not the top-level lints table"
        );
        assert_eq!(
            check_lints_table("Cargo.toml", "lints.workspace = true\n[package]\n"),
            None
        );
        assert!(check_lints_table("Cargo.toml", "[package]\nname = \"a\"\n").is_some());
        assert!(check_lints_table("Cargo.toml", "[lints]\n# workspace = true\n").is_some());
        assert!(check_lints_table("Cargo.toml", "[lints]\n[x]\nworkspace = true\n").is_some());
    }

    #[test]
    fn forbid_unsafe_is_required() {
        assert!(check_forbid_unsafe("lib.rs", "//! A.\n#![forbid(unsafe_code)]\n").is_none());
        assert!(
            check_forbid_unsafe("lib.rs", "//! A.\n#![forbid(missing_docs, unsafe_code)]\n")
                .is_none()
        );
        assert!(check_forbid_unsafe("lib.rs", "//! A.\n#![deny(unsafe_code)]\n").is_some());
        assert!(check_forbid_unsafe("lib.rs", "//! A.\n// #![forbid(unsafe_code)]\n").is_some());
    }

    #[test]
    fn architecture_names_every_layered_crate() {
        let order = vec!["cutctx-model".to_owned(), "cutctx".to_owned()];
        let text = "# Architecture\n### `cutctx-model`\nThe facade cutctx re-exports.\n";
        let problems = check_architecture("docs/ARCHITECTURE.md", text, &order);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].message.contains("`cutctx`"));
        assert!(check_architecture("a.md", "`cutctx-model` and `cutctx`", &order).is_empty());
    }

    #[test]
    fn pure_manifests_may_not_depend_on_io_or_randomness_crates() {
        let clean = "\
[package]
name = \"cutctx-model\"
description = \"uses time and rand nowhere\"

[dependencies]
serde = { workspace = true }
sha2.workspace = true

[dev-dependencies]
proptest = { workspace = true }

[lints]
workspace = true
";
        assert!(check_pure_manifest("Cargo.toml", "cutctx-model", clean).is_empty());

        let dirty = "\
[dependencies]
serde = { workspace = true }
rand = \"0.9\"
clock = { package = \"chrono\", version = \"0.4\" }

[dev-dependencies.tokio]
version = \"1\"

[target.'cfg(unix)'.build-dependencies]
time.workspace = true
";
        let problems = check_pure_manifest("Cargo.toml", "cutctx-model", dirty);
        let found: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| {
                (
                    p.location.as_str(),
                    p.message.split('`').nth(3).unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                ("Cargo.toml:3", "rand"),
                ("Cargo.toml:4", "chrono"),
                ("Cargo.toml:6", "tokio"),
                ("Cargo.toml:10", "time"),
            ]
        );
    }

    /// The real workspace passes tidy, so `cargo test --workspace` enforces it.
    #[test]
    fn real_workspace_is_tidy() {
        if let Err(report) = super::run(&crate::project_root()) {
            panic!("{report}");
        }
    }

    #[test]
    fn the_binding_crate_denies_unsafe_and_writes_none() {
        assert_eq!(UNSAFE_GLUE_CRATES, ["cutctx-python"]);
        // Its root: `deny`, which generated glue's own `allow` may override; not `forbid`.
        assert!(check_deny_unsafe("lib.rs", "//! A.\n#![deny(unsafe_code)]\n").is_none());
        assert!(
            check_deny_unsafe("lib.rs", "//! A.\n#![deny(missing_docs, unsafe_code)]\n").is_none()
        );
        assert!(check_deny_unsafe("lib.rs", "//! A.\n#![forbid(unsafe_code)]\n").is_some());
        assert!(check_deny_unsafe("lib.rs", "//! A.\n// #![deny(unsafe_code)]\n").is_some());
        // Its manifest: its own lints table, denying unsafe code.
        let good = "[package]\nname = \"b\"\n\n[lints.rust]\nunsafe_code = \"deny\"\n";
        assert!(check_glue_lints("Cargo.toml", good).is_none());
        assert!(check_glue_lints("Cargo.toml", "[lints]\nrust.unsafe_code = \"deny\"\n").is_none());
        assert!(
            check_glue_lints("Cargo.toml", "[lints.rust]\nunsafe_code = \"allow\"\n").is_some()
        );
        assert!(check_glue_lints("Cargo.toml", "[lints]\nworkspace = true\n").is_some());
        assert!(check_glue_lints("Cargo.toml", "[x]\nunsafe_code = \"deny\"\n").is_some());
        // Its sources: no `unsafe` by hand; the lint's name and comments are not code.
        let clean = "//! B.\n#![deny(unsafe_code)]\n// unsafe glue is generated\nfn f() {}\n";
        assert!(scan_hand_written_unsafe("lib.rs", clean).is_empty());
        let dirty = "//! B.\nfn f() {\n    unsafe { g() }\n}\nunsafe fn g() {}\n";
        let found: Vec<String> = scan_hand_written_unsafe("src/lib.rs", dirty)
            .iter()
            .map(|p| p.location.clone())
            .collect();
        assert_eq!(found, ["src/lib.rs:3", "src/lib.rs:5"]);
    }
}

//! A case of the catalogue: its `case.json` descriptor, read strictly, and its generated inputs.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The file in a case folder that describes the case; every other file is an input.
pub(crate) const DESCRIPTOR: &str = "case.json";

/// What a case must end in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expect {
    /// An error: this code on the JSON error line, nothing on standard output.
    Error(String),
    /// A `ledger verify` verdict: `ok: false`, and exactly these failure codes, in order.
    Verdict(Vec<String>),
}

/// An input written at test time instead of being committed: large, deep or binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Generator {
    /// The bytes of a committed file of the case with raw bytes inserted after the first
    /// occurrence of a text (at the start when the text is empty).
    BytesInserted {
        /// The committed file.
        from: String,
        /// The text after which the bytes go.
        after: String,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// `prefix`, `open` repeated `depth` times, `close` as often (when `closed`), `suffix`.
    Nested {
        /// Text before the nesting.
        prefix: String,
        /// One opening level, such as `[` or `{"k": `.
        open: String,
        /// One closing level.
        close: String,
        /// How many levels.
        depth: usize,
        /// Whether the levels are closed.
        closed: bool,
        /// Text after the nesting.
        suffix: String,
    },
    /// `prefix`, `unit` repeated `count` times, `suffix`.
    Repeated {
        /// Text before the repetition.
        prefix: String,
        /// The repeated text.
        unit: String,
        /// How many times.
        count: usize,
        /// Text after the repetition.
        suffix: String,
    },
}

/// One case, as its descriptor states it.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// The folder's name.
    pub(crate) name: String,
    /// The folder.
    pub(crate) dir: PathBuf,
    /// What is hostile about it, in one sentence.
    pub(crate) about: String,
    /// The command line after `cutctx --error-format FORMAT`, run in a copy of the folder.
    pub(crate) args: Vec<String>,
    /// Standard input; closed and empty when absent.
    pub(crate) stdin: Option<String>,
    /// A file standard output goes to (`/dev/full`) instead of the pipe the runner reads.
    pub(crate) stdout: Option<String>,
    /// Inputs written at test time, by file name.
    pub(crate) generate: Vec<(String, Generator)>,
    /// The expected outcome.
    pub(crate) expect: Expect,
    /// The expected exit status.
    pub(crate) status: i32,
    /// Keys the JSON error's `details` must hold, with these values.
    pub(crate) details: Map<String, Value>,
    /// Text the error message must contain.
    pub(crate) message_contains: Option<String>,
    /// Files the command must leave byte for byte as they were (or absent, if absent).
    pub(crate) untouched: Vec<String>,
    /// Whether the inputs carry the secret (the default); `false` for inputs with no content.
    pub(crate) planted: bool,
    /// A known bug: the reason the case does not pass yet.
    pub(crate) xfail: Option<String>,
}

/// The keys a descriptor may have.
const KEYS: [&str; 13] = [
    "about",
    "args",
    "stdin",
    "stdout",
    "generate",
    "code",
    "verdict",
    "status",
    "details",
    "message_contains",
    "untouched",
    "planted",
    "xfail",
];

fn string(v: &Value, what: &str) -> Result<String, String> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{what} must be a string"))
}

fn strings(v: &Value, what: &str) -> Result<Vec<String>, String> {
    v.as_array()
        .ok_or_else(|| format!("{what} must be an array of strings"))?
        .iter()
        .map(|s| string(s, what))
        .collect()
}

fn hex(text: &str) -> Result<Vec<u8>, String> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return Err(format!(
            "hex {text:?} must be a non-empty, even number of digits"
        ));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(|| format!("hex {text:?} holds a non-hex digit"))
        })
        .collect()
}

fn generator(v: &Value) -> Result<Generator, String> {
    let o = v.as_object().ok_or("a generator must be an object")?;
    let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
    let allowed: &[&str] = match kind {
        "bytes_inserted" => &["kind", "from", "after", "hex"],
        "nested" => &[
            "kind", "prefix", "open", "close", "depth", "closed", "suffix",
        ],
        "repeated" => &["kind", "prefix", "unit", "count", "suffix"],
        other => return Err(format!("unknown generator kind {other:?}")),
    };
    if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("generator {kind:?} has no key {k:?}"));
    }
    let text = |k: &str| -> Result<String, String> {
        string(
            o.get(k)
                .ok_or_else(|| format!("generator {kind:?} needs {k:?}"))?,
            k,
        )
    };
    let count = |k: &str| -> Result<usize, String> {
        o.get(k)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("generator {kind:?} needs {k:?}, a count"))
    };
    Ok(match kind {
        "bytes_inserted" => Generator::BytesInserted {
            from: text("from")?,
            after: text("after")?,
            bytes: hex(&text("hex")?)?,
        },
        "nested" => Generator::Nested {
            prefix: text("prefix")?,
            open: text("open")?,
            close: text("close")?,
            depth: count("depth")?,
            closed: o
                .get("closed")
                .and_then(Value::as_bool)
                .ok_or("generator \"nested\" needs \"closed\", a boolean")?,
            suffix: text("suffix")?,
        },
        _ => Generator::Repeated {
            prefix: text("prefix")?,
            unit: text("unit")?,
            count: count("count")?,
            suffix: text("suffix")?,
        },
    })
}

impl Case {
    /// Reads the case in `dir`.
    ///
    /// # Errors
    ///
    /// A descriptor that cannot be read, is not JSON, or does not follow the format (unknown
    /// keys included, so that a typo cannot switch a check off).
    pub(crate) fn load(dir: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(dir.join(DESCRIPTOR))
            .map_err(|e| format!("cannot read {DESCRIPTOR}: {e}"))?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| format!("{DESCRIPTOR} is not JSON: {e}"))?;
        let o = v
            .as_object()
            .ok_or_else(|| format!("{DESCRIPTOR} must be an object"))?;
        if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!("{DESCRIPTOR} has an unknown key {k:?}"));
        }
        let get = |k: &str| o.get(k).ok_or_else(|| format!("{DESCRIPTOR} needs {k:?}"));
        let expect = match (o.get("code"), o.get("verdict")) {
            (Some(code), None) => Expect::Error(string(code, "code")?),
            (None, Some(codes)) => Expect::Verdict(strings(codes, "verdict")?),
            _ => {
                return Err(format!(
                    "{DESCRIPTOR} needs exactly one of code and verdict"
                ));
            }
        };
        let status = get("status")?
            .as_i64()
            .and_then(|s| i32::try_from(s).ok())
            .filter(|s| (1..=255).contains(s))
            .ok_or("status must be a non-zero exit status")?;
        let generate = match o.get("generate") {
            None => Vec::new(),
            Some(g) => g
                .as_object()
                .ok_or("generate must be an object from file name to generator")?
                .iter()
                .map(|(file, spec)| {
                    generator(spec)
                        .map(|g| (file.clone(), g))
                        .map_err(|e| format!("generate {file:?}: {e}"))
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Self {
            name: dir
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or("a case folder needs a UTF-8 name")?
                .to_owned(),
            dir: dir.to_owned(),
            about: string(get("about")?, "about")?,
            args: strings(get("args")?, "args")?,
            stdin: o.get("stdin").map(|s| string(s, "stdin")).transpose()?,
            stdout: o.get("stdout").map(|s| string(s, "stdout")).transpose()?,
            generate,
            expect,
            status,
            details: match o.get("details") {
                None => Map::new(),
                Some(d) => d.as_object().ok_or("details must be an object")?.clone(),
            },
            message_contains: o
                .get("message_contains")
                .map(|s| string(s, "message_contains"))
                .transpose()?,
            untouched: o
                .get("untouched")
                .map(|u| strings(u, "untouched"))
                .transpose()?
                .unwrap_or_default(),
            planted: match o.get("planted") {
                None => true,
                Some(p) => p.as_bool().ok_or("planted must be a boolean")?,
            },
            xfail: o.get("xfail").map(|x| string(x, "xfail")).transpose()?,
        })
    }

    /// The committed input files (everything in the folder but the descriptor), by name.
    pub(crate) fn inputs(&self) -> Vec<(String, PathBuf)> {
        let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(&self.dir)
            .expect("a case folder can be listed")
            .map(|e| e.expect("a case folder entry can be read").path())
            .filter(|p| p.is_file())
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?.to_owned();
                (name != DESCRIPTOR).then_some((name, p))
            })
            .collect();
        files.sort();
        files
    }

    /// Whether the case plants the secret: in a committed input, on standard input, or in the
    /// text a generator writes.
    pub(crate) fn plants(&self, secret: &str) -> bool {
        let committed = self.inputs().iter().any(|(_, p)| {
            crate::process::contains(
                &std::fs::read(p).expect("a case input can be read"),
                secret.as_bytes(),
            )
        });
        let generated = self.generate.iter().any(|(_, g)| match g {
            Generator::BytesInserted { .. } => false,
            Generator::Nested { prefix, suffix, .. } => {
                prefix.contains(secret) || suffix.contains(secret)
            }
            Generator::Repeated {
                prefix,
                unit,
                suffix,
                ..
            } => prefix.contains(secret) || unit.contains(secret) || suffix.contains(secret),
        });
        committed || generated || self.stdin.as_deref().is_some_and(|s| s.contains(secret))
    }
}

/// Writes what `generator` describes to `out`; `dir` is the case folder its sources are in.
///
/// # Errors
///
/// A source that cannot be read or does not hold the text to insert after; a file that cannot
/// be written.
pub(crate) fn generate(generator: &Generator, dir: &Path, out: &Path) -> Result<(), String> {
    let file = File::create(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let io = |e: std::io::Error| format!("cannot write {}: {e}", out.display());
    match generator {
        Generator::BytesInserted { from, after, bytes } => {
            let source =
                std::fs::read(dir.join(from)).map_err(|e| format!("cannot read {from}: {e}"))?;
            let at = if after.is_empty() {
                0
            } else {
                source
                    .windows(after.len())
                    .position(|win| win == after.as_bytes())
                    .ok_or_else(|| format!("{from} does not contain {after:?}"))?
                    + after.len()
            };
            w.write_all(&source[..at]).map_err(io)?;
            w.write_all(bytes).map_err(io)?;
            w.write_all(&source[at..]).map_err(io)?;
        }
        Generator::Nested {
            prefix,
            open,
            close,
            depth,
            closed,
            suffix,
        } => {
            w.write_all(prefix.as_bytes()).map_err(io)?;
            w.write_all(open.repeat(*depth).as_bytes()).map_err(io)?;
            if *closed {
                w.write_all(close.repeat(*depth).as_bytes()).map_err(io)?;
            }
            w.write_all(suffix.as_bytes()).map_err(io)?;
        }
        Generator::Repeated {
            prefix,
            unit,
            count,
            suffix,
        } => {
            w.write_all(prefix.as_bytes()).map_err(io)?;
            // Whole chunks of units, so that a 200 MiB file is a few hundred writes.
            let per_chunk = ((1 << 20) / unit.len().max(1)).max(1);
            let chunk = unit.repeat(per_chunk);
            let mut left = *count;
            while left >= per_chunk {
                w.write_all(chunk.as_bytes()).map_err(io)?;
                left -= per_chunk;
            }
            w.write_all(unit.repeat(left).as_bytes()).map_err(io)?;
            w.write_all(suffix.as_bytes()).map_err(io)?;
        }
    }
    w.flush().map_err(io)
}

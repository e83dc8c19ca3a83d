//! `cargo xtask layering`: the crate graph against `[workspace.metadata.layering]`.
//!
//! The input is `cargo metadata --format-version 1 --no-deps`: every member with its declared
//! `dependencies[]` (`name` is the real package name even when renamed, `kind` is `null` for
//! normal, `"dev"` or `"build"`) and `manifest_path`, plus the root `[workspace.metadata]` table
//! verbatim under the top-level `"metadata"` key. The rules, all collected before failing:
//!
//! 1. every member is in `order` or `tooling`;
//! 2. every name in `order`, `pure` and `tooling` is a member (no stale entries), and every
//!    `pure` crate is layered;
//! 3. every edge between members, of any kind, points strictly down the `order` and never at a
//!    tooling crate (cargo allows dev-dependency cycles, so this is the only guard against
//!    test-only upward coupling);
//! 4. every edge to a non-member is listed in `external.<kind>`; tooling crates are exempt;
//! 5. a crate named in `reach` has normal dependencies on the members its list names and no
//!    other (a front end that calls the operations library and nothing below it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

/// Runs `cargo metadata` in `root` and checks the layering rules.
///
/// Returns the one-line summary on success, the full failure report otherwise.
pub(crate) fn run(root: &Path) -> Result<String, String> {
    let metadata = crate::cargo_metadata(root, &[])?;
    check_metadata(&metadata)
}

/// Parses `cargo metadata` output and checks the layering rules against it.
pub(crate) fn check_metadata(metadata: &Value) -> Result<String, String> {
    let workspace = Workspace::from_metadata(metadata)
        .map_err(|error| format!("layering check failed: {error}"))?;
    check(&workspace)
}

/// The kind of a dependency edge, as `cargo metadata` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// `[dependencies]`; `"kind": null` in the metadata.
    Normal,
    /// `[dev-dependencies]`.
    Dev,
    /// `[build-dependencies]`.
    Build,
}

impl Kind {
    /// Reads the `kind` field of a metadata dependency.
    fn from_json(kind: &Value) -> Result<Self, String> {
        match kind {
            Value::Null => Ok(Self::Normal),
            Value::String(kind) if kind == "normal" => Ok(Self::Normal),
            Value::String(kind) if kind == "dev" => Ok(Self::Dev),
            Value::String(kind) if kind == "build" => Ok(Self::Build),
            other => Err(format!("unknown dependency kind {other}")),
        }
    }

    /// The name used in messages and as the key under `external`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Dev => "dev",
            Self::Build => "build",
        }
    }
}

/// One declared dependency of a workspace member.
#[derive(Clone, Debug)]
pub(crate) struct Dependency {
    /// The real package name (not the `rename`).
    pub(crate) name: String,
    /// Normal, dev or build.
    pub(crate) kind: Kind,
}

/// A workspace member as `cargo metadata --no-deps` describes it.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    /// The package name.
    pub(crate) name: String,
    /// The absolute path of its `Cargo.toml`.
    pub(crate) manifest_path: String,
    /// Its declared dependencies, every kind.
    pub(crate) dependencies: Vec<Dependency>,
}

/// The `[workspace.metadata.layering]` table of the root `Cargo.toml`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layering {
    /// Layered crates, lowest layer first.
    pub(crate) order: Vec<String>,
    /// Crates that may do no I/O, read no clock, environment or randomness.
    pub(crate) pure: Vec<String>,
    /// Crates outside the layers that nothing depends on.
    pub(crate) tooling: Vec<String>,
    /// Allowed non-member dependencies, per dependency kind.
    pub(crate) external: BTreeMap<Kind, Vec<String>>,
    /// Non-member dependencies that only the named crates may take (of any kind): `clap` for
    /// the binary alone, so no library grows a command line's types.
    pub(crate) only: BTreeMap<String, Vec<String>>,
    /// The members a crate may take as normal dependencies, and no other: `cutctx-serve`
    /// reaches the layers through `cutctx-ops` alone.
    pub(crate) reach: BTreeMap<String, Vec<String>>,
}

/// The workspace members together with the layering table.
#[derive(Clone, Debug)]
pub(crate) struct Workspace {
    /// Every workspace member, in metadata order.
    pub(crate) members: Vec<Member>,
    /// The declared architecture.
    pub(crate) layering: Layering,
}

impl Workspace {
    /// Reads the members and the layering table out of `cargo metadata` output.
    ///
    /// Fails only on malformed input (a missing `order`, a non-string entry, an unknown
    /// dependency kind); rule violations are left to [`check`].
    pub(crate) fn from_metadata(metadata: &Value) -> Result<Self, String> {
        let table = metadata
            .get("metadata")
            .and_then(|metadata| metadata.get("layering"))
            .filter(|table| table.is_object())
            .ok_or("the root Cargo.toml has no [workspace.metadata.layering] table")?;
        let order = string_list(table.get("order"), "order")?
            .ok_or("[workspace.metadata.layering] has no `order` list")?;
        // An absent list names no crate.
        let pure = string_list(table.get("pure"), "pure")?.unwrap_or_default();
        let tooling = string_list(table.get("tooling"), "tooling")?.unwrap_or_default();
        let external_table = table.get("external");
        let mut external = BTreeMap::new();
        for kind in [Kind::Normal, Kind::Dev, Kind::Build] {
            let key = format!("external.{}", kind.as_str());
            let list = string_list(external_table.and_then(|t| t.get(kind.as_str())), &key)?;
            // An absent list allows no external crate of that kind.
            external.insert(kind, list.unwrap_or_default());
        }
        let only = name_lists(table.get("only"), "only")?;
        let reach = name_lists(table.get("reach"), "reach")?;

        let member_ids: Option<BTreeSet<&str>> = metadata
            .get("workspace_members")
            .and_then(Value::as_array)
            .map(|ids| ids.iter().filter_map(Value::as_str).collect());
        let packages = metadata
            .get("packages")
            .and_then(Value::as_array)
            .ok_or("`cargo metadata` output has no `packages` array")?;
        let mut members = Vec::new();
        for package in packages {
            let id = package.get("id").and_then(Value::as_str);
            if let (Some(ids), Some(id)) = (&member_ids, id)
                && !ids.contains(id)
            {
                continue;
            }
            members.push(member_from_json(package)?);
        }
        Ok(Self {
            members,
            layering: Layering {
                order,
                pure,
                tooling,
                external,
                only,
                reach,
            },
        })
    }
}

/// Reads one package of the metadata.
fn member_from_json(package: &Value) -> Result<Member, String> {
    let field = |key: &str| {
        package
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("a package in `cargo metadata` output has no string `{key}`"))
    };
    let name = field("name")?;
    let manifest_path = field("manifest_path")?;
    let mut dependencies = Vec::new();
    if let Some(deps) = package.get("dependencies").and_then(Value::as_array) {
        for dep in deps {
            let dep_name = dep
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a dependency of `{name}` has no `name`"))?;
            let kind = Kind::from_json(dep.get("kind").unwrap_or(&Value::Null))
                .map_err(|error| format!("dependency `{dep_name}` of `{name}`: {error}"))?;
            dependencies.push(Dependency {
                name: dep_name.to_owned(),
                kind,
            });
        }
    }
    Ok(Member {
        name,
        manifest_path,
        dependencies,
    })
}

/// Reads an optional list of strings from the layering table.
/// A table of crate name to a list of crate names (`only`, `reach`); empty when absent.
fn name_lists(value: Option<&Value>, key: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut out = BTreeMap::new();
    let Some(table) = value else {
        return Ok(out);
    };
    let table = table
        .as_object()
        .ok_or_else(|| format!("[workspace.metadata.layering.{key}] is not a table"))?;
    for (name, crates) in table {
        let entry = format!("{key}.{name}");
        let crates = string_list(Some(crates), &entry)?
            .ok_or_else(|| format!("`{entry}` is not a list of crate names"))?;
        out.insert(name.clone(), crates);
    }
    Ok(out)
}

fn string_list(value: Option<&Value>, key: &str) -> Result<Option<Vec<String>>, String> {
    let Some(value) = value else {
        return Ok(None);
    };
    let items = value
        .as_array()
        .ok_or_else(|| format!("`{key}` in [workspace.metadata.layering] is not a list"))?;
    items
        .iter()
        .map(|item| {
            item.as_str().map(str::to_owned).ok_or_else(|| {
                format!("`{key}` in [workspace.metadata.layering] has a non-string entry {item}")
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Checks every layering rule, collecting all problems before failing.
///
/// Returns `layering: N crates, M internal edges, all downward` on success, or the failure
/// report listing every problem and the allowed order.
pub(crate) fn check(workspace: &Workspace) -> Result<String, String> {
    let layering = &workspace.layering;
    let members: BTreeSet<&str> = workspace.members.iter().map(|m| m.name.as_str()).collect();
    let tooling: BTreeSet<&str> = layering.tooling.iter().map(String::as_str).collect();
    let mut rank: BTreeMap<&str, usize> = BTreeMap::new();
    let mut problems = Vec::new();

    for (layer, name) in layering.order.iter().enumerate() {
        if rank.contains_key(name.as_str()) {
            problems.push(format!(
                "error: `{name}` appears more than once in `order`\n  \
                 = help: a crate sits at exactly one layer"
            ));
        } else {
            rank.insert(name, layer);
        }
    }

    // Rule 1: every member is layered or tooling.
    for member in &workspace.members {
        let name = member.name.as_str();
        let ranked = rank.contains_key(name);
        let is_tooling = tooling.contains(name);
        if !ranked && !is_tooling {
            problems.push(format!(
                "error: workspace member `{name}` is in neither `order` nor `tooling`\n  \
                 --> {}\n  \
                 = help: add it to `order` at its layer, or to `tooling` if no crate depends on it",
                member.manifest_path
            ));
        } else if ranked && is_tooling {
            problems.push(format!(
                "error: `{name}` is in both `order` and `tooling`\n  \
                 --> {}\n  \
                 = help: a crate is either layered or tooling",
                member.manifest_path
            ));
        }
    }

    // Rule 2: no stale names; pure crates are layered.
    for (list, names) in [
        ("order", &layering.order),
        ("pure", &layering.pure),
        ("tooling", &layering.tooling),
    ] {
        for name in names {
            if !members.contains(name.as_str()) {
                problems.push(format!(
                    "error: `{name}` is listed in `{list}` but is not a workspace member\n  \
                     = help: remove the stale entry or fix its spelling"
                ));
            }
        }
    }
    for name in &layering.pure {
        if members.contains(name.as_str()) && !rank.contains_key(name.as_str()) {
            problems.push(format!(
                "error: `{name}` is listed in `pure` but not in `order`\n  \
                 = help: pure crates are layered crates; add it to `order`"
            ));
        }
    }

    // Rules 3 and 4: every edge.
    let mut internal_edges = 0usize;
    for member in &workspace.members {
        let from = member.name.as_str();
        let from_tooling = tooling.contains(from);
        for dep in &member.dependencies {
            let to = dep.name.as_str();
            let kind = dep.kind.as_str();
            if members.contains(to) {
                internal_edges += 1;
                if tooling.contains(to) {
                    problems.push(format!(
                        "error: layering violation: `{from}`{} has a {kind} dependency on `{to}`, \
                         which is tooling\n  \
                         --> {}\n  \
                         = help: tooling crates sit outside the layers; nothing may depend on them",
                        layer_suffix(rank.get(from)),
                        member.manifest_path
                    ));
                } else if let (Some(&from_layer), Some(&to_layer)) = (rank.get(from), rank.get(to))
                    && to_layer >= from_layer
                    && !from_tooling
                {
                    problems.push(format!(
                        "error: layering violation: `{from}` (layer {from_layer}) has a {kind} \
                         dependency on `{to}` (layer {to_layer})\n  \
                         --> {}\n  \
                         = help: `{to}` is not below `{from}`; move the shared item down or \
                         invert the dependency",
                        member.manifest_path
                    ));
                }
                if let Some(reach) = layering.reach.get(from)
                    && dep.kind == Kind::Normal
                    && !reach.iter().any(|r| r == to)
                {
                    problems.push(format!(
                        "error: `{from}` has a normal dependency on `{to}`, outside its reach \
                         ({})\n  \
                         --> {}\n  \
                         = help: reach `{to}`'s items through what `{from}` may depend on, or \
                         add `{to}` to `reach.{from}` in [workspace.metadata.layering] if it \
                         belongs",
                        reach.join(", "),
                        member.manifest_path
                    ));
                }
                // An unranked end is already reported by rule 1; tooling may use any layer.
            } else if !from_tooling {
                if let Some(owners) = layering.only.get(to)
                    && !owners.iter().any(|owner| owner == from)
                {
                    problems.push(format!(
                        "error: `{from}` has a {kind} dependency on `{to}`, which only {} may \
                         take\n  \
                         --> {}\n  \
                         = help: reach what it needs through a crate below, or add `{from}` to \
                         `only.{to}` in [workspace.metadata.layering] if it belongs",
                        owners
                            .iter()
                            .map(|o| format!("`{o}`"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        member.manifest_path
                    ));
                }
                let allowed = layering
                    .external
                    .get(&dep.kind)
                    .is_some_and(|list| list.iter().any(|name| name == to));
                if !allowed {
                    problems.push(format!(
                        "error: `{from}` has a {kind} dependency on `{to}`, which is not in \
                         `external.{kind}`\n  \
                         --> {}\n  \
                         = help: add `{to}` to `external.{kind}` in \
                         [workspace.metadata.layering] if it belongs, or drop the dependency",
                        member.manifest_path
                    ));
                }
            }
        }
    }

    if problems.is_empty() {
        Ok(format!(
            "layering: {} crates, {internal_edges} internal edges, all downward",
            workspace.members.len()
        ))
    } else {
        Err(format!(
            "layering check failed ({} problem(s)):\n\n{}\n\nallowed order, lowest first: {}\n\
             (declared in [workspace.metadata.layering] of the root Cargo.toml)",
            problems.len(),
            problems.join("\n\n"),
            layering.order.join(" < ")
        ))
    }
}

/// ` (layer N)` for a layered crate, nothing otherwise.
fn layer_suffix(layer: Option<&usize>) -> String {
    layer.map_or_else(String::new, |layer| format!(" (layer {layer})"))
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::PathBuf;
    use std::time::{SystemTime, UNIX_EPOCH};

    use serde_json::{Value, json};

    use super::check_metadata;

    /// The layered crates of the fixture, lowest first.
    const ORDER: [&str; 6] = [
        "cutctx-model",
        "cutctx-invariants",
        "cutctx-policies",
        "cutctx-executor",
        "cutctx",
        "cutctx-cli",
    ];

    /// A dependency entry as `cargo metadata` prints it.
    fn dep(name: &str, kind: Option<&str>) -> Value {
        json!({ "name": name, "kind": kind, "req": "^0.1.0", "rename": null, "target": null })
    }

    /// A package entry as `cargo metadata --no-deps` prints it.
    fn package(name: &str, dependencies: Vec<Value>) -> Value {
        let dir = if name == "xtask" {
            "/ws/xtask".to_owned()
        } else {
            format!("/ws/crates/{name}")
        };
        json!({
            "name": name,
            "version": "0.1.0",
            "id": format!("path+file://{dir}#{name}@0.1.0"),
            "manifest_path": format!("{dir}/Cargo.toml"),
            "dependencies": dependencies,
            "targets": [],
        })
    }

    /// A whole metadata document with the given packages and the fixture layering table.
    fn metadata(packages: Vec<Value>, order: &[&str]) -> Value {
        let ids: Vec<Value> = packages.iter().map(|p| p["id"].clone()).collect();
        json!({
            "packages": packages,
            "workspace_members": ids,
            "workspace_root": "/ws",
            "resolve": null,
            "metadata": {
                "layering": {
                    "order": order,
                    "pure": ["cutctx-model", "cutctx-invariants", "cutctx-policies", "cutctx-executor"],
                    "tooling": ["xtask"],
                    "external": {
                        "normal": ["serde", "serde_json", "sha2", "thiserror", "clap"],
                        "dev": ["serde", "serde_json", "proptest", "criterion"],
                        "build": [],
                    },
                    "only": { "clap": ["cutctx-cli"] },
                },
            },
        })
    }

    /// A clean workspace: every edge downward, every external dependency allowed.
    fn clean_packages() -> Vec<Value> {
        vec![
            package(
                "cutctx-model",
                vec![
                    dep("serde", None),
                    dep("sha2", None),
                    dep("proptest", Some("dev")),
                ],
            ),
            package(
                "cutctx-invariants",
                vec![dep("cutctx-model", None), dep("thiserror", None)],
            ),
            package(
                "cutctx-policies",
                vec![
                    dep("cutctx-model", None),
                    dep("cutctx-invariants", None),
                    dep("criterion", Some("dev")),
                ],
            ),
            package(
                "cutctx-executor",
                vec![
                    dep("cutctx-model", None),
                    dep("cutctx-invariants", None),
                    dep("cutctx-policies", Some("dev")),
                ],
            ),
            package(
                "cutctx",
                vec![dep("cutctx-executor", None), dep("cutctx-policies", None)],
            ),
            package("cutctx-cli", vec![dep("cutctx", None), dep("clap", None)]),
            package(
                "xtask",
                vec![dep("serde_json", None), dep("anything", None)],
            ),
        ]
    }

    /// Adds a dependency to the named fixture package.
    fn plant(packages: &mut [Value], from: &str, dependency: Value) {
        let package = packages
            .iter_mut()
            .find(|p| p["name"] == from)
            .expect("the fixture has this package");
        package["dependencies"]
            .as_array_mut()
            .expect("dependencies is an array")
            .push(dependency);
    }

    #[test]
    fn clean_fixture_passes() {
        let summary =
            check_metadata(&metadata(clean_packages(), &ORDER)).expect("the clean fixture passes");
        assert_eq!(
            summary,
            "layering: 7 crates, 9 internal edges, all downward"
        );
    }

    #[test]
    fn upward_normal_edge_fails_naming_both_crates_layers_kind_and_manifest() {
        let mut packages = clean_packages();
        plant(&mut packages, "cutctx-model", dep("cutctx-executor", None));
        let report = check_metadata(&metadata(packages, &ORDER)).expect_err("an upward edge");
        assert!(
            report.starts_with("layering check failed (1 problem(s)):"),
            "{report}"
        );
        assert!(
            report.contains(
                "error: layering violation: `cutctx-model` (layer 0) has a normal dependency \
                 on `cutctx-executor` (layer 3)"
            ),
            "{report}"
        );
        assert!(
            report.contains("  --> /ws/crates/cutctx-model/Cargo.toml"),
            "{report}"
        );
        assert!(
            report.contains("allowed order, lowest first: cutctx-model < cutctx-invariants"),
            "{report}"
        );
    }

    #[test]
    fn upward_dev_edge_fails() {
        let mut packages = clean_packages();
        plant(
            &mut packages,
            "cutctx-invariants",
            dep("cutctx-executor", Some("dev")),
        );
        let report = check_metadata(&metadata(packages, &ORDER)).expect_err("an upward dev edge");
        assert!(
            report.contains(
                "`cutctx-invariants` (layer 1) has a dev dependency on `cutctx-executor` (layer 3)"
            ),
            "{report}"
        );
        assert!(
            report.contains("/ws/crates/cutctx-invariants/Cargo.toml"),
            "{report}"
        );
    }

    #[test]
    fn upward_build_edge_fails() {
        let mut packages = clean_packages();
        plant(
            &mut packages,
            "cutctx-policies",
            dep("cutctx", Some("build")),
        );
        let report = check_metadata(&metadata(packages, &ORDER)).expect_err("an upward build edge");
        assert!(
            report.contains(
                "`cutctx-policies` (layer 2) has a build dependency on `cutctx` (layer 4)"
            ),
            "{report}"
        );
    }

    #[test]
    fn edge_onto_tooling_fails() {
        let mut packages = clean_packages();
        plant(&mut packages, "cutctx-cli", dep("xtask", Some("dev")));
        let report = check_metadata(&metadata(packages, &ORDER)).expect_err("an edge to xtask");
        assert!(
            report.contains(
                "`cutctx-cli` (layer 5) has a dev dependency on `xtask`, which is tooling"
            ),
            "{report}"
        );
    }

    #[test]
    fn member_missing_from_order_fails() {
        let order = &ORDER[..5]; // drops cutctx-cli
        let report =
            check_metadata(&metadata(clean_packages(), order)).expect_err("an unlisted member");
        assert!(
            report.contains("workspace member `cutctx-cli` is in neither `order` nor `tooling`"),
            "{report}"
        );
        assert!(
            report.contains("/ws/crates/cutctx-cli/Cargo.toml"),
            "{report}"
        );
    }

    #[test]
    fn stale_name_in_order_fails() {
        let mut order = ORDER.to_vec();
        order.insert(2, "cutctx-planner");
        let report =
            check_metadata(&metadata(clean_packages(), &order)).expect_err("a stale entry");
        assert!(
            report.contains("`cutctx-planner` is listed in `order` but is not a workspace member"),
            "{report}"
        );
    }

    #[test]
    fn stale_name_in_pure_fails() {
        let mut doc = metadata(clean_packages(), &ORDER);
        doc["metadata"]["layering"]["pure"] = json!(["cutctx-model", "cutctx-modle"]);
        let report = check_metadata(&doc).expect_err("a stale pure entry");
        assert!(
            report.contains("`cutctx-modle` is listed in `pure` but is not a workspace member"),
            "{report}"
        );
    }

    #[test]
    fn a_crate_reserved_for_the_binary_fails_anywhere_else() {
        let mut packages = clean_packages();
        plant(&mut packages, "cutctx", dep("clap", None));
        let report =
            check_metadata(&metadata(packages, &ORDER)).expect_err("clap outside the binary");
        assert!(report.contains("(1 problem(s))"), "{report}");
        assert!(
            report.contains(
                "`cutctx` has a normal dependency on `clap`, which only `cutctx-cli` may take"
            ),
            "{report}"
        );
    }

    #[test]
    fn a_crate_with_a_reach_depends_on_nothing_else_but_its_tests_may() {
        let mut packages = clean_packages();
        plant(&mut packages, "cutctx-cli", dep("cutctx-model", None));
        plant(
            &mut packages,
            "cutctx-cli",
            dep("cutctx-invariants", Some("dev")),
        );
        let mut doc = metadata(packages, &ORDER);
        doc["metadata"]["layering"]["reach"] = json!({"cutctx-cli": ["cutctx"]});
        let report = check_metadata(&doc).expect_err("a normal edge outside the reach");
        assert!(report.contains("(1 problem(s))"), "{report}");
        assert!(
            report.contains(
                "`cutctx-cli` has a normal dependency on `cutctx-model`, outside its reach (cutctx)"
            ),
            "{report}"
        );
    }

    #[test]
    fn external_crate_not_in_allow_list_fails() {
        let mut packages = clean_packages();
        plant(&mut packages, "cutctx-model", dep("anyhow", None));
        // Allowed for dev only, so a normal edge still fails.
        plant(&mut packages, "cutctx-invariants", dep("proptest", None));
        let report =
            check_metadata(&metadata(packages, &ORDER)).expect_err("unlisted external crates");
        assert!(report.contains("(2 problem(s))"), "{report}");
        assert!(
            report.contains(
                "`cutctx-model` has a normal dependency on `anyhow`, which is not in \
                 `external.normal`"
            ),
            "{report}"
        );
        assert!(
            report.contains(
                "`cutctx-invariants` has a normal dependency on `proptest`, which is not in \
                 `external.normal`"
            ),
            "{report}"
        );
    }

    #[test]
    fn all_problems_are_collected() {
        let mut packages = clean_packages();
        plant(&mut packages, "cutctx-model", dep("cutctx", None));
        plant(&mut packages, "cutctx-model", dep("rand", Some("dev")));
        let report = check_metadata(&metadata(packages, &ORDER[..5])).expect_err("three problems");
        assert!(
            report.starts_with("layering check failed (3 problem(s)):"),
            "{report}"
        );
    }

    #[test]
    fn missing_layering_table_is_an_error() {
        let mut doc = metadata(clean_packages(), &ORDER);
        doc["metadata"] = Value::Null;
        let report = check_metadata(&doc).expect_err("no table");
        assert!(report.contains("[workspace.metadata.layering]"), "{report}");
    }

    /// The real workspace obeys its own layering, so `cargo test --workspace` enforces it.
    #[test]
    fn real_workspace_is_layered() {
        if let Err(report) = super::run(&crate::project_root()) {
            panic!("{report}");
        }
    }

    /// Removes a temporary directory when dropped, even if the test panics.
    struct TempDir(PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            // Best effort: a leftover directory in the system temp dir is harmless.
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// Copies the real workspace's manifests (with stub sources for every target) into a temp
    /// dir, plants `cutctx-model -> cutctx-executor`, and checks that real `cargo metadata`
    /// output of that copy fails the layering check.
    #[test]
    fn planted_upward_edge_in_a_copy_of_the_workspace_fails() {
        let real = crate::cargo_metadata(&crate::project_root(), &["--offline"])
            .expect("cargo metadata runs on the real workspace");
        let real_root = PathBuf::from(
            real["workspace_root"]
                .as_str()
                .expect("metadata has a workspace_root"),
        );
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_nanos();
        let temp = TempDir(std::env::temp_dir().join(format!(
            "cutctx-xtask-layering-{}-{nanos}",
            std::process::id()
        )));
        fs::create_dir_all(&temp.0).expect("create the temp workspace");
        fs::copy(real_root.join("Cargo.toml"), temp.0.join("Cargo.toml"))
            .expect("copy the root manifest");

        let mut model_manifest = None;
        for package in real["packages"].as_array().expect("packages is an array") {
            let manifest = PathBuf::from(
                package["manifest_path"]
                    .as_str()
                    .expect("a package has a manifest_path"),
            );
            let relative = manifest
                .strip_prefix(&real_root)
                .expect("members live under the workspace root");
            let copied = temp.0.join(relative);
            fs::create_dir_all(copied.parent().expect("a manifest has a parent directory"))
                .expect("create the member directory");
            fs::copy(&manifest, &copied).expect("copy a member manifest");
            // Cargo needs every target's source file to exist, not to compile.
            for target in package["targets"].as_array().expect("targets is an array") {
                let src = PathBuf::from(
                    target["src_path"]
                        .as_str()
                        .expect("a target has a src_path"),
                );
                let stub = temp.0.join(
                    src.strip_prefix(&real_root)
                        .expect("sources live under the workspace root"),
                );
                fs::create_dir_all(stub.parent().expect("a source has a parent directory"))
                    .expect("create the source directory");
                fs::write(&stub, "//! Stub.\n").expect("write a stub source");
            }
            if package["name"] == "cutctx-model" {
                model_manifest = Some(copied);
            }
        }

        let model_manifest = model_manifest.expect("the workspace has cutctx-model");
        let text = fs::read_to_string(&model_manifest).expect("read the copied manifest");
        let planted_line = "cutctx-executor = { workspace = true }";
        let planted = if text.lines().any(|line| line.trim() == "[dependencies]") {
            text.lines()
                .map(|line| {
                    if line.trim() == "[dependencies]" {
                        format!("{line}\n{planted_line}\n")
                    } else {
                        format!("{line}\n")
                    }
                })
                .collect::<String>()
        } else {
            format!("{text}\n[dependencies]\n{planted_line}\n")
        };
        fs::write(&model_manifest, planted).expect("plant the upward edge");

        let copy = crate::cargo_metadata(&temp.0, &["--offline"])
            .expect("cargo metadata runs on the copied workspace");
        let report = check_metadata(&copy).expect_err("the planted upward edge fails");
        assert!(
            report
                .contains("`cutctx-model` (layer 1) has a normal dependency on `cutctx-executor`"),
            "{report}"
        );
        let relative = model_manifest
            .strip_prefix(&temp.0)
            .expect("the copy lives in the temp dir");
        assert!(report.contains(&relative.display().to_string()), "{report}");
    }
}

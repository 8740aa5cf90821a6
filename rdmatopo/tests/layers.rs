//! The crate's layers (ARCHITECTURE.md), checked over the module graph of
//! `rdmatopo/src` read from its `crate::`, `rdmatopo::` and `super::` paths (code and
//! doc comments alike: a doc link is a dependency too; `#[cfg(test)]` code is left
//! out, tests may build fixtures from anywhere).
//!
//! Rules: every top-level module is on a layer; no module imports a layer above its
//! own; no import cycle between top-level modules, nor between the children of one,
//! nor between the modules of a front end's crate; no module takes an item of a parent that
//! names it; `std::fs` only in `sysfs`, `snapshot` and the CLI (which reads and writes
//! the files its user names); no filesystem, environment, process or clock in `view`,
//! `checks` or `export`; and no front end (the CLI, `rdmatopo-py`, `rdmatopo-c`) answers
//! what the facade (`view::devices`) answers. Each rule is shown to fail on a small
//! synthetic tree below.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first. A module may import its own layer's and lower layers'
/// modules. The crate root (`lib.rs`: `discover()`, `Error`, `inventory_json`) wires
/// the layers together, so it sits under the front ends only.
const LAYERS: &[(&str, u32)] = &[
    ("sysfs", 0),
    ("parse", 0),
    // The public error's kinds: data, importing nothing; each layer says beside its own
    // error how it becomes one.
    ("error", 0),
    ("model", 1),
    // The JSON Schemas of the model's documents: data, importing nothing.
    ("schemas", 1),
    ("sources", 2),
    ("snapshot", 3),
    ("discover", 4),
    ("view", 5),
    ("checks", 6),
    ("export", 7),
    (ROOT, 8),
    // The public API (re-exported at the root): calls the layers, answers nothing itself.
    ("api", 8),
    ("cli", 9),
    // Programs beside the command (`rdmatopo-nvml`, the static build's NVML helper).
    ("bin", 9),
    ("fuzzing", 9),
];

const ROOT: &str = "(crate root)";

/// Where `std::fs` may be used.
const FS_ALLOWED: &[&str] = &["sysfs", "snapshot", "cli"];

/// Layers that are pure functions of a view: no filesystem, environment, process or
/// clock.
const PURE: &[&str] = &["view", "checks", "export"];

/// What the facade answers; a front end that calls these is answering it again.
const FACADE_ONLY: &[(&str, &str)] = &[
    (
        "path_class(",
        "the class between two devices: Devices::class_between",
    ),
    (
        "numa_of(",
        "the NUMA node of a GPU or NIC: Devices::gpu_numa / nic_numa",
    ),
    (
        "nearest_devices(",
        "the nearest NICs: Devices::nearest_nics",
    ),
    (
        "LOCAL_RANK_VARS.iter()",
        "which local rank applies: Devices::rank_plan",
    ),
    (
        "LOCAL_SIZE_VARS.iter()",
        "which local rank applies: Devices::rank_plan",
    ),
    (
        "rdma_devices.iter().position(",
        "finding a NIC by name: Devices::nic_position",
    ),
    (
        "gpus.iter().position(",
        "finding a GPU by bus id: Devices::gpu_position",
    ),
];

/// One source file: its module path (`["view", "plan"]`; `[]` for lib.rs) and text.
struct Source {
    file: String,
    module: Vec<String>,
    text: String,
}

fn module_path(rel: &str) -> Vec<String> {
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of `text` before its first `#[cfg(test)]` item with a body (the tests
/// module at the end of a file), with `#[cfg(test)] mod x;` lines removed.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            match lines.peek() {
                Some(next) if next.trim_end().ends_with(';') => {
                    lines.next();
                    continue;
                }
                _ => break,
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Files declared under `#[cfg(test)]` (`mod tests;`, `mod testkit;`), by path.
fn test_only_files(files: &BTreeMap<String, String>) -> BTreeSet<String> {
    let decl =
        Regex::new(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").expect("regex");
    let mut out = BTreeSet::new();
    for (file, text) in files {
        // Where the children of this file's module live.
        let dir = if file.ends_with("mod.rs") || file == "lib.rs" || file == "main.rs" {
            file.rsplit_once('/')
                .map_or(String::new(), |(d, _)| d.to_string())
        } else {
            file.strip_suffix(".rs").unwrap_or(file).to_string()
        };
        for c in decl.captures_iter(text) {
            let name = &c[1];
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            out.insert(format!("{prefix}{name}.rs"));
            out.insert(format!("{prefix}{name}/mod.rs"));
        }
    }
    // Everything below a test-only file is test-only too.
    let dirs: Vec<String> = out
        .iter()
        .map(|f| {
            f.trim_end_matches("/mod.rs")
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    for file in files.keys() {
        if dirs.iter().any(|d| file.starts_with(&format!("{d}/"))) {
            out.insert(file.clone());
        }
    }
    out
}

fn sources(files: &BTreeMap<String, String>) -> Vec<Source> {
    let tests = test_only_files(files);
    files
        .iter()
        .filter(|(f, _)| !tests.contains(*f))
        .map(|(f, t)| Source {
            file: f.clone(),
            module: module_path(f),
            text: without_tests(t),
        })
        .collect()
}

fn layer(top: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == top).map(|(_, f)| *f)
}

/// The names the crate root re-exports (`pub use discover::{Discoverer, Scope}`), with
/// the top-level module each comes from.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let re = Regex::new(r"(?m)^pub use (\w+)::(?:\{([^}]*)\}|(\w+));").expect("regex");
    let mut out = BTreeMap::new();
    for c in re.captures_iter(lib) {
        let names = c.get(2).or(c.get(3)).map_or("", |m| m.as_str());
        for n in names.split(',') {
            let n = n.trim();
            if !n.is_empty() {
                out.insert(n.to_string(), c[1].to_string());
            }
        }
    }
    out
}

/// Module paths (`["view", "plan", "Plan"]`) that `src` names, resolved to absolute
/// segment lists: `crate::…`, `super::…`, and each entry of a `{…}` group; in the
/// binary's modules (`cli`) also `rdmatopo::…`. Elsewhere `rdmatopo::` is a doc
/// example written as a user of the crate would.
fn paths(src: &Source) -> Vec<Vec<String>> {
    let start = Regex::new(r"\b(?:crate::|rdmatopo::|(?:super::)+)").expect("regex");
    let in_binary = src.module.first().is_some_and(|m| m == "cli" || m == "bin");
    let text = &src.text;
    let mut out = Vec::new();
    for m in start.find_iter(text) {
        let head = m.as_str();
        if head == "rdmatopo::" && !in_binary {
            continue;
        }
        let prefix: Vec<String> = if head.starts_with("super") {
            let ups = head.matches("super").count();
            let keep = src.module.len().saturating_sub(ups);
            src.module[..keep].to_vec()
        } else {
            Vec::new()
        };
        expand(&text[m.end()..], &prefix, &mut out);
    }
    out
}

/// Read a path (or a `{a, b::c}` group) at the start of `rest` below `prefix`.
fn expand(rest: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut segs = prefix.to_vec();
    let mut r = rest;
    loop {
        let ident: String = r
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !ident.is_empty() {
            segs.push(ident.clone());
            r = &r[ident.len()..];
            if let Some(next) = r.strip_prefix("::") {
                r = next;
                continue;
            }
            out.push(segs);
            return;
        }
        if let Some(group) = r.strip_prefix('{') {
            let mut depth = 1;
            let mut end = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let inner = &group[..end];
            let mut depth = 0;
            let mut item_start = 0;
            for (i, c) in inner
                .char_indices()
                .chain(std::iter::once((inner.len(), ',')))
            {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let item = inner[item_start..i].trim();
                        if !item.is_empty() && item != "self" {
                            expand(item, &segs, out);
                        } else if item == "self" {
                            out.push(segs.clone());
                        }
                        item_start = i + 1;
                    }
                    _ => {}
                }
            }
        }
        if !segs.is_empty() && segs.len() > prefix.len() {
            out.push(segs);
        }
        return;
    }
}

/// The top-level module (or [`ROOT`]) that an absolute path names.
fn top_of(path: &[String], reexports: &BTreeMap<String, String>) -> String {
    match path.first() {
        None => ROOT.to_string(),
        Some(first) if layer(first).is_some() => first.clone(),
        Some(first) => reexports
            .get(first)
            .cloned()
            .unwrap_or_else(|| ROOT.to_string()),
    }
}

fn top_of_module(module: &[String]) -> String {
    module.first().cloned().unwrap_or_else(|| ROOT.to_string())
}

/// Cycles of `graph` (its strongly connected parts of two or more nodes).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: order by finish time, then walk the reversed graph.
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) {
        if !seen.insert(n.to_string()) {
            return;
        }
        for m in g.get(n).into_iter().flatten() {
            visit(m, g, seen, order);
        }
        order.push(n.to_string());
    }
    let mut nodes: BTreeSet<String> = graph.keys().cloned().collect();
    nodes.extend(graph.values().flatten().cloned());
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for n in &nodes {
        visit(n, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, bs) in graph {
        for b in bs {
            reversed.entry(b.clone()).or_default().insert(a.clone());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut out = Vec::new();
    for n in order.iter().rev() {
        let mut part = Vec::new();
        visit(n, &reversed, &mut assigned, &mut part);
        if part.len() > 1 {
            part.sort();
            out.push(part);
        }
    }
    out
}

/// Every breach of the rules in the crate sources `files` (paths relative to `src/`)
/// and the binding sources `front_ends` (path, text).
fn violations(files: &BTreeMap<String, String>, front_ends: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    let reexports = root_reexports(files.get("lib.rs").map_or("", String::as_str));
    let srcs = sources(files);
    let mut top_graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut inner_graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for src in &srcs {
        if src.module.is_empty() {
            continue; // lib.rs and main.rs: the root wires the layers.
        }
        let top = top_of_module(&src.module);
        let Some(own) = layer(&top) else {
            out.push(format!("{}: module `{top}` is on no layer", src.file));
            continue;
        };
        for path in paths(src) {
            let target = top_of(&path, &reexports);
            if target != top {
                if let Some(f) = layer(&target)
                    && f > own
                {
                    out.push(format!(
                        "{}: `{top}` imports `{}` from the layer above it (`{target}`)",
                        src.file,
                        path.join("::")
                    ));
                }
                top_graph.entry(top.clone()).or_default().insert(target);
            } else if src.module.len() >= 2 && path.len() >= 2 && path[1] != src.module[1] {
                // Between two children of one top-level module.
                let from = format!("{top}::{}", src.module[1]);
                let to = format!("{top}::{}", path[1]);
                let is_child = srcs
                    .iter()
                    .any(|s| s.module.len() >= 2 && s.module[..2] == path[..2]);
                if is_child {
                    inner_graph.entry(from).or_default().insert(to);
                }
            }
        }
        let code = strip_comments(&src.text);
        if code.contains("std::fs") && !FS_ALLOWED.contains(&top.as_str()) {
            out.push(format!("{}: `std::fs` outside {FS_ALLOWED:?}", src.file));
        }
        if PURE.contains(&top.as_str()) {
            for banned in [
                "std::fs",
                "std::env",
                "std::process",
                "std::time",
                "SystemTime",
                "Instant::now",
            ] {
                if code.contains(banned) {
                    out.push(format!(
                        "{}: `{banned}` in `{top}`, which must be a pure function of its view",
                        src.file
                    ));
                }
            }
        }
        if top == "cli" {
            out.extend(redone_facade(&src.file, &code));
        }
        out.extend(from_parent(src, &code, &srcs));
    }
    for c in cycles(&top_graph) {
        out.push(format!("import cycle between {}", c.join(" <-> ")));
    }
    for c in cycles(&inner_graph) {
        out.push(format!("import cycle between {}", c.join(" <-> ")));
    }
    for (file, text) in front_ends {
        out.extend(redone_facade(file, &strip_comments(&without_tests(text))));
    }
    out
}

/// Items `src` takes from its parent module, in its `code` (a doc link may point
/// anywhere), where the parent names `src` (re-exports or calls it): the two would
/// import each other. What children share lives in a child of its own (`view::error`,
/// `cli::output`); a child that only adds methods to its parent's type (`model::numa`)
/// is named by no one. The crate root's re-exports are the top-level rules' concern.
fn from_parent(src: &Source, code: &str, srcs: &[Source]) -> Vec<String> {
    if src.module.len() < 2 {
        return Vec::new();
    }
    let parent = &src.module[..src.module.len() - 1];
    let own = &src.module[src.module.len() - 1];
    let named = Regex::new(&format!(r"(?:^|[^\w:]){own}::")).expect("regex");
    let parent_names_it = srcs
        .iter()
        .find(|s| s.module == parent)
        .is_some_and(|p| named.is_match(&strip_comments(&p.text)));
    if !parent_names_it {
        return Vec::new();
    }
    let is_child = |name: &str| {
        srcs.iter().any(|s| {
            s.module.len() > parent.len()
                && s.module[..parent.len()] == *parent
                && s.module[parent.len()] == name
        })
    };
    let code = Source {
        file: src.file.clone(),
        module: src.module.clone(),
        text: code.to_string(),
    };
    paths(&code)
        .into_iter()
        .filter(|p| p.len() > parent.len() && p[..parent.len()] == *parent)
        .filter(|p| !is_child(&p[parent.len()]))
        .map(|p| {
            format!(
                "{}: takes `{}` from its parent module `{}`, which names it",
                src.file,
                p.join("::"),
                parent.join("::")
            )
        })
        .collect()
}

/// Import cycles between the modules of one front end's own crate (`files`, paths relative
/// to its `src/`; `crate::` and `super::` paths, tests left out). A front end only converts,
/// so its modules stand in a row as the library's layers do: a class's module may
/// import the module of what its methods return, not also the other way round.
fn front_end_cycles(front_end: &str, files: &BTreeMap<String, String>) -> Vec<String> {
    let srcs = sources(files);
    let modules: BTreeSet<&str> = srcs
        .iter()
        .filter_map(|s| s.module.first().map(String::as_str))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for src in &srcs {
        // lib.rs declares the modules and exports their classes.
        let Some(top) = src.module.first() else {
            continue;
        };
        for path in paths(src) {
            if let Some(target) = path.first()
                && target != top
                && modules.contains(target.as_str())
            {
                graph.entry(top.clone()).or_default().insert(target.clone());
            }
        }
    }
    cycles(&graph)
        .into_iter()
        .map(|c| format!("{front_end}: import cycle between {}", c.join(" <-> ")))
        .collect()
}

fn redone_facade(file: &str, code: &str) -> Vec<String> {
    let squeezed: String = code.split_whitespace().collect::<Vec<_>>().join("");
    FACADE_ONLY
        .iter()
        .filter(|(call, _)| squeezed.contains(&call.replace(' ', "")))
        .map(|(call, what)| format!("{file}: a front end calls `{call}`, redoing {what}"))
        .collect()
}

/// `text` without `//` comments (doc comments included).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn read_tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .expect("below root")
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&path).expect("read"));
            }
        }
    }
    out
}

#[test]
fn the_crate_keeps_its_layers() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = read_tree(&crate_dir.join("src"));
    let mut front_ends = Vec::new();
    let mut found = Vec::new();
    for binding in ["../rdmatopo-py/src", "../rdmatopo-c/src"] {
        let front_end = read_tree(&crate_dir.join(binding));
        found.extend(front_end_cycles(binding, &front_end));
        for (rel, text) in front_end {
            front_ends.push((format!("{binding}/{rel}"), text));
        }
    }
    assert!(files.len() > 50, "read {} files", files.len());
    assert!(
        front_ends.len() > 5,
        "read {} binding files",
        front_ends.len()
    );
    found.extend(violations(&files, &front_ends));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The examples of the public API (`rdmatopo/examples/`, not the `bench_*` ones, which
/// time the layers): what each names of `rdmatopo` that is not the public API, a layer
/// module or an item the crate root re-exports only for the tests (`internals`).
fn outside_the_api(file: &str, code: &str) -> Vec<String> {
    const HIDDEN: &[&str] = &[
        "discover",
        "discover_fs",
        "discover_in",
        "discover_needs",
        "discover_view",
        "open_root",
        "inventory_json",
        "Sysfs",
        "CoreError",
        "Discoverer",
        "Focus",
        "Narrowing",
        "DiscoverError",
        "nvml_helper_main",
    ];
    let re = Regex::new(r"\brdmatopo::(\w+)").expect("regex");
    let grouped = Regex::new(r"\buse rdmatopo::\{([^}]*)\}").expect("regex");
    let mut names: Vec<String> = re.captures_iter(code).map(|c| c[1].to_string()).collect();
    for g in grouped.captures_iter(code) {
        names.extend(g[1].split(',').map(|n| n.trim().to_string()));
    }
    names
        .into_iter()
        .filter(|n| {
            n.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && n != "json_schema"
                && n != "json_schema_ids"
                || HIDDEN.contains(&n.as_str())
        })
        .map(|n| format!("{file}: names `rdmatopo::{n}`, which is not the public API"))
        .collect()
}

#[test]
fn the_api_examples_use_only_the_public_api() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut found = Vec::new();
    let mut read = 0;
    for name in ["launch.rs", "nic_lookup.rs", "fleet_check.rs"] {
        let code = std::fs::read_to_string(dir.join(name)).expect("example");
        read += 1;
        found.extend(outside_the_api(name, &strip_comments(&code)));
    }
    assert_eq!(read, 3);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The rule fails on an example that reaches a layer or a test-only entry point.
    let bad = "use rdmatopo::view::Devices;\nuse rdmatopo::{Discovery, Sysfs};\nlet t = rdmatopo::discover_fs(&fs);\n";
    assert_eq!(
        outside_the_api("bad.rs", bad).len(),
        3,
        "{:?}",
        outside_the_api("bad.rs", bad)
    );
    assert!(
        outside_the_api(
            "ok.rs",
            "use rdmatopo::{Discovery, View};\nrdmatopo::json_schema(\"x\");\n"
        )
        .is_empty()
    );
}

// --- Each rule fails on a tree that breaks it ---

fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut t: BTreeMap<String, String> = files
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect();
    t.entry("lib.rs".into())
        .or_insert_with(|| "pub mod model;\npub use model::Topology;\n".into());
    t
}

fn found(files: &[(&str, &str)]) -> Vec<String> {
    violations(&tree(files), &[])
}

#[test]
fn a_clean_synthetic_tree_passes() {
    let v = found(&[
        ("model/mod.rs", "use crate::parse::PciAddr;\n"),
        ("parse/mod.rs", "pub struct PciAddr;\n"),
        (
            "view/mod.rs",
            "pub mod plan;\npub mod rails;\nuse crate::Topology;\n",
        ),
        ("view/plan.rs", "use crate::model::Topology;\n"),
        ("view/rails.rs", "use super::plan::Plan;\n"),
        (
            "checks/mod.rs",
            "use crate::view::{plan::Plan, rails};\n#[cfg(test)]\nmod tests {\n use crate::export::x;\n}\n",
        ),
    ]);
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn a_module_on_no_layer_fails() {
    let v = found(&[("analysis/mod.rs", "use crate::model::Topology;\n")]);
    assert!(
        v.iter().any(|m| m.contains("`analysis` is on no layer")),
        "{v:?}"
    );
}

#[test]
fn an_upward_import_fails() {
    let v = found(&[
        ("discover/mod.rs", "use crate::checks::sources_check;\n"),
        ("checks/mod.rs", "pub mod sources_check;\n"),
    ]);
    assert!(
        v.iter().any(|m| m.contains("from the layer above")),
        "{v:?}"
    );
    // Through a `{…}` group, a doc link, and a root re-export.
    let v = found(&[
        ("model/mod.rs", "use crate::{parse::PciAddr, view::Plan};\n"),
        ("parse/mod.rs", "/// See [`crate::model::Topology`].\n"),
    ]);
    assert_eq!(
        v.iter()
            .filter(|m| m.contains("from the layer above"))
            .count(),
        2,
        "{v:?}"
    );
    let v = found(&[
        (
            "lib.rs",
            "pub mod discover;\npub use discover::Discoverer;\n",
        ),
        ("sources/mod.rs", "use crate::Discoverer;\n"),
    ]);
    assert!(v.iter().any(|m| m.contains("(`discover`)")), "{v:?}");
}

#[test]
fn an_import_cycle_fails() {
    // Between children of one layer (each import alone is allowed).
    let v = found(&[
        ("view/mod.rs", "pub mod plan;\npub mod qos;\n"),
        ("view/plan.rs", "use super::qos::merge;\n"),
        ("view/qos.rs", "use crate::view::plan::Plan;\n"),
    ]);
    assert!(
        v.iter()
            .any(|m| m.contains("import cycle between view::plan <-> view::qos")),
        "{v:?}"
    );
    // Between top-level modules (and the upward half is named too).
    let v = found(&[
        ("discover/mod.rs", "use crate::sources::FactSource;\n"),
        ("sources/mod.rs", "use crate::discover::natural_cmp;\n"),
    ]);
    assert!(
        v.iter()
            .any(|m| m.contains("import cycle between discover <-> sources")),
        "{v:?}"
    );
}

#[test]
fn a_child_taking_from_its_parent_fails() {
    let v = found(&[
        (
            "view/mod.rs",
            "mod error;\nmod plan;\npub use error::ViewError;\npub use plan::Plan;\npub fn list_short() {}\n",
        ),
        ("view/error.rs", "pub enum ViewError {}\n"),
        (
            "view/plan.rs",
            "use super::ViewError;\nuse crate::view::list_short;\n",
        ),
    ]);
    let parent: Vec<_> = v
        .iter()
        .filter(|m| m.contains("from its parent module `view`"))
        .collect();
    assert_eq!(parent.len(), 2, "{v:?}");
    // From a sibling, in a doc link, or in a child its parent does not name (one that
    // adds methods to the parent's type), it is fine.
    let v = found(&[
        (
            "view/mod.rs",
            "mod error;\nmod plan;\npub use error::ViewError;\n",
        ),
        ("view/error.rs", "pub enum ViewError {}\n"),
        (
            "view/plan.rs",
            "use super::error::ViewError;\n/// As [`super::ViewError`] says.\nfn f() {}\n",
        ),
        ("model/mod.rs", "mod numa;\npub struct Topology;\n"),
        ("model/numa.rs", "use super::Topology;\nimpl Topology {}\n"),
    ]);
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn an_import_cycle_in_a_front_end_fails() {
    // `Topology.plan()` returns a `RankPlan`: plan.rs may not import `Topology` back.
    // Paths into the library (`rdmatopo::…`) are not the front end's own modules.
    let front_end = |plan: &str| {
        tree(&[
            ("lib.rs", "mod plan;\nmod topology;\n"),
            ("topology.rs", "use crate::plan::RankPlan;\n"),
            ("plan.rs", plan),
        ])
    };
    let v = front_end_cycles("py", &front_end("use crate::topology::Topology;\n"));
    assert_eq!(v, ["py: import cycle between plan <-> topology"], "{v:?}");
    let v = front_end_cycles(
        "py",
        &front_end("use rdmatopo::view::Devices;\nuse crate::model::Gpu;\n"),
    );
    assert!(v.is_empty(), "{v:?}");
    // Test code may use anything.
    let v = front_end_cycles(
        "py",
        &front_end("#[cfg(test)]\nmod tests {\n use crate::topology::Topology;\n}\n"),
    );
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn the_filesystem_outside_its_layers_fails() {
    let v = found(&[("model/mod.rs", "fn f() { let _ = std::fs::read(\"x\"); }\n")]);
    assert!(v.iter().any(|m| m.contains("`std::fs` outside")), "{v:?}");
    let v = found(&[("sysfs/mod.rs", "fn f() { let _ = std::fs::read(\"x\"); }\n")]);
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn environment_or_clock_in_a_pure_layer_fails() {
    for (file, code) in [
        ("view/mod.rs", "fn f() { std::env::var(\"X\"); }\n"),
        ("checks/mod.rs", "fn f() { std::time::Instant::now(); }\n"),
        ("export/mod.rs", "use std::time::SystemTime;\n"),
    ] {
        let v = found(&[(file, code)]);
        assert!(
            v.iter().any(|m| m.contains("must be a pure function")),
            "{file}: {v:?}"
        );
    }
    // Words in a comment are not code.
    let v = found(&[("checks/mod.rs", "//! then std::process::exit(code)\n")]);
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn a_front_end_redoing_the_facade_fails() {
    let v = found(&[(
        "cli/path.rs",
        "fn f(t: &Topology) { let c = path_class(t, a, b); }\n",
    )]);
    assert!(
        v.iter().any(|m| m.contains("redoing the class between")),
        "{v:?}"
    );
    let front_ends = vec![(
        "rdmatopo-c/src/rank.rs".to_string(),
        "let named = LOCAL_RANK_VARS\n    .iter()\n    .any(|v| env.contains_key(*v));\n"
            .to_string(),
    )];
    let v = violations(&tree(&[]), &front_ends);
    assert!(
        v.iter().any(|m| m.contains("which local rank applies")),
        "{v:?}"
    );
}

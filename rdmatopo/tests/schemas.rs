//! The JSON Schemas (draft 2020-12) in `rdmatopo/schemas/`, one per `rdmatopo.NAME/N`
//! id the binary writes or reads (`rdmatopo --version` lists them), each named by its
//! `$id`; and every JSON document the commands print on every fixture, validated
//! against the schema its `"schema"` field names (the `jsonschema` crate): the answers
//! the goldens hold (tests/golden.rs keeps them equal to the command's), and those of
//! the commands no golden case runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn schemas_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/schemas"))
}

/// The file of a schema id: `rdmatopo.topo/1` -> `rdmatopo.topo-1.schema.json`.
fn file_of(id: &str) -> String {
    format!("{}.schema.json", id.replace('/', "-"))
}

/// Every schema id `rdmatopo --version` lists.
fn ids() -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("json schemas: "))
        .unwrap();
    line.split(", ").map(str::to_string).collect()
}

fn validators() -> BTreeMap<String, jsonschema::Validator> {
    ids()
        .into_iter()
        .map(|id| {
            let path = schemas_dir().join(file_of(&id));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (a schema for {id})", path.display()));
            let schema: Value = serde_json::from_str(&text).unwrap();
            let v = jsonschema::draft202012::new(&schema)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (id, v)
        })
        .collect()
}

#[test]
fn one_schema_per_id_named_by_its_id() {
    let ids = ids();
    assert!(ids.len() >= 14, "{ids:?}");
    let meta = jsonschema::draft202012::meta::validator();
    let mut files: Vec<String> = std::fs::read_dir(schemas_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut want: Vec<String> = ids.iter().map(|id| file_of(id)).collect();
    want.sort();
    assert_eq!(files, want, "a schema file per id, and no other");
    for id in &ids {
        let path = schemas_dir().join(file_of(id));
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(
            meta.is_valid(&schema),
            "{}: not a draft 2020-12 schema",
            path.display()
        );
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{id}"
        );
        assert_eq!(schema["$id"], format!("urn:rdmatopo:schema:{id}"), "{id}");
        assert_eq!(schema["properties"]["schema"]["const"], id.as_str(), "{id}");
    }
    // The crate ships them.
    let manifest = include_str!("../Cargo.toml");
    assert!(manifest.contains("\"/schemas/*.schema.json\""));
}

fn run(args: &[&str]) -> Option<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_rdmatopo"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .unwrap();
    if out.status.code() == Some(3) || out.stdout.is_empty() {
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}")))
}

fn check(validators: &BTreeMap<String, jsonschema::Validator>, what: &str, doc: &Value) -> String {
    let id = doc["schema"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no \"schema\" field"));
    let v = validators
        .get(id)
        .unwrap_or_else(|| panic!("{what}: {id} has no schema"));
    let errors: Vec<String> = v
        .iter_errors(doc)
        .take(5)
        .map(|e| format!("  {} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what} ({id}):\n{}", errors.join("\n"));
    id.to_string()
}

fn fixture_roots() -> Vec<PathBuf> {
    support::fixture_roots()
}

#[test]
fn every_json_output_on_every_fixture_matches_its_schema() {
    let validators = validators();
    let roots = fixture_roots();
    let dgx = support::unpacked(&support::fixtures_dir().join("h100-dgx"));
    let tmp = tempfile::tempdir().unwrap();
    let seen: Vec<Vec<String>> = support::par_map(&roots, |root| {
        let fixture = root.parent().unwrap();
        // The command reads the directory form (tests/archives.rs holds it to the archive).
        let r = support::unpacked(fixture).display().to_string();
        let mut seen = Vec::new();
        // The answers as the goldens hold them (tests/golden.rs keeps them equal to the
        // command's).
        let mut cases: Vec<Vec<&str>> = Vec::new();
        for cmd in [
            "topo",
            "inventory",
            "gids",
            "netdevs",
            "qos",
            "nccl-env",
            "doctor",
        ] {
            cases.push(vec![cmd, "--format", "json"]);
            cases.push(vec![cmd, "--all", "--format", "json"]);
        }
        cases.push(vec!["topo", "--owned", "--format", "json"]);
        for args in &cases {
            let answer = support::goldens::answer(fixture, args);
            if answer.exit != 3 && !answer.stdout.is_empty() {
                let what = format!("{} {args:?}", fixture.display());
                let doc =
                    serde_json::from_str(&answer.stdout).unwrap_or_else(|e| panic!("{what}: {e}"));
                seen.push(check(&validators, &what, &doc));
            }
        }
        let d = dgx.display().to_string();
        if let Some(doc) = run(&["diff", &d, &r, "--format", "json"]) {
            seen.push(check(&validators, &format!("diff {r}"), &doc));
        }
        // What a capture holds beside sysfs.
        let fs = support::open(root);
        for name in ["nvml.json", "verbs.json", "overlay.json"] {
            let p = format!("/rdmatopo/{name}");
            if let Ok(bytes) = fs.read_bytes(&p, 16 << 20) {
                let doc: Value = serde_json::from_slice(&bytes).unwrap();
                seen.push(check(&validators, &format!("{}{p}", root.display()), &doc));
            }
        }
        // The NCCL topology file it writes, read back.
        let name = root
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy();
        let xml = tmp.path().join(format!("{name}.xml"));
        let x = xml.display().to_string();
        if run(&["nccl-topo", "--root", &r, "-o", &x]).is_none()
            && xml.exists()
            && let Some(doc) = run(&["nccl-topo", "--input", &x, "--format", "json"])
        {
            seen.push(check(&validators, &x, &doc));
        }
        seen
    });
    let mut seen: Vec<String> = seen.into_iter().flatten().collect();
    // Many nodes: every fixture's root at once.
    let mut args = vec!["cluster".to_string()];
    args.extend(
        roots
            .iter()
            .map(|r| support::unpacked(r.parent().unwrap()).display().to_string()),
    );
    args.extend(["--format".into(), "json".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if let Some(doc) = run(&args) {
        seen.push(check(&validators, "cluster", &doc));
    }
    seen.sort();
    seen.dedup();
    for id in [
        "rdmatopo.topo/1",
        "rdmatopo.inventory/2",
        "rdmatopo.gids/1",
        "rdmatopo.netdevs/1",
        "rdmatopo.qos/1",
        "rdmatopo.nccl-env/1",
        "rdmatopo.doctor/1",
        "rdmatopo.diff/1",
        "rdmatopo.nvml/1",
        "rdmatopo.nccl-topo-analysis/1",
        "rdmatopo.cluster/1",
    ] {
        assert!(seen.iter().any(|s| s == id), "{id} never printed: {seen:?}");
    }
}

/// Saved reports the tests keep (k8s audit's, read back by `cluster`).
#[test]
fn saved_reports_match_their_schemas() {
    let validators = validators();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fleet");
    let mut dirs = vec![dir];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                let doc: Value =
                    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                if doc["schema"].is_string() {
                    check(&validators, &p.display().to_string(), &doc);
                }
            }
        }
    }
}

/// The schemas are closed where the contract is: a field no writer writes, or one left
/// out, is an error.
#[test]
fn a_document_off_its_schema_is_refused() {
    let validators = validators();
    let root = support::fixtures_dir().join("pod-h100-2gpu-2vf/root");
    let r = root.display().to_string();
    for (cmd, key) in [
        ("topo", "matrix"),
        ("doctor", "findings"),
        ("gids", "gids"),
        ("netdevs", "ports"),
        ("nccl-env", "ranks"),
        ("inventory", "pci"),
        ("qos", "ports"),
    ] {
        let doc = run(&[cmd, "--root", &r, "--format", "json"]).unwrap();
        let v = &validators[doc["schema"].as_str().unwrap()];
        assert!(v.is_valid(&doc), "{cmd}");
        let mut extra = doc.clone();
        extra["no_such_field"] = Value::from(1);
        assert!(!v.is_valid(&extra), "{cmd}: an unknown field passes");
        let mut short = doc.clone();
        short.as_object_mut().unwrap().remove(key).unwrap();
        assert!(!v.is_valid(&short), "{cmd}: a missing field passes");
    }
}

/// The library carries every schema file (`rdmatopo::schemas`, which Python's
/// `json_schema()` returns), as it is on disk.
#[test]
fn the_library_carries_every_schema() {
    let ids = ids();
    let carried: Vec<&str> = rdmatopo::schemas::ALL.iter().map(|(id, _)| *id).collect();
    assert_eq!(carried, ids.iter().map(String::as_str).collect::<Vec<_>>());
    for id in &ids {
        let on_disk = std::fs::read_to_string(schemas_dir().join(file_of(id))).unwrap();
        assert_eq!(rdmatopo::schemas::get(id), Some(on_disk.as_str()), "{id}");
    }
    assert_eq!(rdmatopo::schemas::get("rdmatopo.nothing/1"), None);
}

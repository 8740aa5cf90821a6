//! Tells `rdmatopo --version` what it was built with: the enabled cargo
//! features (`RDMATOPO_FEATURES`), the C library (`RDMATOPO_BUILD`) and every JSON
//! schema id the sources write (`RDMATOPO_JSON_SCHEMAS`), found rather than listed so a
//! new one cannot be forgotten.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src");
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();

    println!(
        "cargo:rustc-env=RDMATOPO_FEATURES={}",
        enabled_features().join(", ")
    );
    // How NVML is reached depends on the C library linked (sources/nvml_helper.rs).
    let build = match target_env.as_str() {
        "musl" => "static (musl); NVML through rdmatopo-nvml beside it",
        "gnu" => "dynamic (glibc)",
        "" => "unknown",
        other => other,
    };
    println!("cargo:rustc-env=RDMATOPO_BUILD={build}");
    let mut schemas = Vec::new();
    schema_ids(Path::new("src"), &mut schemas);
    schemas.sort();
    schemas.dedup();
    println!(
        "cargo:rustc-env=RDMATOPO_JSON_SCHEMAS={}",
        schemas.join(", ")
    );
}

/// Cargo sets `CARGO_FEATURE_<NAME>` for each enabled feature (upper case, `-` as `_`).
fn enabled_features() -> Vec<String> {
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(key, _)| {
            let name = key
                .strip_prefix("CARGO_FEATURE_")?
                .to_lowercase()
                .replace('_', "-");
            (name != "default").then_some(name)
        })
        .collect();
    features.sort();
    features
}

/// Every `"rdmatopo.NAME/N"` string literal under `dir`, unit-test files left out.
fn schema_ids(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("tests") {
                schema_ids(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path.ends_with("tests.rs")
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            out.extend(schema_literals(&text));
        }
    }
}

fn schema_literals(text: &str) -> Vec<String> {
    const OPEN: &str = "\"rdmatopo.";
    let mut ids = Vec::new();
    for (at, _) in text.match_indices(OPEN) {
        let rest = &text[at + 1..];
        let Some(end) = rest.find('"') else { continue };
        let id = &rest[..end];
        let (name, version) = id["rdmatopo.".len()..].split_once('/').unwrap_or(("", ""));
        let name_ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-');
        let version_ok = !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit());
        if name_ok && version_ok {
            ids.push(id.to_string());
        }
    }
    ids
}

//! ResourceSlices (`resource.k8s.io/v1`) as `kubectl get resourceslices -o json`
//! prints them: each driver's devices on a node with their attributes.
//!
//! Field names from the `resource.k8s.io/v1` types (kubernetes/api resource/v1
//! types.go: `ResourceSliceSpec{driver, pool{name}, nodeName, devices[]{name,
//! attributes}}`, `DeviceAttribute{int, bool, string, version}`). An attribute name
//! without a domain is in the driver's own domain.

use super::error::ParseError;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One device of one slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceDevice {
    pub driver: String,
    pub pool: String,
    pub name: String,
    /// The slice's `nodeName`; `None` for a slice of several nodes.
    pub node: Option<String>,
    /// String and integer attributes by qualified name (`<domain>/<id>`), as text.
    pub attributes: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct List {
    #[serde(default)]
    items: Vec<Slice>,
}

#[derive(Deserialize)]
struct Slice {
    spec: Spec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    driver: String,
    pool: Pool,
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    devices: Vec<Device>,
}

#[derive(Deserialize)]
struct Pool {
    name: String,
}

#[derive(Deserialize)]
struct Device {
    name: String,
    #[serde(default)]
    attributes: BTreeMap<String, serde_json::Value>,
}

/// The devices of a `kubectl get resourceslices -o json` list (or of one slice).
pub fn parse_resource_slices(text: &str) -> Result<Vec<SliceDevice>, ParseError> {
    let what = "ResourceSlice list";
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ParseError::new(what, text, e.to_string()))?;
    let slices = if value.get("kind").and_then(|k| k.as_str()) == Some("ResourceSlice") {
        vec![
            serde_json::from_value::<Slice>(value)
                .map_err(|e| ParseError::new(what, text, e.to_string()))?,
        ]
    } else {
        serde_json::from_value::<List>(value)
            .map_err(|e| ParseError::new(what, text, e.to_string()))?
            .items
    };
    let mut out = Vec::new();
    for s in slices {
        for d in s.spec.devices {
            let mut attributes = BTreeMap::new();
            for (k, v) in d.attributes {
                let key = if k.contains('/') {
                    k
                } else {
                    format!("{}/{k}", s.spec.driver)
                };
                let text = if let Some(s) = v.get("string").and_then(|x| x.as_str()) {
                    s.to_string()
                } else if let Some(i) = v.get("int").and_then(serde_json::Value::as_i64) {
                    i.to_string()
                } else if let Some(b) = v.get("bool").and_then(serde_json::Value::as_bool) {
                    b.to_string()
                } else if let Some(s) = v.get("version").and_then(|x| x.as_str()) {
                    s.to_string()
                } else {
                    continue;
                };
                attributes.insert(key, text);
            }
            out.push(SliceDevice {
                driver: s.spec.driver.clone(),
                pool: s.spec.pool.name.clone(),
                name: d.name,
                node: s.spec.node_name.clone(),
                attributes,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_slices_flattens_to_devices_with_qualified_attributes() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",
          "spec":{"driver":"gpu.nvidia.com","nodeName":"n1","pool":{"name":"n1","generation":1,"resourceSliceCount":1},
          "devices":[{"name":"gpu-0","attributes":{"type":{"string":"gpu"},"resource.kubernetes.io/pciBusID":{"string":"0000:18:00.0"},
          "resource.kubernetes.io/numaNode":{"int":0},"cudaComputeCapability":{"version":"9.0.0"}}}]}}]}"#;
        let d = parse_resource_slices(text).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].node.as_deref(), Some("n1"));
        assert_eq!(d[0].attributes["gpu.nvidia.com/type"], "gpu");
        assert_eq!(
            d[0].attributes["resource.kubernetes.io/pciBusID"],
            "0000:18:00.0"
        );
        assert_eq!(d[0].attributes["resource.kubernetes.io/numaNode"], "0");
    }

    #[test]
    fn not_a_slice_list_is_an_error() {
        assert!(parse_resource_slices("[1,2]").is_err());
        assert!(parse_resource_slices(r#"{"items":[{"spec":{}}]}"#).is_err());
    }
}

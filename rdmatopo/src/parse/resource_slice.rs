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
            out.push(SliceDevice {
                attributes: flatten(&s.spec.driver, d.attributes),
                driver: s.spec.driver.clone(),
                pool: s.spec.pool.name.clone(),
                name: d.name,
                node: s.spec.node_name.clone(),
            });
        }
    }
    Ok(out)
}

/// `DeviceAttribute`s as text by qualified name; list values are left out.
fn flatten(driver: &str, attrs: BTreeMap<String, serde_json::Value>) -> BTreeMap<String, String> {
    let mut attributes = BTreeMap::new();
    for (k, v) in attrs {
        let key = if k.contains('/') {
            k
        } else {
            format!("{driver}/{k}")
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
    attributes
}

/// The attributes that hold a DRA device's PCI address, in the order they are read:
/// the standard one, DRANET's, the SR-IOV driver's.
pub const PCI_ATTRIBUTES: [&str; 3] = [
    "resource.kubernetes.io/pciBusID",
    "dra.net/pciAddress",
    "sriovnetwork.k8snetworkplumbingwg.io/pciAddress",
];

/// The versions of `DeviceMetadata` read, newest first (k8s.io/dynamic-resource-allocation
/// `api/metadata`: v1alpha1 since v0.36, the library of Kubernetes 1.36).
const METADATA_VERSIONS: [&str; 2] = [
    "metadata.resource.k8s.io/v1beta1",
    "metadata.resource.k8s.io/v1alpha1",
];

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    requests: Vec<MetadataRequest>,
}

#[derive(Deserialize)]
struct MetadataRequest {
    #[serde(default)]
    devices: Vec<MetadataDevice>,
}

#[derive(Deserialize)]
struct MetadataDevice {
    driver: String,
    pool: String,
    name: String,
    #[serde(default)]
    attributes: BTreeMap<String, serde_json::Value>,
}

/// The devices of a DRA device metadata file (KEP-5304), which a DRA driver's kubelet
/// plugin mounts into a container at
/// `/var/run/kubernetes.io/dra-device-attributes/{resourceclaims/<claim>|resourceclaimtemplates/<podClaimName>}/<request>/<driver>-metadata.json`.
/// The file is a JSON stream, the same `DeviceMetadata` once per API version; the first
/// of a version read here is taken (k8s.io/dynamic-resource-allocation
/// `kubeletplugin/metadata.go` `encodeMetadataStream`, `api/metadata/v1alpha1/types.go`:
/// `requests[].devices[]{driver, pool, name, attributes}`).
pub fn parse_device_metadata(text: &str) -> Result<Vec<SliceDevice>, ParseError> {
    let what = "DRA device metadata";
    let mut seen = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>() {
        let value = value.map_err(|e| ParseError::new(what, text, e.to_string()))?;
        let version = value
            .get("apiVersion")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        if value.get("kind").and_then(|k| k.as_str()) != Some("DeviceMetadata")
            || !METADATA_VERSIONS.contains(&version.as_str())
        {
            seen.push(version);
            continue;
        }
        let m: Metadata = serde_json::from_value(value)
            .map_err(|e| ParseError::new(what, text, e.to_string()))?;
        return Ok(m
            .requests
            .into_iter()
            .flat_map(|r| r.devices)
            .map(|d| SliceDevice {
                attributes: flatten(&d.driver, d.attributes),
                driver: d.driver,
                pool: d.pool,
                name: d.name,
                node: None,
            })
            .collect());
    }
    Err(ParseError::new(
        what,
        text,
        format!(
            "no DeviceMetadata of a version read here ({}) among {seen:?}",
            METADATA_VERSIONS.join(", ")
        ),
    ))
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

    /// A file as the v0.36 library writes it for a GPU of the NVIDIA driver: one
    /// v1alpha1 object (the stream would hold more versions, newest first).
    #[test]
    fn device_metadata_gives_the_devices_with_their_pci_addresses() {
        let text = r#"{"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io/v1alpha1","metadata":{"name":"gpu-claim","namespace":"ml","uid":"7d4c","generation":1},
          "podClaimName":"gpu","requests":[{"name":"gpu","devices":[{"driver":"gpu.nvidia.com","pool":"node-a","name":"gpu-3",
          "attributes":{"resource.kubernetes.io/pciBusID":{"string":"0000:9f:00.0"},"type":{"string":"gpu"}}}]}]}
{"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io/v1alpha1","requests":[]}
"#;
        let d = parse_device_metadata(text).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].driver.as_str(), d[0].name.as_str()),
            ("gpu.nvidia.com", "gpu-3")
        );
        assert_eq!(
            d[0].attributes["resource.kubernetes.io/pciBusID"],
            "0000:9f:00.0"
        );
        assert_eq!(d[0].attributes["gpu.nvidia.com/type"], "gpu");
        // A version not read here is skipped for the next; none at all is an error.
        let newer = format!(
            "{}\n{text}",
            r#"{"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io/v9","requests":"?"}"#
        );
        assert_eq!(parse_device_metadata(&newer).unwrap(), d);
        let err = parse_device_metadata(r#"{"kind":"DeviceMetadata","apiVersion":"x/v9"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no DeviceMetadata of a version read here"),
            "{err}"
        );
        assert!(parse_device_metadata("{not json").is_err());
    }

    #[test]
    fn not_a_slice_list_is_an_error() {
        assert!(parse_resource_slices("[1,2]").is_err());
        assert!(parse_resource_slices(r#"{"items":[{"spec":{}}]}"#).is_err());
    }
}

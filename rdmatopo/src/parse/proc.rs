use super::error::ParseError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One field of `/proc/<pid>/status` (`Cpus_allowed_list:\t0-3`), `None` when absent.
pub fn parse_status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

/// `/proc/<pid>/environ`: NUL-separated `KEY=VALUE`. Entries without `=` are skipped.
pub fn parse_environ(bytes: &[u8]) -> BTreeMap<String, String> {
    bytes
        .split(|b| *b == 0)
        .filter_map(|entry| {
            let s = String::from_utf8_lossy(entry);
            let (k, v) = s.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// One line of `/proc/<pid>/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupEntry {
    pub hierarchy: u32,
    /// Empty for the cgroup v2 unified hierarchy.
    pub controllers: Vec<String>,
    pub path: String,
}

pub fn parse_cgroup(text: &str) -> Result<Vec<CgroupEntry>, ParseError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut it = line.splitn(3, ':');
            let (Some(id), Some(ctl), Some(path)) = (it.next(), it.next(), it.next()) else {
                return Err(ParseError::new(
                    "cgroup line",
                    line,
                    "expected id:controllers:path",
                ));
            };
            let hierarchy = id
                .parse()
                .map_err(|_| ParseError::new("cgroup line", line, "bad hierarchy id"))?;
            let controllers = ctl
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            Ok(CgroupEntry {
                hierarchy,
                controllers,
                path: path.to_string(),
            })
        })
        .collect()
}

/// A `Max locked memory` limit (`RLIMIT_MEMLOCK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemlockLimit {
    Unlimited,
    /// In bytes.
    #[serde(untagged)]
    Bytes(u64),
}

/// `MemTotal` of a NUMA node's `meminfo` (`Node 0 MemTotal:  1056571392 kB`), in
/// KiB: the kernel prints the node's total in kB (`node_read_meminfo`,
/// drivers/base/node.c).
pub fn parse_node_mem_total(text: &str) -> Result<u64, ParseError> {
    let err = |r: &str| ParseError::new("node meminfo", text, r);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some("MemTotal:"))
        .ok_or_else(|| err("no MemTotal line"))?;
    let mut words = line.split_whitespace().skip(3);
    let value = words
        .next()
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| err("MemTotal is not a number"))?;
    match words.next() {
        Some("kB") => Ok(value),
        _ => Err(err("MemTotal is not in kB")),
    }
}

/// `Max locked memory` soft limit from `/proc/<pid>/limits`.
pub fn parse_limits_memlock(text: &str) -> Result<MemlockLimit, ParseError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("Max locked memory"))
        .ok_or_else(|| ParseError::new("limits", text, "no \"Max locked memory\" line"))?;
    let soft = line["Max locked memory".len()..]
        .split_whitespace()
        .next()
        .ok_or_else(|| ParseError::new("limits", line, "missing soft limit"))?;
    if soft == "unlimited" {
        return Ok(MemlockLimit::Unlimited);
    }
    soft.parse()
        .map(MemlockLimit::Bytes)
        .map_err(|_| ParseError::new("limits", line, "bad soft limit"))
}

/// A value in `rdma.max` / `rdma.current`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RdmaLimitValue {
    Max,
    #[serde(untagged)]
    Count(u64),
}

/// One device line of the rdma cgroup controller (`mlx5_0 hca_handle=2 hca_object=2000 `).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RdmaLimit {
    pub device: String,
    pub hca_handle: Option<RdmaLimitValue>,
    pub hca_object: Option<RdmaLimitValue>,
}

/// Parse `rdma.max` or `rdma.current`; unknown keys are ignored (newer kernels add some).
pub fn parse_rdma_cgroup(text: &str) -> Result<Vec<RdmaLimit>, ParseError> {
    parse_rdma_cgroup_of(text, |_| true)
}

/// The lines of an rdma cgroup file whose device `wanted` accepts; the others are
/// skipped unparsed. A pod's file lists every device of the host (the kernel lists
/// every registered device), and a pod answers for its own.
pub fn parse_rdma_cgroup_of(
    text: &str,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<RdmaLimit>, ParseError> {
    let mut out = Vec::new();
    // Most lines are skipped on their first word alone.
    for line in text.split('\n') {
        let line = line.trim_start();
        let end = line
            .bytes()
            .position(|b| b.is_ascii_whitespace())
            .unwrap_or(line.len());
        if end == 0 || !wanted(&line[..end]) {
            continue;
        }
        let mut words = line.split_ascii_whitespace();
        let Some(device) = words.next() else {
            continue;
        };
        let device = device.to_string();
        let mut limit = RdmaLimit {
            device,
            hca_handle: None,
            hca_object: None,
        };
        for kv in words {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| ParseError::new("rdma cgroup line", line, "expected key=value"))?;
            let value = if v == "max" {
                RdmaLimitValue::Max
            } else {
                RdmaLimitValue::Count(
                    v.parse()
                        .map_err(|_| ParseError::new("rdma cgroup line", line, "bad value"))?,
                )
            };
            match k {
                "hca_handle" => limit.hca_handle = Some(value),
                "hca_object" => limit.hca_object = Some(value),
                _ => {}
            }
        }
        out.push(limit);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_mem_total() {
        let t = "Node 1 MemTotal:       1056763852 kB\nNode 1 MemFree:        1000 kB\n";
        assert_eq!(parse_node_mem_total(t).unwrap(), 1_056_763_852);
        assert!(parse_node_mem_total("Node 0 MemFree: 5 kB\n").is_err());
        assert!(parse_node_mem_total("Node 0 MemTotal: x kB\n").is_err());
        assert!(parse_node_mem_total("Node 0 MemTotal: 5 MB\n").is_err());
    }

    #[test]
    fn status_fields() {
        let s = "Name:\tpython\nCpus_allowed:\tffff\nCpus_allowed_list:\t0-15\n";
        assert_eq!(parse_status_field(s, "Cpus_allowed_list"), Some("0-15"));
        assert_eq!(parse_status_field(s, "Missing"), None);
    }

    #[test]
    fn environ_and_cgroup() {
        let env = parse_environ(b"A=1\0B=x=y\0junk\0\0");
        assert_eq!(env.get("B").map(String::as_str), Some("x=y"));
        assert_eq!(env.len(), 2);
        let cg = parse_cgroup("0::/kubepods.slice/pod1\n12:rdma:/\n").unwrap();
        assert_eq!(cg[1].controllers, vec!["rdma"]);
        assert!(parse_cgroup("nonsense").is_err());
    }

    #[test]
    fn rdma_limits_of_some_devices() {
        let text = "mlx5_0 hca_handle=2 hca_object=max\nmlx5_1 garbage\nmlx5_2 hca_handle=max\n";
        let some = parse_rdma_cgroup_of(text, |d| d != "mlx5_1").unwrap();
        let names: Vec<&str> = some.iter().map(|l| l.device.as_str()).collect();
        assert_eq!(names, ["mlx5_0", "mlx5_2"]);
        assert_eq!(some[0].hca_handle, Some(RdmaLimitValue::Count(2)));
        // The line skipped is not judged; read whole, it is an error.
        assert!(parse_rdma_cgroup(text).is_err());
    }

    #[test]
    fn memlock_and_rdma_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         65536                65536                bytes     \n";
        assert_eq!(
            parse_limits_memlock(limits).unwrap(),
            MemlockLimit::Bytes(65536)
        );
        let unl = "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(parse_limits_memlock(unl).unwrap(), MemlockLimit::Unlimited);
        let r = parse_rdma_cgroup(
            "mlx4_0 hca_handle=2 hca_object=2000 \nocrdma1 hca_handle=3 hca_object=max \n",
        )
        .unwrap();
        assert_eq!(r[0].hca_handle, Some(RdmaLimitValue::Count(2)));
        assert_eq!(r[1].hca_object, Some(RdmaLimitValue::Max));
        assert!(parse_rdma_cgroup("mlx5_0 hca_handle=lots").is_err());
    }
}

/// One row of `/proc/net/route` (IPv4; addresses are little-endian hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub iface: String,
    pub destination: std::net::Ipv4Addr,
    pub gateway: std::net::Ipv4Addr,
    pub mask: std::net::Ipv4Addr,
}

pub fn parse_route(text: &str) -> Result<Vec<Route>, ParseError> {
    let ip = |s: &str, line: &str| {
        u32::from_str_radix(s, 16)
            .map(|v| std::net::Ipv4Addr::from(v.swap_bytes()))
            .map_err(|_| ParseError::new("route", line, "bad hex address"))
    };
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return Err(ParseError::new("route", line, "too few columns"));
            }
            Ok(Route {
                iface: f[0].to_string(),
                destination: ip(f[1], line)?,
                gateway: ip(f[2], line)?,
                mask: ip(f[7], line)?,
            })
        })
        .collect()
}

/// Local IPv4 addresses in `/proc/net/fib_trie` (leaves followed by `/32 host LOCAL`).
pub fn parse_fib_trie_local(text: &str) -> Vec<std::net::Ipv4Addr> {
    let mut out = Vec::new();
    let mut last: Option<std::net::Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim_start_matches([' ', '|', '+', '-']).trim();
        if let Ok(a) = t
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .parse::<std::net::Ipv4Addr>()
        {
            if line.contains("|--") {
                last = Some(a);
            }
        } else if t.starts_with("/32 host LOCAL")
            && let Some(a) = last
            && !out.contains(&a)
        {
            out.push(a);
        }
    }
    out
}

// --- /proc files of the reading process and the machine ---

/// The CPU model (first block of `/proc/cpuinfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// `vendor_id` (`GenuineIntel`, `AuthenticAMD`).
    pub vendor: Option<String>,
    /// `cpu family`.
    pub family: Option<u32>,
    /// `model`.
    pub model: Option<u32>,
    /// `model name`.
    pub model_name: Option<String>,
    /// `CPU architecture` on Arm (8 on AArch64 machines such as Grace and GB10, which
    /// NCCL's topology calls `arch="arm64"`); absent on x86.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_architecture: Option<u32>,
}

/// What the NVIDIA driver says about one GPU in
/// `/proc/driver/nvidia/gpus/<bdf>/information`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvidiaProcGpu {
    /// The directory name (`0000:18:00.0`).
    pub bus_id: String,
    /// `Model:`.
    pub model: Option<String>,
    /// `GPU UUID:` (`GPU-…`).
    pub uuid: Option<String>,
    /// `Device Minor:`: the N of `/dev/nvidia<N>`.
    pub minor: Option<u32>,
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Where it is mounted in this mount namespace.
    pub mount_point: String,
    /// The directory of the source filesystem that is mounted there (`/` for a whole
    /// filesystem, `/nvidia0` for a bind mount of one devtmpfs node).
    pub root: String,
    /// Filesystem type (`tmpfs`, `proc`, `devtmpfs`).
    pub fs_type: String,
}

/// The interface of the first default IPv4 route in `/proc/net/route`.
pub fn default_route(table: &str) -> Option<String> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 8 && f[1] == "00000000" && f[7] == "00000000").then(|| f[0].to_string())
    })
}

pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let first_block = text.split("\n\n").next().unwrap_or_default();
    let field = |key: &str| {
        first_block.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    CpuInfo {
        vendor: field("vendor_id"),
        family: field("cpu family").and_then(|v| v.parse().ok()),
        model: field("model").and_then(|v| v.parse().ok()),
        model_name: field("model name"),
        arm_architecture: field("CPU architecture").and_then(|v| v.parse().ok()),
    }
}

/// `/proc/driver/nvidia/gpus/<bdf>/information`: `Key: \t value` lines.
pub fn parse_nvidia_information(bus_id: &str, text: &str) -> NvidiaProcGpu {
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            let v = v.trim();
            (k.trim() == key && !v.is_empty()).then(|| v.to_string())
        })
    };
    NvidiaProcGpu {
        bus_id: bus_id.to_string(),
        model: field("Model"),
        uuid: field("GPU UUID"),
        minor: field("Device Minor").and_then(|m| m.parse().ok()),
    }
}

/// `/proc/<pid>/mountinfo` (proc(5)): `id parent maj:min root mount-point options
/// [optional…] - fstype source super-options`, with space, tab, newline and backslash
/// escaped as octal. Malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let f: Vec<&str> = before.split(' ').collect();
            let fs_type = after.split(' ').next()?;
            (f.len() >= 6 && !fs_type.is_empty()).then(|| Mount {
                root: unescape_octal(f[3]),
                mount_point: unescape_octal(f[4]),
                fs_type: fs_type.to_string(),
            })
        })
        .collect()
}

/// Undo the kernel's `\ooo` escaping of mount paths.
pub fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = (b[i] == b'\\' && i + 3 < b.len())
            .then(|| &b[i + 1..i + 4])
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0')))
            .and_then(|v| u8::try_from(v).ok());
        if let Some(byte) = code {
            out.push(byte);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod host_tests {
    use super::*;

    #[test]
    fn default_route_from_proc_net_route() {
        let t = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                 ens18\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                 eno1\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
        assert_eq!(default_route(t).as_deref(), Some("eno1"));
        assert_eq!(default_route("Iface\n"), None);
    }

    #[test]
    fn nvidia_information_fields() {
        let g = parse_nvidia_information(
            "0000:18:00.0",
            "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 420\nGPU UUID: \t GPU-5a1c3e1d-7b2f-4c1e-9d0a-1f2e3d4c5b6a\nBus Location: \t 0000:18:00.0\nDevice Minor: \t 3\n",
        );
        assert_eq!(g.model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(
            g.uuid.as_deref(),
            Some("GPU-5a1c3e1d-7b2f-4c1e-9d0a-1f2e3d4c5b6a")
        );
        assert_eq!(g.minor, Some(3));
        let empty = parse_nvidia_information("0000:18:00.0", "Device Minor: \t x\n");
        assert_eq!((empty.uuid, empty.minor), (None, None));
    }

    #[test]
    fn mountinfo_lines() {
        let t = "1290 1180 0:245 / /proc/driver/nvidia rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=555\n\
                 1291 1290 0:22 /driver/nvidia/gpus/0000:18:00.0 /proc/driver/nvidia/gpus/0000:18:00.0 ro,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n\
                 1292 1188 0:5 /nvidia3 /dev/nvidia3 ro,nosuid,noexec,relatime master:2 - devtmpfs udev rw,size=1024k\n\
                 1293 1180 0:60 / /mnt/with\\040space rw - ext4 /dev/sda1 rw\n\
                 garbage line\n";
        let m = parse_mountinfo(t);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].fs_type, "tmpfs");
        assert_eq!(m[1].root, "/driver/nvidia/gpus/0000:18:00.0");
        assert_eq!(m[2].mount_point, "/dev/nvidia3");
        assert_eq!(m[3].mount_point, "/mnt/with space");
        assert_eq!(unescape_octal("a\\0"), "a\\0");
        assert_eq!(unescape_octal("x\\777y\\011"), "x\\777y\t");
    }

    #[test]
    fn cpuinfo_first_block() {
        let c = parse_cpuinfo(
            "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\nmodel name\t: AMD EPYC 7742 64-Core Processor\n\nprocessor\t: 1\n",
        );
        assert_eq!(c.vendor.as_deref(), Some("AuthenticAMD"));
        assert_eq!((c.family, c.model), (Some(23), Some(49)));
        assert_eq!(c.arm_architecture, None);
        // A GB10's first block (Cortex-X925): no vendor_id, an implementer and an
        // architecture.
        let c = parse_cpuinfo(
            "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd87\n\nprocessor\t: 1\n",
        );
        assert_eq!((c.vendor, c.arm_architecture), (None, Some(8)));
    }
}

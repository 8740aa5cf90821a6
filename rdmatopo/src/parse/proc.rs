use super::ParseError;
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
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let device = words.next().unwrap_or_default().to_string();
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

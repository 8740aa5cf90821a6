//! RoCE QoS files of the mlx5 driver as NVIDIA's MLNX_OFED / DOCA-OFED builds it (the
//! inbox kernel driver publishes none of them; it configures the same settings through
//! DCB netlink only, which `mlnx_qos` and `dcb` use and sysfs does not show).
//!
//! Sources (`Mellanox/mlnx-ofa_kernel`, mirrored e.g. in `wjz304/mlnx-ofed-kernel`):
//! * `drivers/infiniband/hw/mlx5/main_ext.c`: `tc/<port>/traffic_class`
//!   (`traffic_class_show`, `tclass_print_*`);
//! * `drivers/net/ethernet/mellanox/mlx5/core/en_sysfs.c` and `en_ecn.c`:
//!   `ecn/roce_{np,rp}/enable/<prio>` and parameters (`mlx5e_show_ecn_enable`, `"%d\n"`),
//!   `qos/{tc_num,maxrate,prio2buffer,buffer_size}`;
//! * `drivers/net/ethernet/mellanox/mlx5/core/sriov_sysfs.c`: `sriov/<vf>/config`
//!   (`config_show`);
//! * upstream `drivers/infiniband/core/cma_configfs.c`: `default_roce_tos` (`"%u\n"`).

use super::error::ParseError;
use serde::{Deserialize, Serialize};

/// Number of IEEE 802.1p priorities (and of mlx5 port buffers).
pub const PRIORITIES: usize = 8;

/// One per-destination rule of `tc/<port>/traffic_class` (`dst_ip=10.0.0.0/8,tclass=106`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TclassRule {
    /// The match, as the driver prints it without the trailing comma
    /// (`src_ip=…`, `dst_ip=…/<len>`, `src_ip6=…`, `dst_ip6=…`, comma-separated).
    pub selector: String,
    pub tclass: u8,
}

/// `tc/<port>/traffic_class`: the port's default RoCE traffic class (the whole IPv4 ToS /
/// IPv6 traffic-class byte: DSCP << 2 | ECN). A global class replaces the class of every
/// RoCE QP on the port (`tclass_get_tclass_locked`); the rules apply to matching
/// destinations when there is no global class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficClass {
    /// `Global tclass=<n>`; `None` when the file prints no global class (the driver's
    /// `val = -1`, nothing set).
    pub global: Option<u8>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<TclassRule>,
}

impl TrafficClass {
    /// Nothing set: QPs keep the class the application gives them.
    pub fn is_unset(&self) -> bool {
        self.global.is_none() && self.rules.is_empty()
    }
}

fn tclass_value(what: &'static str, text: &str, v: &str) -> Result<u8, ParseError> {
    v.trim()
        .parse::<u8>()
        .map_err(|_| ParseError::new(what, text, "traffic class is not a number 0-255"))
}

/// Parse `tc/<port>/traffic_class`: `Global tclass=106\n`, then rules
/// `dst_ip=10.0.0.0/8,tclass=96\n`; empty when nothing is set.
pub fn parse_traffic_class(text: &str) -> Result<TrafficClass, ParseError> {
    const WHAT: &str = "traffic_class";
    let mut out = TrafficClass::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(v) = line.strip_prefix("Global tclass=") {
            if out.global.is_some() {
                return Err(ParseError::new(WHAT, text, "two global classes"));
            }
            out.global = Some(tclass_value(WHAT, text, v)?);
            continue;
        }
        let (selector, class) = line
            .rsplit_once("tclass=")
            .ok_or_else(|| ParseError::new(WHAT, text, "a rule without tclass="))?;
        let selector = selector.trim_end_matches(',');
        let known = ["src_ip=", "dst_ip=", "src_ip6=", "dst_ip6="];
        if selector.is_empty()
            || !selector
                .split(',')
                .all(|m| known.iter().any(|k| m.starts_with(k) && m.len() > k.len()))
        {
            return Err(ParseError::new(WHAT, text, "unknown rule match"));
        }
        out.rules.push(TclassRule {
            selector: selector.to_string(),
            tclass: tclass_value(WHAT, text, class)?,
        });
    }
    Ok(out)
}

/// Parse a 0/1 flag (`ecn/roce_np/enable/<prio>`). The driver prints nothing when its
/// firmware query fails, which is an error here.
pub fn parse_flag(text: &str) -> Result<bool, ParseError> {
    match text.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        "" => Err(ParseError::new(
            "0/1 flag",
            text,
            "empty (the driver's firmware query failed)",
        )),
        _ => Err(ParseError::new("0/1 flag", text, "expected 0 or 1")),
    }
}

/// Parse `default_roce_tos` of the rdma_cm configfs (`"%u\n"`, 0-255).
pub fn parse_tos(text: &str) -> Result<u8, ParseError> {
    tclass_value("default_roce_tos", text, text)
}

/// Parse `qos/prio2buffer`: a `Priority\tBuffer` header, then `<prio>\t\t<buffer>` for
/// priorities 0-7. Returns the buffer of each priority.
pub fn parse_prio2buffer(text: &str) -> Result<Vec<u8>, ParseError> {
    const WHAT: &str = "prio2buffer";
    let mut map: [Option<u8>; PRIORITIES] = [None; PRIORITIES];
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("Priority") {
            continue;
        }
        let mut it = line.split_whitespace();
        let (Some(p), Some(b), None) = (it.next(), it.next(), it.next()) else {
            return Err(ParseError::new(WHAT, text, "expected \"<prio> <buffer>\""));
        };
        let p: usize = p
            .parse()
            .map_err(|_| ParseError::new(WHAT, text, "bad priority"))?;
        let b: u8 = b
            .parse()
            .map_err(|_| ParseError::new(WHAT, text, "bad buffer index"))?;
        if p >= PRIORITIES || usize::from(b) >= PRIORITIES {
            return Err(ParseError::new(WHAT, text, "priority or buffer above 7"));
        }
        if map[p].replace(b).is_some() {
            return Err(ParseError::new(WHAT, text, "a priority listed twice"));
        }
    }
    map.iter()
        .map(|b| b.ok_or_else(|| ParseError::new(WHAT, text, "not every priority 0-7 listed")))
        .collect()
}

/// One receive buffer of the port (`qos/buffer_size`), sizes in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortBuffer {
    pub index: u8,
    pub size: u64,
    /// Pause (XOFF) threshold; 0 on a lossy buffer: the driver zeroes both thresholds of
    /// buffers that no PFC-enabled priority maps to (`port_buffer.c`
    /// `update_xoff_threshold`, `update_buffer_lossy`).
    pub xoff: u64,
    pub xon: u64,
}

impl PortBuffer {
    /// A buffer with pause thresholds: at least one PFC-enabled priority maps to it.
    pub fn is_lossless(&self) -> bool {
        self.xoff > 0
    }
}

/// `qos/buffer_size` of an mlx5 netdev.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortBuffers {
    /// `Port buffer size = <n>`.
    pub port_buffer_size: Option<u64>,
    /// `Spare buffer size = <n>` (newer drivers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spare_buffer_size: Option<u64>,
    pub buffers: Vec<PortBuffer>,
}

/// Parse `qos/buffer_size`: `Port buffer size = <n>`, optionally `Spare buffer size = <n>`,
/// a `Buffer\tSize\txoff_threshold\txon_threshold` header, then one line per buffer.
pub fn parse_buffer_size(text: &str) -> Result<PortBuffers, ParseError> {
    const WHAT: &str = "buffer_size";
    let num = |v: &str| {
        v.trim()
            .parse::<u64>()
            .map_err(|_| ParseError::new(WHAT, text, "bad number"))
    };
    let mut out = PortBuffers {
        port_buffer_size: None,
        spare_buffer_size: None,
        buffers: Vec::new(),
    };
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(v) = line.strip_prefix("Port buffer size =") {
            out.port_buffer_size = Some(num(v)?);
        } else if let Some(v) = line.strip_prefix("Spare buffer size =") {
            out.spare_buffer_size = Some(num(v)?);
        } else if line.starts_with("Buffer") {
            continue;
        } else {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [i, size, xoff, xon] = f.as_slice() else {
                return Err(ParseError::new(
                    WHAT,
                    text,
                    "expected \"<buffer> <size> <xoff> <xon>\"",
                ));
            };
            let index = u8::try_from(num(i)?)
                .ok()
                .filter(|i| usize::from(*i) < PRIORITIES)
                .ok_or_else(|| ParseError::new(WHAT, text, "buffer index above 7"))?;
            if out.buffers.iter().any(|b| b.index == index) {
                return Err(ParseError::new(WHAT, text, "a buffer listed twice"));
            }
            out.buffers.push(PortBuffer {
                index,
                size: num(size)?,
                xoff: num(xoff)?,
                xon: num(xon)?,
            });
        }
    }
    if out.buffers.is_empty() {
        return Err(ParseError::new(WHAT, text, "no buffer lines"));
    }
    Ok(out)
}

/// Parse `qos/maxrate`: the rate limit of each traffic class in kbit/s, space-separated
/// (`"%lld "` per class); 0 means unlimited.
pub fn parse_maxrate(text: &str) -> Result<Vec<u64>, ParseError> {
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|t| {
            t.parse()
                .map_err(|_| ParseError::new("maxrate", text, "bad rate"))
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() || v.len() > PRIORITIES {
        return Err(ParseError::new("maxrate", text, "expected 1-8 rates"));
    }
    Ok(v)
}

/// A VF's settings as its PF publishes them in `sriov/<vf>/config` (mlx5 Ethernet
/// e-switch, legacy mode). The `trust` and `spoofcheck` files beside it only print a usage
/// line; the state is here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfConfig {
    /// `VF`.
    pub vf: Option<u32>,
    /// `MAC`.
    pub mac: Option<String>,
    /// `VLAN` (0: none).
    pub vlan: Option<u16>,
    /// `QoS`: the 802.1p priority the e-switch writes into the VF's VLAN tag (VST).
    pub vlan_qos: Option<u8>,
    /// `VLAN Proto` (`N/A`, `802.1Q`, `802.1ad`).
    pub vlan_proto: Option<String>,
    /// `SpoofCheck` (`ON`/`OFF`).
    pub spoofcheck: Option<bool>,
    /// `Trust` (`ON`/`OFF`).
    pub trust: Option<bool>,
    /// `LinkState` (`Up`, `Down`, `Follow`).
    pub link_state: Option<String>,
    /// `MinTxRate`, `MaxTxRate` in Mbit/s (0: no limit).
    pub min_tx_rate: Option<u32>,
    pub max_tx_rate: Option<u32>,
    /// `VGT+` (VLAN trunk).
    pub vgt_plus: Option<bool>,
}

/// Parse `sriov/<vf>/config`: `Key<spaces>: value` lines (`SpoofCheck : ON`). Unknown
/// keys are ignored; a line that is not `key: value`, or text without any known key, is
/// an error.
pub fn parse_vf_config(text: &str) -> Result<VfConfig, ParseError> {
    const WHAT: &str = "sriov config";
    let mut c = VfConfig::default();
    let mut any = false;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| ParseError::new(WHAT, text, "expected \"<key> : <value>\""))?;
        let (key, value) = (key.trim(), value.trim());
        let on_off = |v: &str| match v {
            "ON" => Ok(true),
            "OFF" => Ok(false),
            _ => Err(ParseError::new(WHAT, text, "expected ON or OFF")),
        };
        let n = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| ParseError::new(WHAT, text, "bad number"))
        };
        let known = [
            "VF",
            "MAC",
            "VLAN",
            "QoS",
            "VLAN Proto",
            "SpoofCheck",
            "Trust",
            "LinkState",
            "MinTxRate",
            "MaxTxRate",
            "VGT+",
        ];
        any |= known.contains(&key);
        match key {
            "VF" => c.vf = Some(n(value)?),
            "MAC" => c.mac = Some(value.to_string()),
            "VLAN" => {
                c.vlan = Some(
                    u16::try_from(n(value)?)
                        .map_err(|_| ParseError::new(WHAT, text, "VLAN above 65535"))?,
                )
            }
            "QoS" => {
                c.vlan_qos = Some(
                    u8::try_from(n(value)?)
                        .ok()
                        .filter(|q| usize::from(*q) < PRIORITIES)
                        .ok_or_else(|| ParseError::new(WHAT, text, "QoS above 7"))?,
                )
            }
            "VLAN Proto" => c.vlan_proto = Some(value.to_string()),
            "SpoofCheck" => c.spoofcheck = Some(on_off(value)?),
            "Trust" => c.trust = Some(on_off(value)?),
            "LinkState" => c.link_state = Some(value.to_string()),
            "MinTxRate" => c.min_tx_rate = Some(n(value)?),
            "MaxTxRate" => c.max_tx_rate = Some(n(value)?),
            "VGT+" => c.vgt_plus = Some(on_off(value)?),
            _ => {}
        }
    }
    if !any {
        return Err(ParseError::new(WHAT, text, "no VF setting in it"));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_class_global_and_rules() {
        // `traffic_class_show`: "Global tclass=%d\n", then per rule the matches
        // ("dst_ip=%pI4/%d,") and "tclass=%d\n".
        let t = parse_traffic_class("Global tclass=106\ndst_ip=10.1.0.0/16,tclass=96\n").unwrap();
        assert_eq!(t.global, Some(106));
        assert_eq!(
            t.rules,
            vec![TclassRule {
                selector: "dst_ip=10.1.0.0/16".into(),
                tclass: 96
            }]
        );
        let t = parse_traffic_class("src_ip=10.0.0.1,dst_ip=10.0.0.2/32,tclass=104\n").unwrap();
        assert_eq!(t.global, None);
        assert_eq!(t.rules[0].selector, "src_ip=10.0.0.1,dst_ip=10.0.0.2/32");
    }

    #[test]
    fn traffic_class_unset_is_empty() {
        // `val = -1` and no rule: the show function returns 0 bytes.
        let t = parse_traffic_class("").unwrap();
        assert!(t.is_unset());
        assert!(!parse_traffic_class("Global tclass=0\n").unwrap().is_unset());
    }

    #[test]
    fn traffic_class_rejects_garbage() {
        assert!(parse_traffic_class("Global tclass=300\n").is_err());
        assert!(parse_traffic_class("tclass\n").is_err());
        assert!(parse_traffic_class("vlan=3,tclass=4\n").is_err());
        assert!(parse_traffic_class("Global tclass=1\nGlobal tclass=2\n").is_err());
    }

    #[test]
    fn flags_and_tos() {
        assert_eq!(parse_flag("1\n"), Ok(true));
        assert_eq!(parse_flag("0\n"), Ok(false));
        assert!(parse_flag("").is_err());
        assert!(parse_flag("2\n").is_err());
        assert_eq!(parse_tos("106\n"), Ok(106));
        assert!(parse_tos("256\n").is_err());
    }

    #[test]
    fn prio2buffer_verbatim() {
        // `mlx5e_show_prio2buffer`: "Priority\tBuffer\n" then "%d\t\t%d\n" x 8.
        let text =
            "Priority\tBuffer\n0\t\t0\n1\t\t0\n2\t\t0\n3\t\t1\n4\t\t0\n5\t\t0\n6\t\t0\n7\t\t0\n";
        assert_eq!(
            parse_prio2buffer(text).unwrap(),
            vec![0, 0, 0, 1, 0, 0, 0, 0]
        );
        assert!(parse_prio2buffer("Priority\tBuffer\n0\t\t0\n").is_err());
        assert!(parse_prio2buffer(&text.replace("3\t\t1", "3\t\t9")).is_err());
        assert!(parse_prio2buffer(&text.replace("4\t\t0", "3\t\t0")).is_err());
    }

    #[test]
    fn buffer_size_verbatim() {
        // `mlx5e_show_buffer_size`: sizes, header, "%d\t%d\t%d\t\t%d\n" per buffer.
        let text = "Port buffer size = 524160\nSpare buffer size = 0\n\
                    Buffer\tSize\txoff_threshold\txon_threshold\n\
                    0\t262016\t0\t\t0\n1\t262016\t160128\t\t150528\n2\t0\t0\t\t0\n3\t0\t0\t\t0\n\
                    4\t0\t0\t\t0\n5\t0\t0\t\t0\n6\t0\t0\t\t0\n7\t0\t0\t\t0\n";
        let b = parse_buffer_size(text).unwrap();
        assert_eq!(b.port_buffer_size, Some(524_160));
        assert_eq!(b.spare_buffer_size, Some(0));
        assert_eq!(b.buffers.len(), 8);
        assert!(!b.buffers[0].is_lossless());
        assert!(b.buffers[1].is_lossless());
        // Older drivers print no spare size.
        let old = text.replace("Spare buffer size = 0\n", "");
        assert_eq!(parse_buffer_size(&old).unwrap().spare_buffer_size, None);
        assert!(parse_buffer_size("Port buffer size = 1\n").is_err());
        assert!(parse_buffer_size("0\t1\t2\n").is_err());
    }

    #[test]
    fn maxrate_verbatim() {
        assert_eq!(
            parse_maxrate("0 0 0 25000000 0 0 0 0 \n").unwrap(),
            vec![0, 0, 0, 25_000_000, 0, 0, 0, 0]
        );
        assert!(parse_maxrate("\n").is_err());
        assert!(parse_maxrate("a\n").is_err());
    }

    #[test]
    fn vf_config_verbatim() {
        // `config_show` of sriov_sysfs.c (LinkState is printed by policy_str with its
        // own newline; RateGroup appears twice in current drivers).
        let text = "VF         : 0\nMAC        : b2:3c:5e:11:7a:01\nVLAN       : 0\n\
                    QoS        : 0\nVLAN Proto : N/A\nSpoofCheck : ON\nTrust      : OFF\n\
                    LinkState  : Follow\nMinTxRate  : 0\nMaxTxRate  : 0\nRateGroup  : 0\n\
                    VGT+       : OFF\nRateGroup  : 0\n";
        let c = parse_vf_config(text).unwrap();
        assert_eq!(c.vf, Some(0));
        assert_eq!(c.mac.as_deref(), Some("b2:3c:5e:11:7a:01"));
        assert_eq!(c.vlan, Some(0));
        assert_eq!(c.vlan_qos, Some(0));
        assert_eq!(c.spoofcheck, Some(true));
        assert_eq!(c.trust, Some(false));
        assert_eq!(c.link_state.as_deref(), Some("Follow"));
        assert_eq!(c.vgt_plus, Some(false));
        assert!(parse_vf_config("Trust : maybe\n").is_err());
        assert!(parse_vf_config("QoS : 9\n").is_err());
        // The `trust` file beside it prints only a usage line.
        assert!(parse_vf_config("usage: write <ON|OFF> to trust|untrust VF\n").is_err());
        assert!(parse_vf_config("no colon here\n").is_err());
        assert!(parse_vf_config("\n").is_err());
    }
}

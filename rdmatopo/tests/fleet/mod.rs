//! A generated fleet for `rdmatopo cluster`: copies of one node's inventory JSON
//! (the `host-h100-sriov` fixture: 8 RoCE rails, one /24 per rail) with addresses of
//! their own, and a few nodes broken in known ways. Used by `tests/cluster.rs` and by
//! `examples/fleet.rs` (the benchmark's input).

use serde_json::Value;

/// A known way to break a node, and the findings it must cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `mlx5_4` port 1 DOWN: one rail fewer, `NCCL_IB_HCA` differs.
    PortDown,
    /// `enp94s0np0` (`mlx5_5`) at MTU 1500.
    Mtu,
    /// `mlx5_6` trained at 200 Gb/s.
    Speed,
    /// `enp192s0np0` (`mlx5_9`) in another subnet.
    Subnet,
    /// `mlx5_10`'s IPv4 GIDs at indexes 4 and 5: GID index 5 there. NCCL finds 5
    /// by itself (slots 2 and 3 are empty), so the plan sets no `NCCL_IB_GID_INDEX`
    /// on any node; the rail's index still differs from the fleet's.
    GidIndex,
    /// `enp220s0np0` (`mlx5_11`) holds the address of another node's rail.
    DuplicateAddress,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::PortDown,
        Fault::Mtu,
        Fault::Speed,
        Fault::Subnet,
        Fault::GidIndex,
        Fault::DuplicateAddress,
    ];

    /// `(check, subject)` of every finding the broken node must get.
    pub fn findings(self) -> Vec<(&'static str, Option<&'static str>)> {
        match self {
            Fault::PortDown => vec![
                ("rail-count", None),
                ("missing-rail", Some("mlx5_4:1")),
                ("nccl-env", Some("NCCL_IB_HCA")),
            ],
            Fault::Mtu => vec![("mtu", Some("mlx5_5:1"))],
            Fault::Speed => vec![("speed-gbps", Some("mlx5_6:1"))],
            Fault::Subnet => vec![("subnet", Some("mlx5_9:1"))],
            Fault::GidIndex => vec![("gid-index", Some("mlx5_10:1"))],
            Fault::DuplicateAddress => vec![("duplicate-address", Some("mlx5_11:1"))],
        }
    }
}

/// The inventory JSON of the base node.
pub fn base() -> Result<Value, String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/host-h100-sriov/root.tar.gz");
    let topo = rdmatopo::discover(Some(&root)).map_err(|e| e.to_string())?;
    serde_json::to_value(&topo).map_err(|e| e.to_string())
}

/// The rail address of `node` in the rail whose base address is `10.<r>.0.54`: the
/// rails are /24s, so the fleet is numbered within `10.<r>.0.1`…`10.<r>.0.254`, and a
/// fleet larger than 254 nodes moves rails to /16s (`10.<r>.<hi>.<lo>/16`).
fn rail_address(rail_octet: u8, node: usize, fleet: usize) -> (String, u8) {
    if fleet <= 254 {
        (format!("10.{rail_octet}.0.{}", node + 1), 24)
    } else {
        (
            format!("10.{rail_octet}.{}.{}", (node + 1) / 256, (node + 1) % 256),
            16,
        )
    }
}

/// The IPv4-mapped GID text of `addr`, as the kernel prints it.
fn mapped_gid(addr: &str) -> Option<String> {
    let o: Vec<u16> = addr
        .split('.')
        .map(|p| p.parse::<u16>().ok())
        .collect::<Option<_>>()?;
    let [a, b, c, d] = o.as_slice() else {
        return None;
    };
    Some(format!(
        "0000:0000:0000:0000:0000:ffff:{:04x}:{:04x}",
        (a << 8) | b,
        (c << 8) | d
    ))
}

fn netdev_mut<'a>(v: &'a mut Value, name: &str) -> Option<&'a mut Value> {
    v["netdevs"]
        .as_array_mut()?
        .iter_mut()
        .find(|n| n["name"] == name)
}

fn port_mut<'a>(v: &'a mut Value, dev: &str) -> Option<&'a mut Value> {
    v["rdma_devices"]
        .as_array_mut()?
        .iter_mut()
        .find(|d| d["name"] == dev)?
        .get_mut("ports")?
        .get_mut(0)
}

/// Give every rail netdev (one with a `10.x.0.54/24` address) and its GIDs the
/// address of `node`.
fn renumber(v: &mut Value, node: usize, fleet: usize) -> Option<()> {
    let mut moved: Vec<(String, String)> = Vec::new();
    for n in v["netdevs"].as_array_mut()? {
        let Some(addrs) = n["ipv4"].as_array_mut() else {
            continue;
        };
        for a in addrs {
            let Some(text) = a.as_str() else { continue };
            let octets: Vec<&str> = text.split(['.', '/']).collect();
            if let [ten, r, "0", "54", "24"] = octets.as_slice()
                && *ten == "10"
            {
                let (addr, len) = rail_address(r.parse().ok()?, node, fleet);
                moved.push((text.trim_end_matches("/24").to_string(), addr.clone()));
                *a = Value::String(format!("{addr}/{len}"));
            }
        }
    }
    for d in v["rdma_devices"].as_array_mut()? {
        for p in d["ports"].as_array_mut()? {
            for g in p["gids"].as_array_mut()? {
                let Some(old) = g["ipv4"].as_str().map(str::to_string) else {
                    continue;
                };
                if let Some((_, new)) = moved.iter().find(|(o, _)| *o == old) {
                    g["gid"] = Value::String(mapped_gid(new)?);
                    g["ipv4"] = Value::String(new.clone());
                }
            }
        }
    }
    Some(())
}

/// Node `node` of a fleet of `fleet`, healthy or with `fault`. `victim` is the node
/// whose address a [`Fault::DuplicateAddress`] node takes.
pub fn node(
    base: &Value,
    node: usize,
    fleet: usize,
    fault: Option<(Fault, usize)>,
) -> Option<Value> {
    let mut v = base.clone();
    renumber(&mut v, node, fleet)?;
    let Some((fault, victim)) = fault else {
        return Some(v);
    };
    match fault {
        Fault::PortDown => port_mut(&mut v, "mlx5_4")?["state"] = "DOWN".into(),
        Fault::Mtu => netdev_mut(&mut v, "enp94s0np0")?["mtu"] = 1500.into(),
        Fault::Speed => {
            port_mut(&mut v, "mlx5_6")?["rate"] =
                serde_json::json!({"gbps": 200.0, "lanes": 4, "speed": "HDR"})
        }
        Fault::Subnet => {
            netdev_mut(&mut v, "enp192s0np0")?["ipv4"] = serde_json::json!(["10.209.0.9/24"])
        }
        Fault::GidIndex => {
            for g in port_mut(&mut v, "mlx5_10")?["gids"].as_array_mut()? {
                let i = g["index"].as_u64()?;
                if i >= 2 {
                    g["index"] = (i + 2).into();
                }
            }
        }
        Fault::DuplicateAddress => {
            let (addr, len) = rail_address(111, victim, fleet);
            netdev_mut(&mut v, "enp220s0np0")?["ipv4"] =
                serde_json::json!([format!("{addr}/{len}")]);
        }
    }
    Some(v)
}

/// Where the faults go in a fleet of `n` (at least 12): spread out, each with the
/// victim of a duplicate address (the node before it).
pub fn faults(n: usize) -> Vec<(usize, Fault, usize)> {
    let k = Fault::ALL.len();
    Fault::ALL
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let at = (i + 1) * n / (k + 1);
            (at, *f, at - 1)
        })
        .collect()
}

/// The node name of index `i`.
pub fn name(i: usize) -> String {
    format!("node-{i:04}")
}

/// Every node of a fleet of `n`, as (name, inventory JSON).
pub fn fleet(base: &Value, n: usize) -> Option<Vec<(String, Value)>> {
    let faults = faults(n);
    (0..n)
        .map(|i| {
            let fault = faults
                .iter()
                .find(|(at, _, _)| *at == i)
                .map(|(_, f, victim)| (*f, *victim));
            Some((name(i), node(base, i, n, fault)?))
        })
        .collect()
}

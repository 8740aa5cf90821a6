//! RoCE QoS facts (see [`crate::model::QosFacts`]): per RoCE port its default traffic
//! class, per netdev its ECN (DCQCN) enables and port buffers, per VF the e-switch
//! settings its PF publishes. Every file is optional: what the driver does not expose is
//! `None` in the model and one info diagnostic per kind of fact names a path that was
//! absent. Runs after netdevs are read and linked to ports.

use super::ctx::Ctx;
use crate::model::{
    Diagnostic, Ecn, EcnPoint, NetdevKind, NetdevQos, PortQos, QosFacts, Severity, Topology, VfQos,
};
use crate::parse::{
    LinkLayer, PRIORITIES, parse_buffer_size, parse_dec, parse_flag, parse_gid_type, parse_maxrate,
    parse_prio2buffer, parse_tos, parse_traffic_class, parse_vf_config,
};
use crate::sysfs::{EntryKind, join};
use std::collections::BTreeSet;

const IB_DIR: &str = "/sys/class/infiniband";
const NET_DIR: &str = "/sys/class/net";
/// rdma_cm's configfs (`drivers/infiniband/core/cma_configfs.c`); a device's group
/// exists once someone created it (`cma_roce_tos` does).
const CM_DIR: &str = "/sys/kernel/config/rdma_cm";

/// Paths looked for and not found, per kind of fact.
#[derive(Default)]
struct Absent {
    traffic_class: Vec<String>,
    ecn: Vec<String>,
    buffers: Vec<String>,
}

pub(super) fn read_qos(ctx: &mut Ctx, topo: &mut Topology) {
    let mut absent = Absent::default();
    let mut facts = QosFacts::default();
    let mut roce_netdevs: BTreeSet<String> = BTreeSet::new();
    for dev in &topo.rdma_devices {
        for port in &dev.ports {
            if port.link_layer != Some(LinkLayer::Ethernet) {
                continue;
            }
            facts
                .ports
                .push(read_port(ctx, &dev.name, port.number, &mut absent));
            if let Some(nd) = &port.netdev {
                roce_netdevs.insert(nd.clone());
                // A RoCE LAG port names its bond; the QoS lives on the slaves.
                if let Some(bond) = topo.netdev(nd).and_then(|n| n.bond.as_ref()) {
                    roce_netdevs.extend(bond.slaves.iter().cloned());
                }
            }
        }
    }
    for nd in &topo.netdevs {
        if nd.pci.is_none() {
            continue;
        }
        let dir = join(NET_DIR, &nd.name);
        let (ecn_dir, qos_dir) = (join(&dir, "ecn"), join(&dir, "qos"));
        let roce = roce_netdevs.contains(&nd.name);
        let (has_ecn, has_qos) = (ctx.fs.exists(&ecn_dir), ctx.fs.exists(&qos_dir));
        if !(roce || has_ecn || has_qos) {
            continue;
        }
        let q = NetdevQos {
            netdev: nd.name.clone(),
            pci: nd.pci,
            ecn: has_ecn.then(|| read_ecn(ctx, &ecn_dir)),
            tc_num: ctx.attr(&join(&qos_dir, "tc_num"), true, |t| {
                parse_dec::<u32>("tc_num", t)
            }),
            maxrate_kbps: ctx.attr(&join(&qos_dir, "maxrate"), true, parse_maxrate),
            prio2buffer: ctx.attr(&join(&qos_dir, "prio2buffer"), true, parse_prio2buffer),
            buffers: ctx.attr(&join(&qos_dir, "buffer_size"), true, parse_buffer_size),
        };
        // Current MLNX_OFED creates `ecn/` on PF netdevs only (`mlx5e_sysfs_create`
        // returns before it for a VF); MLNX_OFED 4.x created it on VF netdevs too, and
        // it is read above wherever it is. Only a PF's absence says anything.
        if roce && nd.kind == NetdevKind::Physical {
            if q.ecn.is_none() {
                absent.ecn.push(ecn_dir);
            }
            if q.prio2buffer.is_none() || q.buffers.is_none() {
                absent.buffers.push(join(&qos_dir, "prio2buffer"));
            }
        }
        facts.netdevs.push(q);
    }
    for f in &topo.pci {
        let Some(sriov) = &f.sriov else { continue };
        let dir = format!("/sys/bus/pci/devices/{}/sriov", f.address);
        if !ctx.fs.exists(&dir) {
            continue;
        }
        let mut indexes: Vec<u32> = ctx
            .list(&dir)
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        indexes.sort_unstable();
        for index in indexes {
            let path = join(&join(&dir, &index.to_string()), "config");
            if let Some(config) = ctx.attr(&path, true, parse_vf_config) {
                facts.vfs.push(VfQos {
                    pf: f.address,
                    index,
                    vf: usize::try_from(index)
                        .ok()
                        .and_then(|i| sriov.vfs.get(i))
                        .copied(),
                    config,
                });
            }
        }
    }
    report_absent(ctx, &absent);
    topo.qos = facts;
}

fn read_port(ctx: &mut Ctx, dev: &str, port: u32, absent: &mut Absent) -> PortQos {
    let tc = format!("{IB_DIR}/{dev}/tc/{port}/traffic_class");
    let traffic_class = ctx.attr(&tc, true, parse_traffic_class);
    if traffic_class.is_none() && !ctx.fs.exists(&tc) {
        absent.traffic_class.push(tc);
    }
    let cm = format!("{CM_DIR}/{dev}/ports/{port}");
    PortQos {
        device: dev.to_string(),
        port,
        traffic_class,
        rdma_cm_tos: ctx.attr(&join(&cm, "default_roce_tos"), true, parse_tos),
        rdma_cm_roce_mode: ctx.attr(&join(&cm, "default_roce_mode"), true, parse_gid_type),
    }
}

fn read_ecn(ctx: &mut Ctx, dir: &str) -> Ecn {
    Ecn {
        roce_np: read_point(ctx, &join(dir, "roce_np")),
        roce_rp: read_point(ctx, &join(dir, "roce_rp")),
    }
}

fn read_point(ctx: &mut Ctx, dir: &str) -> Option<EcnPoint> {
    let mut point = EcnPoint::default();
    if !ctx.fs.exists(dir) {
        return None;
    }
    for prio in 0..PRIORITIES {
        let path = format!("{dir}/enable/{prio}");
        let Ok(p) = u8::try_from(prio) else { continue };
        match ctx.attr(&path, true, parse_flag) {
            Some(true) => point.enabled.push(p),
            Some(false) => point.disabled.push(p),
            None => {}
        }
    }
    for name in ctx.list(dir) {
        let path = join(dir, &name);
        if name == "enable" || !matches!(ctx.fs.kind(&path), Ok(EntryKind::File)) {
            continue;
        }
        if let Some(v) = ctx.attr(&path, true, |t| parse_dec::<i64>("ECN parameter", t)) {
            point.params.insert(name, v);
        }
    }
    Some(point)
}

fn report_absent(ctx: &mut Ctx, absent: &Absent) {
    let kinds = [
        (
            &absent.traffic_class,
            "RoCE port(s) without tc/<port>/traffic_class: the port's default RoCE traffic class is not visible (MLNX_OFED's mlx5_ib publishes it; the inbox driver does not)",
        ),
        (
            &absent.ecn,
            "RoCE PF netdev(s) without ecn/: the per-priority DCQCN enables are not visible (MLNX_OFED's mlx5_core publishes them; the inbox driver does not)",
        ),
        (
            &absent.buffers,
            "RoCE PF netdev(s) without qos/prio2buffer and qos/buffer_size: which priorities are lossless (PFC) is not visible (MLNX_OFED's mlx5_core publishes the port buffers; PFC itself is in DCB netlink only: `mlnx_qos -i <if>`)",
        ),
    ];
    for (paths, what) in kinds {
        if let Some(first) = paths.first() {
            ctx.diags.push(Diagnostic::new(
                Severity::Info,
                "qos-not-exposed",
                Some(first),
                format!("{} {what}", paths.len()),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Discoverer;
    use crate::sysfs::{MemTree, Sysfs};

    const PF: &str = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    const VF: &str = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.2";

    /// A ConnectX PF with one VF, both RoCE, the PF's netdev `ens1np0` and the VF's
    /// `ens1v0`; `ofed` adds the MLNX_OFED QoS files.
    fn tree(ofed: bool) -> MemTree {
        let mut t = MemTree::new();
        for (dir, bdf, dev) in [
            (PF, "0000:01:00.0", "0x1021"),
            (VF, "0000:01:00.2", "0x101e"),
        ] {
            t.file(&format!("{dir}/class"), "0x020000\n");
            t.file(&format!("{dir}/vendor"), "0x15b3\n");
            t.file(&format!("{dir}/device"), &format!("{dev}\n"));
            t.link(
                &format!("/sys/bus/pci/devices/{bdf}"),
                &format!("../../..{}", dir.trim_start_matches("/sys")),
            );
        }
        t.file(&format!("{PF}/sriov_totalvfs"), "16\n");
        t.file(&format!("{PF}/sriov_numvfs"), "1\n");
        t.link(&format!("{PF}/virtfn0"), "../0000:01:00.2");
        t.link(&format!("{VF}/physfn"), "../0000:01:00.0");
        for (dir, ib, nd) in [(PF, "mlx5_0", "ens1np0"), (VF, "mlx5_1", "ens1v0")] {
            let d = format!("{dir}/infiniband/{ib}");
            t.link(
                &format!("/sys/class/infiniband/{ib}"),
                &format!("../..{}", d.trim_start_matches("/sys")),
            );
            t.file(&format!("{d}/ports/1/state"), "4: ACTIVE\n");
            t.file(&format!("{d}/ports/1/link_layer"), "Ethernet\n");
            let n = format!("{dir}/net/{nd}");
            t.link(
                &format!("/sys/class/net/{nd}"),
                &format!("../..{}", n.trim_start_matches("/sys")),
            );
            t.file(&format!("{n}/type"), "1\n");
            t.file(
                &format!("{d}/ports/1/gids/3"),
                "0000:0000:0000:0000:0000:ffff:0a00:0001\n",
            );
            t.file(&format!("{d}/ports/1/gid_attrs/types/3"), "RoCE v2\n");
            t.file(
                &format!("{d}/ports/1/gid_attrs/ndevs/3"),
                &format!("{nd}\n"),
            );
        }
        if ofed {
            t.file(
                &format!("{PF}/infiniband/mlx5_0/tc/1/traffic_class"),
                "Global tclass=106\n",
            );
            t.file(&format!("{VF}/infiniband/mlx5_1/tc/1/traffic_class"), "");
            let n = format!("{PF}/net/ens1np0");
            for p in 0..8 {
                let on = if p == 3 { "1\n" } else { "0\n" };
                t.file(&format!("{n}/ecn/roce_np/enable/{p}"), on);
                t.file(&format!("{n}/ecn/roce_rp/enable/{p}"), on);
            }
            t.file(&format!("{n}/ecn/roce_np/cnp_dscp"), "48\n");
            t.file(&format!("{n}/ecn/roce_rp/rpg_ai_rate"), "5\n");
            t.file(
                &format!("{n}/qos/prio2buffer"),
                "Priority\tBuffer\n0\t\t0\n1\t\t0\n2\t\t0\n3\t\t1\n4\t\t0\n5\t\t0\n6\t\t0\n7\t\t0\n",
            );
            t.file(
                &format!("{n}/qos/buffer_size"),
                "Port buffer size = 524160\nBuffer\tSize\txoff_threshold\txon_threshold\n\
                 0\t262016\t0\t\t0\n1\t262016\t160128\t\t150528\n",
            );
            t.file(&format!("{n}/qos/tc_num"), "8\n");
            t.file(
                &format!("{PF}/sriov/0/config"),
                "VF         : 0\nMAC        : 02:00:00:00:00:01\nVLAN       : 0\nQoS        : 0\n\
                 VLAN Proto : N/A\nSpoofCheck : ON\nTrust      : OFF\nLinkState  : Follow\n",
            );
            t.file(
                "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos",
                "106\n",
            );
            t.file(
                "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode",
                "RoCE v2\n",
            );
        }
        t
    }

    #[test]
    fn reads_every_exposed_fact() {
        let fs = Sysfs::memory(tree(true), "ofed");
        let topo = Discoverer::new(&fs).discover().unwrap();
        let q = &topo.qos;
        let pf = q.port("mlx5_0", 1).unwrap();
        assert_eq!(pf.traffic_class.as_ref().unwrap().global, Some(106));
        assert_eq!(pf.rdma_cm_tos, Some(106));
        assert_eq!(pf.rdma_cm_roce_mode, Some(crate::parse::GidType::RoceV2));
        let vf = q.port("mlx5_1", 1).unwrap();
        assert!(vf.traffic_class.as_ref().unwrap().is_unset());
        assert_eq!(vf.rdma_cm_tos, None);
        let nd = q.netdev("ens1np0").unwrap();
        let ecn = nd.ecn.as_ref().unwrap();
        let (np, rp) = (ecn.roce_np.as_ref().unwrap(), ecn.roce_rp.as_ref().unwrap());
        assert_eq!(np.enabled, vec![3]);
        assert_eq!(rp.disabled, vec![0, 1, 2, 4, 5, 6, 7]);
        assert_eq!(np.params.get("cnp_dscp"), Some(&48));
        assert_eq!(rp.params.get("rpg_ai_rate"), Some(&5));
        assert_eq!(nd.lossless_priorities(), Some(vec![3]));
        assert_eq!(nd.tc_num, Some(8));
        // The VF's netdev is a RoCE netdev without any QoS file: listed, all `None`.
        let vnd = q.netdev("ens1v0").unwrap();
        assert!(vnd.ecn.is_none() && vnd.prio2buffer.is_none());
        let v = &q.vfs[0];
        assert_eq!(
            (v.index, v.vf.map(|a| a.to_string())),
            (0, Some("0000:01:00.2".into()))
        );
        assert_eq!(v.config.trust, Some(false));
        assert_eq!(v.config.spoofcheck, Some(true));
        assert!(
            !topo.diagnostics.iter().any(|d| d.code == "qos-not-exposed"),
            "{:#?}",
            topo.diagnostics
        );
    }

    #[test]
    fn absent_facts_are_none_and_said_once_per_kind() {
        let fs = Sysfs::memory(tree(false), "inbox");
        let topo = Discoverer::new(&fs).discover().unwrap();
        let q = &topo.qos;
        assert_eq!(q.ports.len(), 2);
        assert!(q.ports.iter().all(|p| p.traffic_class.is_none()));
        assert!(q.netdev("ens1np0").unwrap().ecn.is_none());
        assert!(q.vfs.is_empty());
        let d: Vec<(&str, &str)> = topo
            .diagnostics
            .iter()
            .filter(|d| d.code == "qos-not-exposed")
            .map(|d| (d.path.as_deref().unwrap_or(""), d.message.as_str()))
            .collect();
        assert_eq!(d.len(), 3, "{d:#?}");
        assert_eq!(d[0].0, "/sys/class/infiniband/mlx5_0/tc/1/traffic_class");
        assert!(d[0].1.starts_with("2 RoCE port(s)"));
        // Only the PF's netdev counts: a VF has `ecn/` under MLNX_OFED 4.x only.
        assert_eq!(d[1].0, "/sys/class/net/ens1np0/ecn");
        assert!(d[1].1.starts_with("1 RoCE PF"));
        assert_eq!(d[2].0, "/sys/class/net/ens1np0/qos/prio2buffer");
        assert!(
            topo.diagnostics
                .iter()
                .all(|d| d.severity == crate::model::Severity::Info || d.code != "qos-not-exposed")
        );
    }

    #[test]
    fn a_malformed_file_is_a_warning_naming_it() {
        let mut t = tree(true);
        t.file(&format!("{PF}/net/ens1np0/ecn/roce_np/enable/3"), "yes\n");
        let fs = Sysfs::memory(t, "bad");
        let topo = Discoverer::new(&fs).discover().unwrap();
        let ecn = topo.qos.netdev("ens1np0").unwrap().ecn.clone().unwrap();
        let np = ecn.roce_np.unwrap();
        assert!(!np.enabled.contains(&3) && !np.disabled.contains(&3));
        assert!(
            topo.diagnostics
                .iter()
                .any(|d| d.code == "unparsable-attribute"
                    && d.path.as_deref() == Some("/sys/class/net/ens1np0/ecn/roce_np/enable/3"))
        );
    }
}

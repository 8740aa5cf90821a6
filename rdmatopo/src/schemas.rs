//! The JSON Schemas (draft 2020-12) of the documents rdmatopo writes and reads, one per
//! `rdmatopo.NAME/N` id (`schemas/<id>.schema.json`, whose `$id` is
//! `urn:rdmatopo:schema:<id>`), built into the library so that the crate, the Python
//! wheel and the C library carry the contract they keep.

/// Every schema: (id, JSON text), by id.
pub const ALL: &[(&str, &str)] = &[
    (
        "rdmatopo.audit/1",
        include_str!("../schemas/rdmatopo.audit-1.schema.json"),
    ),
    (
        "rdmatopo.cluster/1",
        include_str!("../schemas/rdmatopo.cluster-1.schema.json"),
    ),
    (
        "rdmatopo.device-index/1",
        include_str!("../schemas/rdmatopo.device-index-1.schema.json"),
    ),
    (
        "rdmatopo.diff/1",
        include_str!("../schemas/rdmatopo.diff-1.schema.json"),
    ),
    (
        "rdmatopo.doctor/1",
        include_str!("../schemas/rdmatopo.doctor-1.schema.json"),
    ),
    (
        "rdmatopo.gids/1",
        include_str!("../schemas/rdmatopo.gids-1.schema.json"),
    ),
    (
        "rdmatopo.inventory/2",
        include_str!("../schemas/rdmatopo.inventory-2.schema.json"),
    ),
    (
        "rdmatopo.nccl-env/1",
        include_str!("../schemas/rdmatopo.nccl-env-1.schema.json"),
    ),
    (
        "rdmatopo.nccl-topo-analysis/1",
        include_str!("../schemas/rdmatopo.nccl-topo-analysis-1.schema.json"),
    ),
    (
        "rdmatopo.netdevs/1",
        include_str!("../schemas/rdmatopo.netdevs-1.schema.json"),
    ),
    (
        "rdmatopo.nvml/1",
        include_str!("../schemas/rdmatopo.nvml-1.schema.json"),
    ),
    (
        "rdmatopo.overlay/1",
        include_str!("../schemas/rdmatopo.overlay-1.schema.json"),
    ),
    (
        "rdmatopo.qos/1",
        include_str!("../schemas/rdmatopo.qos-1.schema.json"),
    ),
    (
        "rdmatopo.topo/1",
        include_str!("../schemas/rdmatopo.topo-1.schema.json"),
    ),
    (
        "rdmatopo.verbs/1",
        include_str!("../schemas/rdmatopo.verbs-1.schema.json"),
    ),
];

/// The schema of `id` (`rdmatopo.topo/1`), when rdmatopo has one.
pub fn get(id: &str) -> Option<&'static str> {
    ALL.iter().find(|(i, _)| *i == id).map(|(_, s)| *s)
}

//! Exports: other tools' formats written from the view, pure text out (no I/O).
//! [`table`] is the `nvidia-smi topo -m` table, [`nccl_xml`] NCCL's topology file,
//! [`k8s`] Kubernetes manifests and the NFD feature file, [`qos`] the RoCE QoS report,
//! [`prometheus`] the text exposition of `k8s audit` reports.

pub mod dra;
pub mod k8s;
pub mod nccl_xml;
pub mod prometheus;
pub mod qos;
pub mod table;

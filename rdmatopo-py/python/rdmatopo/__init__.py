"""GPU, RDMA NIC, PCIe and NUMA topology from Linux sysfs, for PyTorch launch scripts.

    import rdmatopo
    topo = rdmatopo.discover()            # this machine ($RDMATOPO_ROOT, else /)
    topo.path("GPU0", "mlx5_0")           # 'PIX'
    print(topo.matrix().to_table())       # nvidia-smi topo -m

    plan = rdmatopo.apply()               # first lines of a torchrun script: NCCL
                                          # variables and CPU binding for LOCAL_RANK

The work is done by the Rust crate `rdmatopo`; this package is a thin binding of it.
"""

from __future__ import annotations

from rdmatopo._apply import apply
from rdmatopo._rdmatopo import (
    AnalysisError,
    Applied,
    ArgumentError,
    CheckResult,
    Diagnostic,
    DiscoveryError,
    DoctorReport,
    Finding,
    Gid,
    Gpu,
    Matrix,
    MatrixDevice,
    Nic,
    NumaNode,
    OutsideViewError,
    ParseError,
    Port,
    RankPlan,
    RdmaTopoError,
    Topology,
    UnknownDeviceError,
    __version__,
    discover,
    format_cpulist,
    json_schema,
    json_schema_ids,
    parse_cpulist,
)

__all__ = [
    "AnalysisError",
    "Applied",
    "ArgumentError",
    "CheckResult",
    "Diagnostic",
    "DiscoveryError",
    "DoctorReport",
    "Finding",
    "Gid",
    "Gpu",
    "Matrix",
    "MatrixDevice",
    "Nic",
    "NumaNode",
    "OutsideViewError",
    "ParseError",
    "Port",
    "RankPlan",
    "RdmaTopoError",
    "Topology",
    "UnknownDeviceError",
    "__version__",
    "apply",
    "discover",
    "format_cpulist",
    "json_schema",
    "json_schema_ids",
    "parse_cpulist",
]

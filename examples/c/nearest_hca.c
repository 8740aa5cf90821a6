/*
 * The nearest RDMA HCA port for each GPU, from its PCI bus id: what an NCCL net
 * plugin or an MPI launcher needs before it opens a device. Copy freely.
 *
 *   nearest_hca [--root DIR] [BUS_ID...]
 *
 * Without BUS_IDs it goes through every GPU. A BUS_ID may be in sysfs form
 * (0000:3b:00.0) or in NVML / CUDA form (00000000:3B:00.0), as cudaDeviceGetPCIBusId
 * gives it. --root reads a captured tree instead of this machine.
 *
 * Build: cc -std=c11 nearest_hca.c $(pkg-config --cflags --libs rdmatopo) -o nearest_hca
 */
#include <rdmatopo.h>

#include <stdio.h>
#include <string.h>

/* Report a failed call: the message names the function and what was wrong. */
static int fail(rdmatopo_status status) {
    fprintf(stderr, "nearest_hca: %s (%s)\n", rdmatopo_last_error_message(),
            rdmatopo_status_name((int)status));
    return 1;
}

/* One line per nearest HCA port of the GPU at `bus_id`. */
static int show_gpu(const rdmatopo_topology *topo, const char *bus_id) {
    size_t gpu_index, nics[64], count;
    rdmatopo_gpu_info gpu;
    rdmatopo_path path;
    rdmatopo_status s;

    if ((s = rdmatopo_topology_find_gpu(topo, bus_id, &gpu_index)) != RDMATOPO_STATUS_OK)
        return fail(s);
    if ((s = rdmatopo_topology_gpu(topo, gpu_index, &gpu)) != RDMATOPO_STATUS_OK)
        return fail(s);

    s = rdmatopo_nearest_nics(topo, bus_id, nics, sizeof nics / sizeof nics[0], &count, &path);
    if (s == RDMATOPO_STATUS_NOT_FOUND) {
        printf("GPU%zu %s: no RDMA device\n", gpu.index, gpu.pci_address);
        return 0;
    }
    if (s != RDMATOPO_STATUS_OK) return fail(s);

    for (size_t i = 0; i < count; i++) {
        rdmatopo_nic_info nic;
        if ((s = rdmatopo_topology_nic(topo, nics[i], &nic)) != RDMATOPO_STATUS_OK)
            return fail(s);
        for (size_t p = 0; p < nic.port_count; p++) {
            rdmatopo_port_info port;
            if ((s = rdmatopo_topology_nic_port(topo, nics[i], p, &port)) != RDMATOPO_STATUS_OK)
                return fail(s);
            printf("GPU%zu %s (NUMA %d) -> %s:%u %s %s %s, netdev %s", gpu.index,
                   gpu.pci_address, gpu.numa_node, nic.name, port.number, path.name,
                   port.link_layer ? port.link_layer : "?",
                   port.state == RDMATOPO_PORT_STATE_ACTIVE ? "ACTIVE" : "not active",
                   port.netdev ? port.netdev : "-");
            /* RoCE needs a GID index; InfiniBand ports answer NO_VALUE. */
            uint32_t gid;
            if (rdmatopo_gid_index(topo, nic.name, port.number, &gid) == RDMATOPO_STATUS_OK)
                printf(", GID index %u", gid);
            printf("\n");
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *root = NULL; /* NULL: this machine */
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "--root") == 0) {
        root = argv[2];
        first = 3;
    }

    rdmatopo_topology *topo = NULL;
    rdmatopo_status s = rdmatopo_topology_discover(root, &topo);
    if (s != RDMATOPO_STATUS_OK) return fail(s);

    int rc = 0;
    if (first < argc) {
        for (int i = first; i < argc; i++) rc |= show_gpu(topo, argv[i]);
    } else {
        size_t n = 0;
        rdmatopo_topology_gpu_count(topo, &n);
        if (n == 0) printf("no GPU\n");
        for (size_t i = 0; i < n; i++) {
            rdmatopo_gpu_info gpu;
            if ((s = rdmatopo_topology_gpu(topo, i, &gpu)) != RDMATOPO_STATUS_OK) {
                rc = fail(s);
                break;
            }
            rc |= show_gpu(topo, gpu.nvml_bus_id);
        }
    }
    rdmatopo_topology_free(topo);
    return rc;
}

/*
 * Tests of the C API on the DGX H100 fixture (fixtures/h100-dgx: 8 H100 on NVSwitch,
 * mlx5_0..mlx5_11, two NUMA nodes). Every function with NULL and bad arguments,
 * buffer-too-small paths, free of NULL, and reads from several threads on one handle.
 * Built with -Wall -Wextra -Werror and run under valgrind by `make -C rdmatopo-c test`.
 *
 * usage: test_api FIXTURE_ROOT [ROCE_ROOT [POD_ROOT]]  run the tests; ROCE_ROOT is
 *                                           fixtures/roce-lag, POD_ROOT fixtures/pod-sriov
 *        test_api FIXTURE_ROOT --json       print rdmatopo_topology_to_json of the whole
 *                                           machine (compared with `rdmatopo inventory
 *                                           --all --format json`)
 *        test_api FIXTURE_ROOT --json-owned the same of the default view (compared with
 *                                           `rdmatopo inventory --format json`)
 */
#define _POSIX_C_SOURCE 200809L
#include "rdmatopo.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            fprintf(stderr, "%s:%d: FAILED: %s (last error: %s)\n", __FILE__,       \
                    __LINE__, #cond, rdmatopo_last_error_message());                \
        }                                                                           \
    } while (0)

/* A status check that prints the name of what came back. */
#define CHECK_STATUS(call, expected)                                                \
    do {                                                                            \
        rdmatopo_status got_ = (call);                                              \
        if (got_ == (expected)) {                                                   \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            fprintf(stderr, "%s:%d: FAILED: %s returned %s, expected %s (%s)\n",    \
                    __FILE__, __LINE__, #call, rdmatopo_status_name((int)got_),     \
                    #expected, rdmatopo_last_error_message());                      \
        }                                                                           \
    } while (0)

static int contains(const char *haystack, const char *needle) {
    return haystack != NULL && strstr(haystack, needle) != NULL;
}

/* The fixture's GPUs in PCI order, and the HCA on the same PCIe switch as each. */
static const char *const GPUS[8] = {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
                                    "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"};
static const char *const RAILS[8] = {"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5",
                                     "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};

/* ---------------------------------------------------------------- version, status */

static void test_version(void) {
    char expected[64];
    CHECK(strcmp(rdmatopo_version(), RDMATOPO_VERSION) == 0);
    snprintf(expected, sizeof expected, "%d.%d.%d", RDMATOPO_VERSION_MAJOR,
             RDMATOPO_VERSION_MINOR, RDMATOPO_VERSION_PATCH);
    CHECK(strcmp(expected, RDMATOPO_VERSION) == 0);
    CHECK(RDMATOPO_VERSION_NUMBER == RDMATOPO_VERSION_MAJOR * 10000 +
                                         RDMATOPO_VERSION_MINOR * 100 +
                                         RDMATOPO_VERSION_PATCH);
}

#define CHECK_NAME(s) CHECK(strcmp(rdmatopo_status_name(s), #s) == 0)

static void test_status_names(void) {
    CHECK_NAME(RDMATOPO_STATUS_OK);
    CHECK_NAME(RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_NAME(RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK_NAME(RDMATOPO_STATUS_BUFFER_TOO_SMALL);
    CHECK_NAME(RDMATOPO_STATUS_INDEX_OUT_OF_RANGE);
    CHECK_NAME(RDMATOPO_STATUS_IO);
    CHECK_NAME(RDMATOPO_STATUS_PARSE);
    CHECK_NAME(RDMATOPO_STATUS_NOT_FOUND);
    CHECK_NAME(RDMATOPO_STATUS_NO_VALUE);
    CHECK_NAME(RDMATOPO_STATUS_OUTSIDE_VIEW);
    CHECK_NAME(RDMATOPO_STATUS_INTERNAL);
    CHECK_NAME(RDMATOPO_STATUS_PANIC);
    CHECK(strcmp(rdmatopo_status_name(-1), "RDMATOPO_STATUS_UNKNOWN") == 0);
    CHECK(strcmp(rdmatopo_status_name(99999), "RDMATOPO_STATUS_UNKNOWN") == 0);
    /* The documented ranges. */
    CHECK(RDMATOPO_STATUS_OK == 0);
    CHECK(RDMATOPO_STATUS_NULL_ARGUMENT / 100 == 1 && RDMATOPO_STATUS_INDEX_OUT_OF_RANGE / 100 == 1);
    CHECK(RDMATOPO_STATUS_IO / 100 == 2);
    CHECK(RDMATOPO_STATUS_PARSE / 100 == 3);
    CHECK(RDMATOPO_STATUS_NOT_FOUND / 100 == 4 && RDMATOPO_STATUS_NO_VALUE / 100 == 4);
    CHECK(RDMATOPO_STATUS_OUTSIDE_VIEW / 100 == 4);
    CHECK(RDMATOPO_STATUS_INTERNAL / 100 == 9 && RDMATOPO_STATUS_PANIC / 100 == 9);
}

/* ---------------------------------------------------------------- lifecycle */

static rdmatopo_topology *const SENTINEL = (rdmatopo_topology *)0x1;

static void test_discover(const char *root) {
    rdmatopo_topology *t = SENTINEL;

    CHECK_STATUS(rdmatopo_topology_discover(root, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK(contains(rdmatopo_last_error_message(), "rdmatopo_topology_discover"));
    CHECK(contains(rdmatopo_last_error_message(), "`out`"));

    CHECK_STATUS(rdmatopo_topology_discover("/nonexistent/rdmatopo-root", &t), RDMATOPO_STATUS_IO);
    CHECK(t == SENTINEL); /* out-parameters only on success */
    CHECK(contains(rdmatopo_last_error_message(), "/nonexistent/rdmatopo-root"));

    /* A directory that exists but holds no sysfs. */
    char dev_dir[4096];
    snprintf(dev_dir, sizeof dev_dir, "%s/dev", root);
    CHECK_STATUS(rdmatopo_topology_discover(dev_dir, &t), RDMATOPO_STATUS_IO);
    CHECK(t == SENTINEL);
    CHECK(contains(rdmatopo_last_error_message(), "no sysfs"));

    CHECK_STATUS(rdmatopo_topology_discover(root, &t), RDMATOPO_STATUS_OK);
    CHECK(t != NULL && t != SENTINEL);
    rdmatopo_topology_free(t);

    rdmatopo_topology_free(NULL); /* a no-op */
}

static void test_json(rdmatopo_topology *t) {
    size_t required = 0, again = 0;
    char small[8];
    rdmatopo_topology *back = SENTINEL;

    CHECK_STATUS(rdmatopo_topology_to_json(NULL, NULL, 0, &required), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK(required == 0);
    CHECK_STATUS(rdmatopo_topology_to_json(t, NULL, 10, &required), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK(required == 0);

    /* Size query, then a buffer one byte short: only `required` is written. */
    CHECK_STATUS(rdmatopo_topology_to_json(t, NULL, 0, &required), RDMATOPO_STATUS_BUFFER_TOO_SMALL);
    CHECK(required > 1000);
    CHECK(contains(rdmatopo_last_error_message(), "bytes"));
    memset(small, 'Z', sizeof small);
    CHECK_STATUS(rdmatopo_topology_to_json(t, small, sizeof small, &again), RDMATOPO_STATUS_BUFFER_TOO_SMALL);
    CHECK(again == required);
    CHECK(small[0] == 'Z' && small[7] == 'Z');
    char *json = malloc(required);
    memset(json, 'Z', required);
    CHECK_STATUS(rdmatopo_topology_to_json(t, json, required - 1, NULL), RDMATOPO_STATUS_BUFFER_TOO_SMALL);
    CHECK(json[0] == 'Z');

    /* Exact size; `required` may be NULL. */
    CHECK_STATUS(rdmatopo_topology_to_json(t, json, required, NULL), RDMATOPO_STATUS_OK);
    CHECK(strlen(json) == required - 1);
    CHECK(json[0] == '{' && json[required - 2] == '\n');
    CHECK(contains(json, "\"schema\": \"rdmatopo.inventory/2\""));

    /* Round trip through JSON gives the same JSON. */
    CHECK_STATUS(rdmatopo_topology_from_json(json, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_from_json(NULL, &back), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK(back == SENTINEL);
    CHECK_STATUS(rdmatopo_topology_from_json(json, &back), RDMATOPO_STATUS_OK);
    if (back != SENTINEL) {
        size_t back_required = 0;
        char *json2 = malloc(required);
        CHECK_STATUS(rdmatopo_topology_to_json(back, json2, required, &back_required), RDMATOPO_STATUS_OK);
        CHECK(back_required == required && strcmp(json, json2) == 0);
        free(json2);
        rdmatopo_topology_free(back);
    }
    free(json);

    back = SENTINEL;
    CHECK_STATUS(rdmatopo_topology_from_json("{\"schema\": 1}", &back), RDMATOPO_STATUS_PARSE);
    CHECK_STATUS(rdmatopo_topology_from_json("", &back), RDMATOPO_STATUS_PARSE);
    CHECK_STATUS(rdmatopo_topology_from_json("\xff\xfe not UTF-8", &back), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(contains(rdmatopo_last_error_message(), "UTF-8"));
    CHECK(back == SENTINEL);
}

/* ---------------------------------------------------------------- devices */

static void test_counts(rdmatopo_topology *t) {
    size_t n = 12345;
    CHECK_STATUS(rdmatopo_topology_gpu_count(NULL, &n), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_gpu_count(t, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_nic_count(NULL, &n), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_nic_count(t, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK(n == 12345);
    CHECK_STATUS(rdmatopo_topology_gpu_count(t, &n), RDMATOPO_STATUS_OK);
    CHECK(n == 8);
    CHECK_STATUS(rdmatopo_topology_nic_count(t, &n), RDMATOPO_STATUS_OK);
    CHECK(n == 12);
}

static void test_gpus(rdmatopo_topology *t) {
    rdmatopo_gpu_info g;
    size_t index = 777;

    memset(&g, 0, sizeof g);
    CHECK_STATUS(rdmatopo_topology_gpu(NULL, 0, &g), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_gpu(t, 0, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_gpu(t, 8, &g), RDMATOPO_STATUS_INDEX_OUT_OF_RANGE);
    CHECK_STATUS(rdmatopo_topology_gpu(t, (size_t)-1, &g), RDMATOPO_STATUS_INDEX_OUT_OF_RANGE);
    CHECK(g.pci_address == NULL);

    CHECK_STATUS(rdmatopo_topology_gpu(t, 0, &g), RDMATOPO_STATUS_OK);
    CHECK(g.index == 0);
    CHECK(strcmp(g.pci_address, "0000:1b:00.0") == 0);
    CHECK(strcmp(g.nvml_bus_id, "00000000:1B:00.0") == 0);
    CHECK(g.uuid != NULL && strncmp(g.uuid, "GPU-", 4) == 0);
    CHECK(contains(g.name, "H100"));
    CHECK(g.numa_node == 0);
    CHECK_STATUS(rdmatopo_topology_gpu(t, 7, &g), RDMATOPO_STATUS_OK);
    CHECK(g.index == 7 && g.numa_node == 1);
    /* On a host every answer names a GPU by its host index. */
    int64_t view_index = -1;
    const char *view_name = NULL;
    CHECK_STATUS(rdmatopo_topology_gpu_view_name(t, 7, &view_index, &view_name), RDMATOPO_STATUS_OK);
    CHECK(view_index == 7 && view_name != NULL && strcmp(view_name, "GPU7") == 0);
    CHECK_STATUS(rdmatopo_topology_gpu_view_name(NULL, 7, &view_index, &view_name),
                 RDMATOPO_STATUS_NULL_ARGUMENT);

    /* find_gpu: both bus id forms, the short form, bad ids, a NIC's address. */
    CHECK_STATUS(rdmatopo_topology_find_gpu(NULL, "0000:1b:00.0", &index), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_find_gpu(t, NULL, &index), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_find_gpu(t, "0000:1b:00.0", NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_find_gpu(t, "not-a-bus-id", &index), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(contains(rdmatopo_last_error_message(), "bus_id"));
    CHECK_STATUS(rdmatopo_topology_find_gpu(t, "0000:1b:00.9", &index), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_find_gpu(t, "0000:18:00.0", &index), RDMATOPO_STATUS_NOT_FOUND);
    CHECK(contains(rdmatopo_last_error_message(), "0000:18:00.0"));
    CHECK(index == 777);
    CHECK_STATUS(rdmatopo_topology_find_gpu(t, "0000:9d:00.0", &index), RDMATOPO_STATUS_OK);
    CHECK(index == 4);
    CHECK_STATUS(rdmatopo_topology_find_gpu(t, "00000000:9D:00.0", &index), RDMATOPO_STATUS_OK);
    CHECK(index == 4);
    CHECK_STATUS(rdmatopo_topology_find_gpu(t, "df:00.0", &index), RDMATOPO_STATUS_OK);
    CHECK(index == 7);
}

static void test_nics(rdmatopo_topology *t) {
    rdmatopo_nic_info n;
    rdmatopo_port_info p;
    size_t index = 777;

    memset(&n, 0, sizeof n);
    memset(&p, 0, sizeof p);
    CHECK_STATUS(rdmatopo_topology_nic(NULL, 0, &n), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_nic(t, 0, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_nic(t, 12, &n), RDMATOPO_STATUS_INDEX_OUT_OF_RANGE);
    CHECK(n.name == NULL);

    CHECK_STATUS(rdmatopo_topology_nic(t, 0, &n), RDMATOPO_STATUS_OK);
    CHECK(strcmp(n.name, "mlx5_0") == 0);
    CHECK(strcmp(n.pci_address, "0000:18:00.0") == 0);
    CHECK(n.numa_node == 0);
    CHECK(!n.is_virtual_function);
    CHECK(n.port_count == 1);
    /* NIC order is natural name order: mlx5_10 after mlx5_9. */
    CHECK_STATUS(rdmatopo_topology_nic(t, 10, &n), RDMATOPO_STATUS_OK);
    CHECK(strcmp(n.name, "mlx5_10") == 0 && n.numa_node == 1);

    CHECK_STATUS(rdmatopo_topology_nic_port(NULL, 0, 0, &p), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_nic_port(t, 0, 0, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_nic_port(t, 12, 0, &p), RDMATOPO_STATUS_INDEX_OUT_OF_RANGE);
    CHECK_STATUS(rdmatopo_topology_nic_port(t, 0, 1, &p), RDMATOPO_STATUS_INDEX_OUT_OF_RANGE);
    CHECK(contains(rdmatopo_last_error_message(), "mlx5_0 port index 1"));
    CHECK(p.link_layer == NULL);

    CHECK_STATUS(rdmatopo_topology_nic_port(t, 0, 0, &p), RDMATOPO_STATUS_OK);
    CHECK(p.number == 1);
    CHECK(p.state == RDMATOPO_PORT_STATE_ACTIVE);
    CHECK(p.link_layer != NULL && strcmp(p.link_layer, "InfiniBand") == 0);
    CHECK(p.rate_gbps == 400.0);
    CHECK(p.netdev != NULL && strcmp(p.netdev, "ibp24s0") == 0);
    CHECK(p.gid_count == 1);
    /* mlx5_2: the second port of the RoCE card, down. */
    CHECK_STATUS(rdmatopo_topology_nic_port(t, 2, 0, &p), RDMATOPO_STATUS_OK);
    CHECK(p.state == RDMATOPO_PORT_STATE_DOWN);
    CHECK(strcmp(p.link_layer, "Ethernet") == 0);

    CHECK_STATUS(rdmatopo_topology_find_nic(NULL, "mlx5_0", &index), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, NULL, &index), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "mlx5_0", NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "mlx5_1", &index), RDMATOPO_STATUS_OK);
    CHECK(index == 1);
    /* Exact names: mlx5_1 does not match mlx5_10 (NCCL_IB_HCA's prefix trap). */
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "mlx5_10", &index), RDMATOPO_STATUS_OK);
    CHECK(index == 10);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "00000000:AA:00.1", &index), RDMATOPO_STATUS_OK);
    CHECK(index == 8);
    index = 777;
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "mlx5", &index), RDMATOPO_STATUS_NOT_FOUND);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "0000:1b:00.0", &index), RDMATOPO_STATUS_NOT_FOUND);
    CHECK(index == 777);
}

/* ---------------------------------------------------------------- paths */

static void test_path_type(rdmatopo_topology *t) {
    rdmatopo_path p;
    memset(&p, 0, sizeof p);
    p.path_class = RDMATOPO_PATH_CLASS_SYS;

    CHECK_STATUS(rdmatopo_path_type(NULL, "0000:1b:00.0", "0000:18:00.0", &p), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_path_type(t, NULL, "0000:18:00.0", &p), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", NULL, &p), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", "0000:18:00.0", NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00", "0000:18:00.0", &p), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(contains(rdmatopo_last_error_message(), "bus_id_a"));
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", "mlx5_0", &p), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(contains(rdmatopo_last_error_message(), "bus_id_b"));
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", "0000:fe:1f.7", &p), RDMATOPO_STATUS_NOT_FOUND);
    CHECK(p.path_class == RDMATOPO_PATH_CLASS_SYS && p.name[0] == '\0');

    /* GPU0 and its rail NIC mlx5_0 share a PCIe switch (nvidia-smi: PXB). */
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", "0000:18:00.0", &p), RDMATOPO_STATUS_OK);
    CHECK(p.path_class == RDMATOPO_PATH_CLASS_PXB && p.nvlinks == 0 && strcmp(p.name, "PXB") == 0);
    /* The same pair in NVML form, reversed. */
    CHECK_STATUS(rdmatopo_path_type(t, "00000000:18:00.0", "00000000:1B:00.0", &p), RDMATOPO_STATUS_OK);
    CHECK(p.path_class == RDMATOPO_PATH_CLASS_PXB);
    /* GPU pairs through the NVSwitches: NV18, even across sockets. */
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", "00000000:DF:00.0", &p), RDMATOPO_STATUS_OK);
    CHECK(p.path_class == RDMATOPO_PATH_CLASS_NV && p.nvlinks == 18 && strcmp(p.name, "NV18") == 0);
    /* GPU0 to a NIC of the other socket. */
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", "0000:9a:00.0", &p), RDMATOPO_STATUS_OK);
    CHECK(p.path_class == RDMATOPO_PATH_CLASS_SYS && strcmp(p.name, "SYS") == 0);
    /* Same socket, other host bridge. */
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", "0000:40:00.0", &p), RDMATOPO_STATUS_OK);
    CHECK(p.path_class == RDMATOPO_PATH_CLASS_NODE);
    /* The two ports of one dual-port card. */
    CHECK_STATUS(rdmatopo_path_type(t, "0000:29:00.0", "0000:29:00.1", &p), RDMATOPO_STATUS_OK);
    CHECK(p.path_class == RDMATOPO_PATH_CLASS_PIX && strcmp(p.name, "PIX") == 0);
    CHECK_STATUS(rdmatopo_path_type(t, "0000:1b:00.0", "1b:00.0", &p), RDMATOPO_STATUS_OK);
    CHECK(p.path_class == RDMATOPO_PATH_CLASS_X && strcmp(p.name, "X") == 0);
}

static void test_nearest_nics(rdmatopo_topology *t) {
    size_t idx[16];
    size_t count = 777;
    rdmatopo_path p;
    memset(&p, 0, sizeof p);
    idx[0] = 555;

    CHECK_STATUS(rdmatopo_nearest_nics(NULL, "0000:1b:00.0", idx, 16, &count, &p), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_nearest_nics(t, NULL, idx, 16, &count, &p), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_nearest_nics(t, "0000:1b:00.0", NULL, 16, &count, &p), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_nearest_nics(t, "0000:1b:00.0", idx, 16, NULL, &p), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_nearest_nics(t, "garbage", idx, 16, &count, &p), RDMATOPO_STATUS_INVALID_ARGUMENT);
    /* A NIC is not a GPU. */
    CHECK_STATUS(rdmatopo_nearest_nics(t, "0000:18:00.0", idx, 16, &count, &p), RDMATOPO_STATUS_NOT_FOUND);
    CHECK(count == 777 && idx[0] == 555 && p.name[0] == '\0');

    /* Size query: NULL with capacity 0 reports the count needed. */
    CHECK_STATUS(rdmatopo_nearest_nics(t, "0000:1b:00.0", NULL, 0, &count, &p), RDMATOPO_STATUS_BUFFER_TOO_SMALL);
    CHECK(count == 1 && p.name[0] == '\0');

    /* path may be NULL. */
    CHECK_STATUS(rdmatopo_nearest_nics(t, "0000:1b:00.0", idx, 16, &count, NULL), RDMATOPO_STATUS_OK);
    CHECK(count == 1 && idx[0] == 0); /* mlx5_0 */

    /* Every GPU of the DGX has its own rail NIC at PXB. */
    for (int g = 0; g < 8; g++) {
        rdmatopo_nic_info n;
        memset(&n, 0, sizeof n);
        CHECK_STATUS(rdmatopo_nearest_nics(t, GPUS[g], idx, 1, &count, &p), RDMATOPO_STATUS_OK);
        CHECK(count == 1 && p.path_class == RDMATOPO_PATH_CLASS_PXB);
        CHECK_STATUS(rdmatopo_topology_nic(t, idx[0], &n), RDMATOPO_STATUS_OK);
        CHECK(n.name != NULL && strcmp(n.name, RAILS[g]) == 0);
    }
}

/* ---------------------------------------------------------------- GID, rank plan */

static void test_gid_index(rdmatopo_topology *t) {
    uint32_t gid = 777;
    CHECK_STATUS(rdmatopo_gid_index(NULL, "mlx5_1", 1, &gid), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_gid_index(t, NULL, 1, &gid), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_1", 1, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_1", 0, &gid), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_99", 1, &gid), RDMATOPO_STATUS_NOT_FOUND);
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_1", 2, &gid), RDMATOPO_STATUS_NOT_FOUND);
    CHECK(contains(rdmatopo_last_error_message(), "mlx5_1 has no port 2"));
    /* InfiniBand: NCCL ignores GID indices there. */
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_0", 1, &gid), RDMATOPO_STATUS_NO_VALUE);
    CHECK(contains(rdmatopo_last_error_message(), "InfiniBand"));
    /* The down RoCE port has only link-local GIDs. */
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_2", 1, &gid), RDMATOPO_STATUS_NO_VALUE);
    CHECK(contains(rdmatopo_last_error_message(), "link-local"));
    CHECK(gid == 777);
    /* The RoCE port: slots 0-1 link-local, 2 IPv4 RoCE v1, 3 IPv4 RoCE v2. */
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_1", 1, &gid), RDMATOPO_STATUS_OK);
    CHECK(gid == 3);
}

static void test_rank_plan(rdmatopo_topology *t) {
    rdmatopo_rank_plan *plan = (rdmatopo_rank_plan *)0x1;
    rdmatopo_rank_info info;
    const char *bad_env[] = {"LOCAL_RANK", NULL};
    const char *rank5_env[] = {"PATH=/usr/bin", "LOCAL_RANK=5", NULL};
    const char *one_gpu_env[] = {"CUDA_VISIBLE_DEVICES=4", NULL};
    const char *empty_env[] = {NULL};

    CHECK_STATUS(rdmatopo_rank_plan_compute(NULL, 0, -1, NULL, &plan), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, 0, -1, NULL, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, -2, -1, NULL, &plan), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, 0, -7, NULL, &plan), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, 8, 8, NULL, &plan), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(contains(rdmatopo_last_error_message(), "not below the local world size"));
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, 0, -1, bad_env, &plan), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(contains(rdmatopo_last_error_message(), "NAME=VALUE"));
    /* No rank given, none in the captured environment, 8 GPUs: ambiguous. */
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, -1, -1, NULL, &plan), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(contains(rdmatopo_last_error_message(), "LOCAL_RANK"));
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, -1, -1, empty_env, &plan), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(plan == (rdmatopo_rank_plan *)0x1);

    /* Each rank of a full node: its GPU, its rail, its share of the NUMA node. */
    for (int r = 0; r < 8; r++) {
        char rail[32];
        plan = NULL;
        CHECK_STATUS(rdmatopo_rank_plan_compute(t, r, 8, NULL, &plan), RDMATOPO_STATUS_OK);
        if (plan == NULL) continue;
        CHECK_STATUS(rdmatopo_rank_plan_info(plan, &info), RDMATOPO_STATUS_OK);
        snprintf(rail, sizeof rail, "%s:1", RAILS[r]);
        CHECK(info.local_rank == (uint32_t)r);
        CHECK(strcmp(info.gpu_pci_address, GPUS[r]) == 0);
        CHECK(strcmp(info.hcas, rail) == 0);
        CHECK(info.numa_node == (r < 4 ? 0 : 1));
        CHECK(info.gid_index == -1); /* InfiniBand */
        CHECK(info.cpu_count == 28); /* 56 hyperthreads of a node over 4 ranks */
        CHECK(info.nccl_ib_hca != NULL &&
              strcmp(info.nccl_ib_hca, "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,"
                                       "mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1") == 0);
        rdmatopo_rank_plan_free(plan);
    }

    /* The rank from an environment passed in. */
    plan = NULL;
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, -1, -1, rank5_env, &plan), RDMATOPO_STATUS_OK);
    if (plan != NULL) {
        CHECK_STATUS(rdmatopo_rank_plan_info(plan, &info), RDMATOPO_STATUS_OK);
        CHECK(info.local_rank == 5 && strcmp(info.gpu_pci_address, GPUS[5]) == 0);
        rdmatopo_rank_plan_free(plan);
    }
    /* CUDA_VISIBLE_DEVICES=4: one rank, on the fifth GPU. */
    plan = NULL;
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, -1, -1, one_gpu_env, &plan), RDMATOPO_STATUS_OK);
    if (plan != NULL) {
        CHECK_STATUS(rdmatopo_rank_plan_info(plan, &info), RDMATOPO_STATUS_OK);
        CHECK(info.local_rank == 0 && strcmp(info.gpu_pci_address, GPUS[4]) == 0);
        CHECK(strcmp(info.hcas, "mlx5_6:1") == 0);
        rdmatopo_rank_plan_free(plan);
    }

    /* Accessors of one plan. */
    plan = NULL;
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, 0, 8, NULL, &plan), RDMATOPO_STATUS_OK);
    if (plan == NULL) return;
    CHECK_STATUS(rdmatopo_rank_plan_info(plan, &info), RDMATOPO_STATUS_OK);
    CHECK(strcmp(info.cpus, "0-13,112-125") == 0);
    CHECK_STATUS(rdmatopo_rank_plan_info(NULL, &info), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_info(plan, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);

    uint32_t cpus[64];
    size_t count = 777;
    cpus[0] = 777;
    CHECK_STATUS(rdmatopo_rank_plan_cpu_ids(NULL, cpus, 64, &count), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_cpu_ids(plan, NULL, 64, &count), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_cpu_ids(plan, cpus, 64, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK(count == 777);
    CHECK_STATUS(rdmatopo_rank_plan_cpu_ids(plan, NULL, 0, &count), RDMATOPO_STATUS_BUFFER_TOO_SMALL);
    CHECK(count == info.cpu_count);
    CHECK_STATUS(rdmatopo_rank_plan_cpu_ids(plan, cpus, 27, &count), RDMATOPO_STATUS_BUFFER_TOO_SMALL);
    CHECK(cpus[0] == 777);
    CHECK_STATUS(rdmatopo_rank_plan_cpu_ids(plan, cpus, 64, &count), RDMATOPO_STATUS_OK);
    CHECK(count == 28 && cpus[0] == 0 && cpus[13] == 13 && cpus[14] == 112 && cpus[27] == 125);

    const char *name = NULL, *value = NULL;
    CHECK_STATUS(rdmatopo_rank_plan_env(NULL, 0, &name, &value), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_env(plan, 0, NULL, &value), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_env(plan, 0, &name, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_env(plan, info.env_count, &name, &value), RDMATOPO_STATUS_INDEX_OUT_OF_RANGE);
    CHECK(name == NULL && value == NULL);
    int saw_hca = 0;
    for (size_t i = 0; i < info.env_count; i++) {
        CHECK_STATUS(rdmatopo_rank_plan_env(plan, i, &name, &value), RDMATOPO_STATUS_OK);
        CHECK(name != NULL && strncmp(name, "NCCL_", 5) == 0 && value != NULL);
        if (name != NULL && strcmp(name, "NCCL_IB_HCA") == 0)
            saw_hca = value != NULL && strcmp(value, info.nccl_ib_hca) == 0;
    }
    CHECK(saw_hca);

    size_t required = 0;
    char small[4] = {'Z', 'Z', 'Z', 'Z'};
    CHECK_STATUS(rdmatopo_rank_plan_to_json(NULL, NULL, 0, &required), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_to_json(plan, NULL, 5, &required), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_rank_plan_to_json(plan, small, sizeof small, &required), RDMATOPO_STATUS_BUFFER_TOO_SMALL);
    CHECK(small[0] == 'Z' && required > sizeof small);
    char *json = malloc(required);
    CHECK_STATUS(rdmatopo_rank_plan_to_json(plan, json, required, NULL), RDMATOPO_STATUS_OK);
    CHECK(strlen(json) + 1 == required);
    CHECK(contains(json, "\"schema\": \"rdmatopo.nccl-env/1\""));
    CHECK(contains(json, "\"reasons\""));
    free(json);

    rdmatopo_rank_plan_free(plan);
    rdmatopo_rank_plan_free(NULL); /* a no-op */
}

/* fixtures/roce-lag: 2 A30 and one ConnectX-6 Dx whose two ports form a RoCE LAG
 * (mlx5_bond_0 on bond0, GIDs 2/3 = ::ffff:172.16.40.21 v1/v2). */
static void test_roce(const char *root) {
    rdmatopo_topology *t = NULL;
    CHECK_STATUS(rdmatopo_topology_discover(root, &t), RDMATOPO_STATUS_OK);
    if (t == NULL) return;

    uint32_t gid = 777;
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_bond_0", 1, &gid), RDMATOPO_STATUS_OK);
    CHECK(gid == 3);

    size_t idx[4], count = 0;
    rdmatopo_path p;
    rdmatopo_nic_info n;
    CHECK_STATUS(rdmatopo_nearest_nics(t, "0000:01:00.0", idx, 4, &count, &p), RDMATOPO_STATUS_OK);
    CHECK(count == 1 && p.path_class == RDMATOPO_PATH_CLASS_NODE);
    CHECK_STATUS(rdmatopo_topology_nic(t, idx[0], &n), RDMATOPO_STATUS_OK);
    CHECK(strcmp(n.name, "mlx5_bond_0") == 0);

    rdmatopo_rank_plan *plan = NULL;
    rdmatopo_rank_info info;
    CHECK_STATUS(rdmatopo_rank_plan_compute(t, 1, -1, NULL, &plan), RDMATOPO_STATUS_OK);
    if (plan != NULL) {
        CHECK_STATUS(rdmatopo_rank_plan_info(plan, &info), RDMATOPO_STATUS_OK);
        CHECK(strcmp(info.gpu_pci_address, "0000:41:00.0") == 0);
        CHECK(info.gid_index == 3);
        CHECK(strcmp(info.nccl_ib_hca, "=mlx5_bond_0:1") == 0);
        rdmatopo_rank_plan_free(plan);
    }
    rdmatopo_topology_free(t);
}

/* ---------------------------------------------------------------- threads */

#define THREADS 8
#define ROUNDS 200

struct worker {
    rdmatopo_topology *topo;
    int id;
    int errors;
};

static void *reader(void *arg) {
    struct worker *w = arg;
    char marker[32];
    snprintf(marker, sizeof marker, "no_such_dev_%d", w->id);
    for (int r = 0; r < ROUNDS; r++) {
        size_t n = 0, idx[4], count = 0, required = 0;
        rdmatopo_gpu_info g;
        rdmatopo_path p;
        if (rdmatopo_topology_gpu_count(w->topo, &n) != RDMATOPO_STATUS_OK || n != 8) w->errors++;
        if (rdmatopo_topology_gpu(w->topo, (size_t)(r % 8), &g) != RDMATOPO_STATUS_OK) {
            w->errors++;
            continue;
        }
        if (rdmatopo_path_type(w->topo, g.pci_address, "0000:18:00.0", &p) != RDMATOPO_STATUS_OK) w->errors++;
        if (rdmatopo_nearest_nics(w->topo, g.nvml_bus_id, idx, 4, &count, NULL) != RDMATOPO_STATUS_OK ||
            count != 1)
            w->errors++;
        if (r % 50 == 0 && rdmatopo_topology_to_json(w->topo, NULL, 0, &required) !=
                               RDMATOPO_STATUS_BUFFER_TOO_SMALL)
            w->errors++;
        if (r % 50 == 0) {
            rdmatopo_rank_plan *plan = NULL;
            rdmatopo_rank_info info;
            int rank = (w->id + r) % 8;
            if (rdmatopo_rank_plan_compute(w->topo, rank, 8, NULL, &plan) != RDMATOPO_STATUS_OK ||
                rdmatopo_rank_plan_info(plan, &info) != RDMATOPO_STATUS_OK ||
                strcmp(info.gpu_pci_address, GPUS[rank]) != 0)
                w->errors++;
            rdmatopo_rank_plan_free(plan);
        }
        /* Each thread's failures and messages are its own. */
        if (rdmatopo_topology_find_nic(w->topo, marker, &n) != RDMATOPO_STATUS_NOT_FOUND) w->errors++;
        if (!contains(rdmatopo_last_error_message(), marker)) w->errors++;
    }
    return NULL;
}

static void *fresh_thread(void *arg) {
    int *empty = arg;
    *empty = strcmp(rdmatopo_last_error_message(), "") == 0;
    return NULL;
}

static void test_threads(rdmatopo_topology *t) {
    pthread_t th[THREADS];
    struct worker w[THREADS];
    int empty = 0;
    pthread_t fresh;

    /* A thread that never failed sees an empty message, whatever others did. */
    CHECK(pthread_create(&fresh, NULL, fresh_thread, &empty) == 0);
    pthread_join(fresh, NULL);
    CHECK(empty);

    for (int i = 0; i < THREADS; i++) {
        w[i].topo = t;
        w[i].id = i;
        w[i].errors = 0;
        CHECK(pthread_create(&th[i], NULL, reader, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(w[i].errors == 0);
    }
}

/* ---------------------------------------------------------------- pod view */

/* Inside the pod-sriov pod, discover reads the pod's devices in full (owned view):
 * another pod's VF is only named, and looking it up answers OUTSIDE_VIEW; the PF of
 * the pod's VF is held without its GIDs; the whole view reads them all. */
static void test_pod(const char *root) {
    rdmatopo_topology *t = NULL;
    size_t own = 0, other = 0, pf = 0;
    uint32_t gid = 0;
    rdmatopo_port_info port;
    CHECK_STATUS(rdmatopo_topology_discover(root, &t), RDMATOPO_STATUS_OK);
    if (t == NULL) return;
    CHECK(rdmatopo_topology_view(t) == RDMATOPO_VIEW_OWNED);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "mlx5_12", &own), RDMATOPO_STATUS_OK);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "mlx5_13", &other), RDMATOPO_STATUS_OUTSIDE_VIEW);
    CHECK(contains(rdmatopo_last_error_message(), "mlx5_13"));
    CHECK_STATUS(rdmatopo_topology_nic_port(t, own, 0, &port), RDMATOPO_STATUS_OK);
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_12", 1, &gid), RDMATOPO_STATUS_OK);
    CHECK(gid == 5);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "mlx5_0", &pf), RDMATOPO_STATUS_OK);
    CHECK_STATUS(rdmatopo_topology_nic_port(t, pf, 0, &port), RDMATOPO_STATUS_OUTSIDE_VIEW);
    CHECK(contains(rdmatopo_last_error_message(), "mlx5_0"));
    CHECK_STATUS(rdmatopo_gid_index(t, "mlx5_13", 1, &gid), RDMATOPO_STATUS_OUTSIDE_VIEW);
    /* The pod's one GPU (the host's GPU0) is its GPU0; another pod's keeps the host's
     * index, marked as the host's. */
    int64_t view_index = 0;
    const char *view_name = NULL;
    CHECK_STATUS(rdmatopo_topology_gpu_view_name(t, 0, &view_index, &view_name), RDMATOPO_STATUS_OK);
    CHECK(view_index == 0 && view_name != NULL && strcmp(view_name, "GPU0") == 0);
    CHECK_STATUS(rdmatopo_topology_gpu_view_name(t, 1, &view_index, &view_name), RDMATOPO_STATUS_OK);
    CHECK(view_index == -1 && view_name != NULL && strcmp(view_name, "host GPU1") == 0);
    CHECK_STATUS(rdmatopo_topology_gpu_view_name(t, 8, &view_index, &view_name),
                 RDMATOPO_STATUS_INDEX_OUT_OF_RANGE);
    CHECK_STATUS(rdmatopo_topology_gpu_view_name(t, 0, NULL, &view_name), RDMATOPO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(rdmatopo_topology_gpu_view_name(t, 0, &view_index, NULL), RDMATOPO_STATUS_NULL_ARGUMENT);
    rdmatopo_topology_free(t);

    t = NULL;
    CHECK_STATUS(rdmatopo_topology_discover_view(root, RDMATOPO_VIEW_ALL, &t), RDMATOPO_STATUS_OK);
    if (t == NULL) return;
    CHECK(rdmatopo_topology_view(t) == RDMATOPO_VIEW_ALL);
    CHECK_STATUS(rdmatopo_topology_find_nic(t, "mlx5_13", &other), RDMATOPO_STATUS_OK);
    CHECK_STATUS(rdmatopo_topology_nic_port(t, other, 0, &port), RDMATOPO_STATUS_OK);
    rdmatopo_topology_free(t);

    t = NULL;
    CHECK_STATUS(rdmatopo_topology_discover_view(root, 7, &t), RDMATOPO_STATUS_INVALID_ARGUMENT);
    CHECK(t == NULL);
    CHECK(rdmatopo_topology_view(NULL) == RDMATOPO_VIEW_ALL);
}

/* ---------------------------------------------------------------- main */

static int dump_json(const char *root, rdmatopo_view view) {
    rdmatopo_topology *t = NULL;
    size_t required = 0;
    if (rdmatopo_topology_discover_view(root, view, &t) != RDMATOPO_STATUS_OK) {
        fprintf(stderr, "discover: %s\n", rdmatopo_last_error_message());
        return 3;
    }
    rdmatopo_topology_to_json(t, NULL, 0, &required);
    char *buf = malloc(required);
    int rc = rdmatopo_topology_to_json(t, buf, required, NULL) == RDMATOPO_STATUS_OK ? 0 : 3;
    if (rc == 0) fputs(buf, stdout);
    free(buf);
    rdmatopo_topology_free(t);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FIXTURE_ROOT [ROCE_ROOT [POD_ROOT] | --json | --json-owned]\n",
                argv[0]);
        return 2;
    }
    const char *root = argv[1];
    if (argc > 2 && strcmp(argv[2], "--json") == 0) return dump_json(root, RDMATOPO_VIEW_ALL);
    if (argc > 2 && strcmp(argv[2], "--json-owned") == 0) return dump_json(root, RDMATOPO_VIEW_OWNED);

    /* Before any failure, this thread's message is empty. */
    CHECK(strcmp(rdmatopo_last_error_message(), "") == 0);
    test_version();
    test_status_names();
    test_discover(root);

    rdmatopo_topology *t = NULL;
    CHECK_STATUS(rdmatopo_topology_discover(root, &t), RDMATOPO_STATUS_OK);
    if (t == NULL) {
        fprintf(stderr, "cannot discover %s; stopping\n", root);
        return 1;
    }
    test_json(t);
    test_counts(t);
    test_gpus(t);
    test_nics(t);
    test_path_type(t);
    test_nearest_nics(t);
    test_gid_index(t);
    test_rank_plan(t);
    test_threads(t);
    rdmatopo_topology_free(t);
    if (argc > 2) test_roce(argv[2]);
    if (argc > 3) test_pod(argv[3]);

    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

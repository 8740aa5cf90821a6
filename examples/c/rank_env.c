/*
 * What a launcher sets for one local rank before it starts the process: the NCCL
 * variables and the CPU binding that rdmatopo's rank plan gives. Copy freely.
 *
 *   rank_env [--root DIR] LOCAL_RANK [LOCAL_WORLD_SIZE]
 *
 * Prints shell lines (export ...; taskset -c ...). A real launcher would call
 * setenv() for each variable and sched_setaffinity() with the CPU ids.
 *
 * Build: cc -std=c11 rank_env.c $(pkg-config --cflags --libs rdmatopo) -o rank_env
 */
#include <rdmatopo.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Report a failed call: the message names the function and what was wrong. */
static int fail(rdmatopo_status status) {
    fprintf(stderr, "rank_env: %s (%s)\n", rdmatopo_last_error_message(),
            rdmatopo_status_name((int)status));
    return 1;
}

int main(int argc, char **argv) {
    const char *root = NULL;
    int arg = 1;
    if (argc > 2 && strcmp(argv[1], "--root") == 0) {
        root = argv[2];
        arg = 3;
    }
    if (arg >= argc) {
        fprintf(stderr, "usage: rank_env [--root DIR] LOCAL_RANK [LOCAL_WORLD_SIZE]\n");
        return 2;
    }
    long rank = strtol(argv[arg], NULL, 10);
    long world = arg + 1 < argc ? strtol(argv[arg + 1], NULL, 10) : -1; /* -1: from the environment */

    rdmatopo_topology *topo = NULL;
    rdmatopo_status s = rdmatopo_topology_discover(root, &topo);
    if (s != RDMATOPO_STATUS_OK) return fail(s);

    rdmatopo_rank_plan *plan = NULL;
    rdmatopo_rank_info info;
    int rc = 0;
    s = rdmatopo_rank_plan_compute(topo, rank, world, NULL, &plan);
    if (s != RDMATOPO_STATUS_OK) {
        rc = fail(s);
        goto out;
    }
    if ((s = rdmatopo_rank_plan_info(plan, &info)) != RDMATOPO_STATUS_OK) {
        rc = fail(s);
        goto out;
    }

    printf("# local rank %u: GPU %s (NUMA %d), HCA ports %s\n", info.local_rank,
           info.gpu_pci_address, info.numa_node, info.hcas[0] ? info.hcas : "none");
    for (size_t i = 0; i < info.env_count; i++) {
        const char *name, *value;
        if ((s = rdmatopo_rank_plan_env(plan, i, &name, &value)) != RDMATOPO_STATUS_OK) {
            rc = fail(s);
            goto out;
        }
        printf("export %s='%s'\n", name, value);
    }
    if (info.gid_index >= 0) printf("# this rank's RoCE GID index: %d\n", info.gid_index);

    /* The CPU ids, as sched_setaffinity wants them; the list form is for taskset. */
    size_t count = 0;
    s = rdmatopo_rank_plan_cpu_ids(plan, NULL, 0, &count);
    if (s != RDMATOPO_STATUS_OK && s != RDMATOPO_STATUS_BUFFER_TOO_SMALL) {
        rc = fail(s);
        goto out;
    }
    uint32_t *cpus = malloc((count ? count : 1) * sizeof *cpus);
    if (cpus != NULL && rdmatopo_rank_plan_cpu_ids(plan, cpus, count, &count) == RDMATOPO_STATUS_OK)
        printf("taskset -c %s  # %zu CPUs, first %u\n", info.cpus, count, count ? cpus[0] : 0);
    free(cpus);

out:
    rdmatopo_rank_plan_free(plan);
    rdmatopo_topology_free(topo);
    return rc;
}

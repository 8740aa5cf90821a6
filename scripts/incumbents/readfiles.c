/* The physical floor of a sysfs answer: open, read and close each file named in LIST
 * (one path per line, relative to ROOT), nothing else. Used by bench-incumbents.sh and
 * bench-pod.sh. With THREADS 2, the list's second half is read on a second thread
 * meanwhile (whether reading side by side pays on this machine); it prints the
 * milliseconds the reads took.
 *
 *   cc -O2 -pthread -o readfiles scripts/incumbents/readfiles.c
 *   ./readfiles ROOT LIST [THREADS]
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct share {
    int root;
    char **paths;
    long first, end, opened;
};

static void *read_share(void *arg) {
    struct share *s = arg;
    char buf[4096];
    for (long i = s->first; i < s->end; i++) {
        int fd = openat(s->root, s->paths[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        s->opened += read(fd, buf, sizeof buf) >= 0;
        close(fd);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s ROOT LIST [THREADS]\n", argv[0]);
        return 2;
    }
    int threads = argc == 4 ? atoi(argv[3]) : 1;
    int root = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FILE *list = fopen(argv[2], "r");
    if (root < 0 || !list || (threads != 1 && threads != 2)) {
        fprintf(stderr, "%s: cannot open ROOT or LIST, or THREADS is not 1 or 2\n", argv[0]);
        return 2;
    }
    char line[4096];
    char **paths = NULL;
    long count = 0, room = 0;
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\n")] = 0;
        if (count == room) {
            room = room ? 2 * room : 1024;
            paths = realloc(paths, room * sizeof *paths);
            if (!paths)
                return 2;
        }
        paths[count++] = strdup(line);
    }
    struct share one = {root, paths, 0, threads == 2 ? count / 2 : count, 0};
    struct share two = {root, paths, one.end, count, 0};
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pthread_t helper;
    int helped = threads == 2 && pthread_create(&helper, NULL, read_share, &two) == 0;
    read_share(&one);
    if (helped)
        pthread_join(helper, NULL);
    else if (threads == 2)
        read_share(&two);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ms = (end.tv_sec - start.tv_sec) * 1e3 + (end.tv_nsec - start.tv_nsec) / 1e6;
    printf("%ld files, %.3f ms\n", one.opened + two.opened, ms);
    return 0;
}

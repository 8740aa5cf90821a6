/* The physical floor of a sysfs answer: open, read and close each file named in LIST
 * (one path per line, relative to ROOT), nothing else. Used by bench-incumbents.sh.
 *
 *   cc -O2 -o readfiles scripts/incumbents/readfiles.c && ./readfiles ROOT LIST
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s ROOT LIST\n", argv[0]);
        return 2;
    }
    int root = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FILE *list = fopen(argv[2], "r");
    if (root < 0 || !list) {
        perror("open");
        return 2;
    }
    char path[4096], buf[4096];
    long opened = 0;
    while (fgets(path, sizeof path, list)) {
        path[strcspn(path, "\n")] = 0;
        int fd = openat(root, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        opened += read(fd, buf, sizeof buf) >= 0;
        close(fd);
    }
    printf("%ld\n", opened);
    return 0;
}

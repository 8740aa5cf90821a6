/* The floor of a directory's listing: open each DIR named and read all its entries,
 * nothing else. bench-pod.sh times it on a synthetic host's /sys/class/infiniband,
 * whose entries grow with the other pods' VFs, beside the answers that list it.
 *
 *   cc -O2 -o listdir scripts/incumbents/listdir.c
 *   ./listdir DIR...
 */
#include <dirent.h>
#include <stdio.h>

int main(int argc, char **argv) {
    long entries = 0;
    for (int i = 1; i < argc; i++) {
        DIR *dir = opendir(argv[i]);
        if (!dir) {
            perror(argv[i]);
            return 1;
        }
        while (readdir(dir))
            entries++;
        closedir(dir);
    }
    return entries < 0;
}

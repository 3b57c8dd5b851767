/* cma-probe.c -- can this machine read another process's memory with
 * process_vm_readv (Linux CMA, what Open MPI's vader uses for single-copy
 * transfers), and how fast, against a plain memcpy of the same bytes?
 * The answer decides whether a single-copy arena could pay here
 * (docs/allreduce.md, "Single copy").
 *
 *   cc -O2 -o cma-probe contrib/bench/cma-probe.c && ./cma-probe [MiB]
 * Prints the errno when the call is refused (EPERM: ptrace rules, ENOSYS: a
 * kernel without CONFIG_CROSS_MEMORY_ATTACH) and exits 1; otherwise the
 * bandwidth of both, best of 5, and exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1, bytes = mib << 20;
    int ready[2];
    unsigned char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst || bytes == 0 || pipe(ready) != 0)
        return 2;
    memset(src, 0x5a, bytes);
    memset(dst, 0, bytes);
    pid_t child = fork();
    if (child == 0) { /* holds src; the parent reads it */
        close(ready[0]);
        src[0] = 0xc3;
        if (write(ready[1], "x", 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char c;
    close(ready[1]);
    if (child < 0 || read(ready[0], &c, 1) != 1)
        return 2;
    double best_cma = 1e9, best_copy = 1e9;
    int rc = 0;
    for (int k = 0; k < 5 && rc == 0; ++k) {
        struct iovec local = {dst, bytes}, remote = {src, bytes};
        double t0 = now();
        ssize_t got = process_vm_readv(child, &local, 1, &remote, 1, 0);
        double t = now() - t0;
        if (got != (ssize_t)bytes) {
            printf("cma-probe: process_vm_readv of %zu bytes: %s (errno %d)\n", bytes,
                   got < 0 ? strerror(errno) : "short read", got < 0 ? errno : 0);
            rc = 1;
        } else if (dst[0] != 0xc3 || dst[bytes - 1] != 0x5a) {
            printf("cma-probe: process_vm_readv returned other bytes than the child's\n");
            rc = 1;
        }
        best_cma = t < best_cma ? t : best_cma;
        t0 = now();
        memcpy(dst, src, bytes);
        t = now() - t0;
        best_copy = t < best_copy ? t : best_copy;
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    if (rc == 0)
        printf("cma-probe: %zu MiB: process_vm_readv %.2f GB/s, memcpy %.2f GB/s (best of 5)\n",
               mib, (double)bytes / best_cma / 1e9, (double)bytes / best_copy / 1e9);
    return rc;
}

/* ar-avg.c -- Allreduce latency timed the way the common public MPI
 * benchmarks do (IMB's Allreduce, osu_allreduce), as a second timer beside
 * llrdma-bench's per-call P50: the same two buffers every call (cache-warm),
 * one clock read around the whole timed loop, the mean per call on each rank,
 * then the mean, min and max of those over the ranks.  MPI_DOUBLE sum.
 *
 * The inputs are integers (exact in any summation order); after the timed
 * loop every element of every rank's result is compared with the exact sum,
 * and a wrong element makes the program exit 1 (so a number printed next to
 * "correct" came from a call that computed the right thing, at least on its
 * last iteration; llrdma-bench --verify checks every call).
 *
 * --timer osu times as osu_allreduce does instead: a clock read around each
 * call, an MPI_Barrier after each call (not timed), the mean of the per-call
 * times on each rank.
 *
 *   mpicc -O2 -o ar-avg contrib/bench/ar-avg.c
 *   mpirun -np 8 --bind-to core ./ar-avg [--sizes 64,4K,1M] [--iters N] [--warmup N]
 *       [--timer loop|osu]
 * Prints one line per size: bytes, mean/min/max over ranks of the per-call
 * mean (us), iterations.  --iters 0 (default): scaled so each size runs
 * about 0.2 s, at most 10000 and at least 20 calls. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    return (size_t)v;
}

static int osu_timer;

static double timed(double *s, double *r, int count, int iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (osu_timer) {
        double sum = 0;
        for (int i = 0; i < iters; ++i) {
            double t0 = MPI_Wtime();
            MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            sum += MPI_Wtime() - t0;
            MPI_Barrier(MPI_COMM_WORLD);
        }
        return sum / iters;
    }
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
        MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return (MPI_Wtime() - t0) / iters;
}

int main(int argc, char **argv)
{
    const char *sizes = "64,4K,64K,256K,1M,4M";
    int iters_arg = 0, warmup = 20, rank, np, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sizes"))
            sizes = argv[i + 1];
        else if (!strcmp(argv[i], "--iters"))
            iters_arg = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup"))
            warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--timer") &&
                 (!strcmp(argv[i + 1], "osu") || !strcmp(argv[i + 1], "loop")))
            osu_timer = !strcmp(argv[i + 1], "osu");
        else if (!strcmp(argv[i], "--timer")) {
            if (rank == 0)
                fprintf(stderr, "ar-avg: --timer '%s': want loop or osu\n", argv[i + 1]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        } else {
            if (rank == 0)
                fprintf(stderr, "ar-avg: unknown option '%s'\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (rank == 0)
        printf("# ar-avg: %d ranks, MPI_DOUBLE sum, mean per call (us), %s\n"
               "# %10s %10s %10s %10s %8s\n",
               np,
               osu_timer ? "clock around each call, barrier after each (osu_allreduce's timer)"
                         : "one clock read around the timed loop (IMB's timer)",
               "bytes", "mean", "min", "max", "iters");
    char *list = strdup(sizes);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        size_t bytes = parse_size(tok);
        int count = (int)(bytes / sizeof(double));
        if (count <= 0) {
            if (rank == 0)
                fprintf(stderr, "ar-avg: bad size '%s' (--sizes)\n", tok);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        double *s = malloc((size_t)count * sizeof(double));
        double *r = malloc((size_t)count * sizeof(double));
        if (!s || !r)
            MPI_Abort(MPI_COMM_WORLD, 3);
        for (int i = 0; i < count; ++i) {
            s[i] = (double)((rank + 1) * (i % 1000 + 1));
            r[i] = -1.0;
        }
        int iters = iters_arg;
        for (int i = 0; i < warmup; ++i)
            MPI_Allreduce(s, r, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (iters <= 0) { /* about 0.2 s per size, the same on every rank */
            double probe = timed(s, r, count, 5), slowest;
            MPI_Allreduce(&probe, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            iters = slowest > 0 ? (int)(0.2 / slowest) : 10000;
            iters = iters < 20 ? 20 : iters > 10000 ? 10000 : iters;
        }
        double t = timed(s, r, count, iters) * 1e6, sum, lo, hi;
        const double ranks_sum = (double)np * (np + 1) / 2;
        for (int i = 0; i < count; ++i)
            if (r[i] != ranks_sum * (i % 1000 + 1)) {
                if (!bad)
                    fprintf(stderr, "ar-avg: rank %d, %zu bytes: element %d is %g, want %g\n", rank,
                            bytes, i, r[i], ranks_sum * (i % 1000 + 1));
                bad = 1;
                break;
            }
        MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("  %10zu %10.3f %10.3f %10.3f %8d\n", bytes, sum / np, lo, hi, iters);
        free(s);
        free(r);
    }
    free(list);
    int any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("# %s\n", any ? "WRONG results (see stderr)" : "every rank's last result correct");
    MPI_Finalize();
    return any ? 1 : 0;
}

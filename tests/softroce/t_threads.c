/*
 * btl/llrdma under MPI_THREAD_MULTIPLE (tests/softroce/test-btl-threads.sh):
 * NT threads per rank, each with its own tag, at once:
 *
 *   t_threads pingpong ITERS SIZE...  ranks paired (0-1, 2-3, ...): thread t
 *                                     of the even rank sends, the odd rank's
 *                                     thread t answers, every size ITERS times
 *   t_threads alltoall ITERS SIZE...  thread t of every rank exchanges with
 *                                     thread t of every other rank
 *   t_threads latency N             (benchmark) one thread, 8 B ping-pong
 *                                     P50/P99 (T_THREADS_SINGLE=1: MPI_Init)
 *   t_threads overlap MS SIZE         (benchmark) rank 0 sends SIZE to rank 1,
 *                                     computes MS ms without MPI, then waits;
 *                                     prints the time the transfer needed
 *                                     after the compute ended
 *
 * Every byte is checked against a pattern of (sender, thread, iteration,
 * size); a rank prints "t_threads rank R: PASS" or FAIL lines and exits
 * nonzero on a failure.  The verdict does not travel through MPI.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define NT 4

static int rank, size, iters, nsizes;
static size_t sizes[64];
static int failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned char pat(int from, int t, int it, size_t n, size_t k)
{
    return (unsigned char)(from * 131 + t * 31 + it * 7 + n * 3 + k * 13 + 1);
}

static void fill(unsigned char *b, int from, int t, int it, size_t n)
{
    for (size_t k = 0; k < n; ++k) {
        b[k] = pat(from, t, it, n, k);
    }
}

static void check(const unsigned char *b, int from, int t, int it, size_t n)
{
    for (size_t k = 0; k < n; ++k) {
        if (b[k] != pat(from, t, it, n, k)) {
            pthread_mutex_lock(&fail_lock);
            ++failures;
            printf("t_threads rank %d: FAIL thread %d: %zu bytes from %d (iteration %d) wrong at "
                   "byte %zu\n",
                   rank, t, n, from, it, k);
            pthread_mutex_unlock(&fail_lock);
            return;
        }
    }
}

static void *pingpong(void *arg)
{
    int t = (int)(intptr_t)arg, peer = rank ^ 1;
    size_t max = 0;
    unsigned char *sb, *rb;
    for (int s = 0; s < nsizes; ++s) {
        max = sizes[s] > max ? sizes[s] : max;
    }
    sb = malloc(max ? max : 1);
    rb = malloc(max ? max : 1);
    if (peer >= size) {
        free(sb);
        free(rb);
        return NULL;
    }
    for (int s = 0; s < nsizes; ++s) {
        size_t n = sizes[s];
        for (int it = 0; it < iters; ++it) {
            if (0 == rank % 2) {
                fill(sb, rank, t, it, n);
                MPI_Send(sb, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD);
                memset(rb, 0, n);
                MPI_Recv(rb, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                check(rb, peer, t, it, n);
            } else {
                memset(rb, 0, n);
                MPI_Recv(rb, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                check(rb, peer, t, it, n);
                fill(sb, rank, t, it, n);
                MPI_Send(sb, (int)n, MPI_BYTE, peer, t, MPI_COMM_WORLD);
            }
        }
    }
    free(sb);
    free(rb);
    return NULL;
}

static void *alltoall(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int s = 0; s < nsizes; ++s) {
        size_t n = sizes[s];
        unsigned char *sb = malloc(n * (size_t)size + 1), *rb = malloc(n * (size_t)size + 1);
        MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
        for (int it = 0; it < iters; ++it) {
            int nr = 0;
            memset(rb, 0, n * (size_t)size);
            for (int p = 0; p < size; ++p) {
                if (p != rank) {
                    MPI_Irecv(rb + n * (size_t)p, (int)n, MPI_BYTE, p, t, MPI_COMM_WORLD,
                              &req[nr++]);
                }
            }
            for (int p = 0; p < size; ++p) {
                if (p != rank) {
                    /* What rank sends to p: pattern keyed by (rank, thread, it). */
                    fill(sb + n * (size_t)p, rank, t, it, n);
                    MPI_Isend(sb + n * (size_t)p, (int)n, MPI_BYTE, p, t, MPI_COMM_WORLD,
                              &req[nr++]);
                }
            }
            MPI_Waitall(nr, req, MPI_STATUSES_IGNORE);
            for (int p = 0; p < size; ++p) {
                if (p != rank) {
                    check(rb + n * (size_t)p, p, t, it, n);
                }
            }
        }
        free(sb);
        free(rb);
        free(req);
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Ranks 0 and 1 post a transfer of `n` bytes (0 sends, 1 receives), compute
 * `ms` without an MPI call, then wait; each reports how long the wait after
 * the compute took and its process CPU time (the progress thread's
 * included). */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* (benchmark) one thread, 8-byte ping-pong between ranks 0 and 1: P50/P99 of
 * the round trip in us, after `n` / 10 warm-up round trips. */
static void latency(int n)
{
    char b[8] = {0};
    double *rt = malloc(sizeof(double) * (size_t)n);
    for (int i = -n / 10; i < n; ++i) {
        double t0 = now_s();
        if (0 == rank) {
            MPI_Send(b, 8, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
            MPI_Recv(b, 8, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (1 == rank) {
            MPI_Recv(b, 8, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(b, 8, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
        }
        if (i >= 0) {
            rt[i] = (now_s() - t0) * 1e6;
        }
    }
    qsort(rt, (size_t)n, sizeof(double), cmp_d);
    if (0 == rank) {
        printf("t_threads latency: 8 B round trip p50 %.1f us p99 %.1f us (%d round trips)\n",
               rt[n / 2], rt[(int)(n * 0.99)], n);
    }
    free(rt);
}

static void overlap(int ms, size_t n)
{
    unsigned char *b = malloc(n);
    MPI_Request r;
    double t0, t1, t2;
    volatile double x = 0;
    struct rusage u0, u1;
    fill(b, 0, 0, 0, n);
    MPI_Barrier(MPI_COMM_WORLD);
    getrusage(RUSAGE_SELF, &u0);
    if (0 == rank) {
        MPI_Isend(b, (int)n, MPI_BYTE, 1, 99, MPI_COMM_WORLD, &r);
    } else if (1 == rank) {
        MPI_Irecv(b, (int)n, MPI_BYTE, 0, 99, MPI_COMM_WORLD, &r);
    } else {
        r = MPI_REQUEST_NULL;
    }
    t0 = now_s();
    while (now_s() - t0 < ms / 1000.0) { /* the compute: no MPI call */
        x += 1.0;
    }
    t1 = now_s();
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    t2 = now_s();
    getrusage(RUSAGE_SELF, &u1);
    if (1 == rank) {
        check(b, 0, 0, 0, n);
    }
    if (rank < 2) {
        double cpu = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec + u1.ru_stime.tv_sec -
                              u0.ru_stime.tv_sec) +
                     1e-6 * (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec +
                                     u1.ru_stime.tv_usec - u0.ru_stime.tv_usec);
        printf("t_threads overlap rank %d: compute %d ms, %zu bytes, wait after compute %.3f ms, "
               "process cpu %.3f s over %.3f s\n",
               rank, ms, n, (t2 - t1) * 1e3, cpu, t2 - t0);
    }
    free(b);
}

int main(int argc, char **argv)
{
    int provided, rc;
    pthread_t th[NT];

    if (NULL != getenv("T_THREADS_SINGLE")) { /* latency at MPI_THREAD_SINGLE */
        MPI_Init(&argc, &argv);
        provided = MPI_THREAD_MULTIPLE;
    } else {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (MPI_THREAD_MULTIPLE != provided) {
        printf("t_threads rank %d: FAIL MPI_THREAD_MULTIPLE not provided (%d)\n", rank, provided);
        MPI_Finalize();
        return 1;
    }
    if (argc < 3 || (argc < 4 && 0 != strcmp(argv[1], "latency"))) {
        fprintf(stderr, "usage: t_threads pingpong|alltoall ITERS SIZE... | overlap MS SIZE\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (0 == strcmp(argv[1], "latency")) {
        latency(atoi(argv[2]));
    } else if (0 == strcmp(argv[1], "overlap")) {
        overlap(atoi(argv[2]), (size_t)strtoull(argv[3], NULL, 0));
    } else {
        iters = atoi(argv[2]);
        for (int i = 3; i < argc && nsizes < 64; ++i) {
            sizes[nsizes++] = (size_t)strtoull(argv[i], NULL, 0);
        }
        for (int t = 0; t < NT; ++t) {
            pthread_create(&th[t], NULL, 0 == strcmp(argv[1], "pingpong") ? pingpong : alltoall,
                           (void *)(intptr_t)t);
        }
        for (int t = 0; t < NT; ++t) {
            pthread_join(th[t], NULL);
        }
    }
    rc = failures ? 1 : 0;
    if (0 == rc) {
        printf("t_threads rank %d: PASS\n", rank);
    }
    MPI_Finalize();
    return rc;
}

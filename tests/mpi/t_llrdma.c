/*
 * MPI traffic for btl/llrdma system tests (tests/softroce/): every byte is
 * verified, nothing here depends on the BTL.
 *
 *   t_llrdma pingpong ITERS SIZE...   ping-pong between rank pairs (0-1, 2-3, ...)
 *   t_llrdma random COUNT SEED MAX    COUNT messages per rank, random peers and
 *                                     sizes in [0, MAX], sent in bursts of 32
 *   t_llrdma coll ITERS MAX           MPI_Alltoall and MPI_Allreduce up to MAX bytes
 *   t_llrdma forever                  exchange until killed (prints "running (rank R,
 *                                     pid P)")
 *   t_llrdma stream                   even ranks send to rank + 1 until killed, odd
 *                                     ones receive and acknowledge (prints "running")
 *
 * Every rank checks what it receives; one that finds a wrong byte or value
 * prints a FAIL line and aborts the job (nonzero exit status).  At the end
 * each rank prints "t_llrdma rank R: PASS MODE (N ranks)".
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size;

static void die(const char *what, long a, long b)
{
    fprintf(stderr, "t_llrdma rank %d: FAIL: %s (%ld, %ld)\n", rank, what, a, b);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Content of byte i of a message identified by (a, b, c). */
static unsigned char pat(long a, long b, long c, size_t i)
{
    uint64_t x = (uint64_t)a * 0x9e3779b97f4a7c15ull ^ (uint64_t)b * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)c * 0x165667b19e3779f9ull ^ (uint64_t)i * 0x27d4eb2f165667c5ull;
    return (unsigned char)(x >> 56 ^ x >> 13);
}

static void fill(unsigned char *p, size_t n, long a, long b, long c)
{
    for (size_t i = 0; i < n; ++i) {
        p[i] = pat(a, b, c, i);
    }
}

static void check(const unsigned char *p, size_t n, long a, long b, long c)
{
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != pat(a, b, c, i)) {
            die("corrupt byte (message size, offset)", (long)n, (long)i);
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int pingpong(int iters, int nsizes, char **sizes)
{
    int peer = rank ^ 1;
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (peer >= size || NULL == t) {
        free(t);
        return 0; /* odd rank out idles */
    }
    if (0 == rank) {
        printf("t_llrdma: %10s %10s %10s %10s\n", "bytes", "p50_us", "p99_us", "MB/s");
    }
    for (int s = 0; s < nsizes; ++s) {
        size_t n = strtoull(sizes[s], NULL, 0);
        unsigned char *buf = malloc(n + 1);
        if (NULL == buf) {
            die("malloc", (long)n, 0);
        }
        for (int i = -2; i < iters; ++i) { /* two warm-up rounds */
            double t0 = MPI_Wtime();
            if (0 == (rank & 1)) {
                fill(buf, n, rank, (long)n, i);
                MPI_Send(buf, (int)n, MPI_BYTE, peer, s, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_BYTE, peer, s, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                check(buf, n, peer, (long)n, i);
            } else {
                MPI_Recv(buf, (int)n, MPI_BYTE, peer, s, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                check(buf, n, peer, (long)n, i);
                fill(buf, n, rank, (long)n, i);
                MPI_Send(buf, (int)n, MPI_BYTE, peer, s, MPI_COMM_WORLD);
            }
            if (i >= 0) {
                t[i] = (MPI_Wtime() - t0) * 1e6;
            }
        }
        if (0 == rank) {
            qsort(t, (size_t)iters, sizeof(double), cmp_double);
            printf("t_llrdma: %10zu %10.1f %10.1f %10.2f\n", n, t[iters / 2],
                   t[(iters * 99) / 100 < iters ? (iters * 99) / 100 : iters - 1],
                   t[iters / 2] > 0 ? 2.0 * (double)n / t[iters / 2] : 0.0);
            fflush(stdout);
        }
        free(buf);
    }
    free(t);
    return 0;
}

/* Every rank derives the same schedule from the seed: round r, sender s sends
 * to dst(r, s) a message of len(r, s) bytes. */
static uint64_t mix(uint64_t seed, long r, long s)
{
    uint64_t x = seed ^ (uint64_t)r * 0x9e3779b97f4a7c15ull ^ (uint64_t)s * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    return x ^ x >> 29;
}

static void schedule(uint64_t seed, long r, int s, size_t max, int *dst, size_t *len)
{
    uint64_t x = mix(seed, r, s);
    *dst = (s + 1 + (int)(x % (uint64_t)(size - 1))) % size;
    /* Mostly small (the LL path), sometimes up to max: a size mix with bursts. */
    switch ((x >> 16) % 4) {
    case 0:
    case 1:
        *len = (size_t)((x >> 24) % 257);
        break;
    case 2:
        *len = (size_t)((x >> 24) % (max / 16 + 1));
        break;
    default:
        *len = (size_t)((x >> 24) % (max + 1));
    }
}

#define BURST 32

static int random_traffic(long count, uint64_t seed, size_t max)
{
    MPI_Request req[2 * BURST * 64];
    unsigned char *sbuf[BURST], **rbuf;
    long rounds = count, done = 0;
    int nrecv_max = BURST * size;

    if (size < 2) {
        return 0;
    }
    rbuf = calloc((size_t)nrecv_max, sizeof(*rbuf));
    if (NULL == rbuf || 2 * BURST * size > (int)(sizeof(req) / sizeof(req[0]))) {
        die("too many ranks for the request array", size, 0);
    }
    for (int i = 0; i < BURST; ++i) {
        sbuf[i] = malloc(max + 1);
    }
    for (int i = 0; i < nrecv_max; ++i) {
        rbuf[i] = malloc(max + 1);
    }
    for (long base = 0; base < rounds; base += BURST) {
        int nreq = 0, nr = 0;
        long rmeta[BURST * 64][3];
        for (long r = base; r < base + BURST && r < rounds; ++r) {
            for (int s = 0; s < size; ++s) {
                int dst;
                size_t len;
                schedule(seed, r, s, max, &dst, &len);
                if (dst == rank) {
                    MPI_Irecv(rbuf[nr], (int)len, MPI_BYTE, s, (int)(r % 30000), MPI_COMM_WORLD,
                              &req[nreq++]);
                    rmeta[nr][0] = s;
                    rmeta[nr][1] = r;
                    rmeta[nr][2] = (long)len;
                    ++nr;
                }
            }
        }
        for (long r = base; r < base + BURST && r < rounds; ++r) {
            int dst;
            size_t len;
            unsigned char *b = sbuf[r - base];
            schedule(seed, r, rank, max, &dst, &len);
            fill(b, len, rank, dst, r);
            MPI_Isend(b, (int)len, MPI_BYTE, dst, (int)(r % 30000), MPI_COMM_WORLD, &req[nreq++]);
            ++done;
        }
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        for (int i = 0; i < nr; ++i) {
            check(rbuf[i], (size_t)rmeta[i][2], rmeta[i][0], rank, rmeta[i][1]);
        }
    }
    for (int i = 0; i < BURST; ++i) {
        free(sbuf[i]);
    }
    for (int i = 0; i < nrecv_max; ++i) {
        free(rbuf[i]);
    }
    free(rbuf);
    if (0 == rank) {
        printf("t_llrdma: %ld messages per rank, contents verified\n", done);
    }
    return 0;
}

static int collectives(int iters, size_t max)
{
    for (size_t n = 1; n <= max; n = n < 8 ? n + 1 : n * 4) {
        size_t per = n;
        unsigned char *s = malloc(per * (size_t)size), *r = malloc(per * (size_t)size);
        double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
        for (int it = 0; it < iters; ++it) {
            for (int d = 0; d < size; ++d) {
                fill(s + (size_t)d * per, per, rank, d, it);
            }
            MPI_Alltoall(s, (int)per, MPI_BYTE, r, (int)per, MPI_BYTE, MPI_COMM_WORLD);
            for (int d = 0; d < size; ++d) {
                check(r + (size_t)d * per, per, d, rank, it);
            }
            for (size_t i = 0; i < n; ++i) {
                a[i] = (double)(rank + 1) * (double)(i % 1000 + it);
            }
            MPI_Allreduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            for (size_t i = 0; i < n; ++i) {
                double want = (double)size * (size + 1) / 2.0 * (double)(i % 1000 + it);
                if (b[i] != want) {
                    die("allreduce value (count, index)", (long)n, (long)i);
                }
            }
        }
        free(s);
        free(r);
        free(a);
        free(b);
    }
    if (0 == rank) {
        printf("t_llrdma: alltoall and allreduce verified up to %zu bytes per peer\n", max);
    }
    return 0;
}

static void running(void)
{
    printf("t_llrdma: running (rank %d, pid %ld)\n", rank, (long)getpid());
    fflush(stdout);
}

static int forever(void)
{
    unsigned char buf[4096];
    for (long i = 0;; ++i) {
        double x = (double)rank, y = 0;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (size > 1 && (rank ^ 1) < size) {
            MPI_Sendrecv_replace(buf, (int)sizeof(buf), MPI_BYTE, rank ^ 1, 0, rank ^ 1, 0,
                                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        if (0 == i) {
            running();
        }
    }
    return 0;
}

/* Waits at most SECONDS for *req (MPI_REQUEST_NULL once it completed). */
static void wait_at_most(MPI_Request *req, double seconds)
{
    int done = 0;
    double t0 = MPI_Wtime();
    while (!done && MPI_Wtime() - t0 < seconds) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
    }
}

/* A killed receiver leaves its sender sending into the dead connection, so
 * the sender's BTL must notice (tests/softroce/test-btl-kill.sh).  Every 32nd
 * message is acknowledged to bound the sender's lead, but the sender waits
 * for an acknowledgement at most a second and then sends on. */
static int stream(void)
{
    unsigned char buf[4096];
    int peer = rank ^ 1, ack = 0;
    MPI_Request req = MPI_REQUEST_NULL;

    if (peer >= size) { /* odd rank out */
        running();
        for (;;) {
            sleep(1);
        }
    }
    for (long i = 0;; ++i) {
        if (0 == (rank & 1)) {
            fill(buf, sizeof(buf), rank, peer, i);
            MPI_Send(buf, (int)sizeof(buf), MPI_BYTE, peer, 0, MPI_COMM_WORLD);
            if (0 == i % 32) {
                if (MPI_REQUEST_NULL != req) {
                    wait_at_most(&req, 1.0);
                }
                if (MPI_REQUEST_NULL == req) {
                    MPI_Irecv(&ack, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, &req);
                }
            }
            if (0 == i) { /* the pair works: the first message was acknowledged */
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        } else {
            MPI_Recv(buf, (int)sizeof(buf), MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(buf, sizeof(buf), peer, rank, i);
            if (0 == i % 32) {
                MPI_Send(&ack, 1, MPI_INT, peer, 1, MPI_COMM_WORLD);
            }
        }
        if (0 == i) {
            running();
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 2;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc >= 3 && 0 == strcmp(argv[1], "pingpong")) {
        rc = pingpong(atoi(argv[2]), argc - 3, argv + 3);
    } else if (argc == 5 && 0 == strcmp(argv[1], "random")) {
        rc = random_traffic(atol(argv[2]), strtoull(argv[3], NULL, 0),
                            (size_t)strtoull(argv[4], NULL, 0));
    } else if (argc == 4 && 0 == strcmp(argv[1], "coll")) {
        rc = collectives(atoi(argv[2]), (size_t)strtoull(argv[3], NULL, 0));
    } else if (argc == 2 && 0 == strcmp(argv[1], "forever")) {
        rc = forever();
    } else if (argc == 2 && 0 == strcmp(argv[1], "stream")) {
        rc = stream();
    } else if (0 == rank) {
        fprintf(stderr, "usage: t_llrdma pingpong ITERS SIZE... | random COUNT SEED MAX | "
                        "coll ITERS MAX | forever | stream\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (0 == rc) {
        printf("t_llrdma rank %d: PASS %s (%d ranks)\n", rank, argv[1], size);
    }
    return rc;
}

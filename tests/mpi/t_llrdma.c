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
 *   t_llrdma until FILE               verified exchanges between rank pairs until FILE
 *                                     exists on rank 0 (prints "running" as forever)
 *   t_llrdma stream                   even ranks send to rank + 1 until killed, odd
 *                                     ones receive and acknowledge (prints "running")
 *   t_llrdma sweep MAX [SIZE...]      one message per size between rank pairs, the
 *                                     sender alternating: every 2^k-1, 2^k, 2^k+1 up
 *                                     to MAX, then each SIZE (limits and +-1)
 *   t_llrdma window N SIZE REPS       N messages of SIZE in flight each way per pair
 *                                     (distinct buffers and tags), REPS times
 *   t_llrdma vector COUNT BLOCK       a strided MPI_Type_vector of COUNT blocks of
 *                                     BLOCK ints (stride 2 x BLOCK) sent into a
 *                                     contiguous buffer and back into the vector;
 *                                     the gaps must keep their sentinel
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

/* Word-wise pattern for large messages (cheap enough under emulation): byte
 * i of message (a, b) is byte i % 8 of word i / 8's value. */
static uint64_t wpat(long a, long b, size_t w)
{
    return ((uint64_t)w + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)a << 48 ^ (uint64_t)b;
}

static void wfill(unsigned char *p, size_t n, long a, long b)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = wpat(a, b, i / 8);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

static void wcheck(const unsigned char *p, size_t n, long a, long b)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = wpat(a, b, i / 8);
        if (0 != memcmp(p + i, &v, n - i < 8 ? n - i : 8)) {
            die("corrupt word (message size, offset)", (long)n, (long)i);
        }
    }
}

static void sweep_one(size_t n, long id)
{
    int peer = rank ^ 1, sender = (id & 1) ? (rank | 1) : (rank & ~1);
    unsigned char *buf = malloc(n + 1);
    if (NULL == buf) {
        die("malloc", (long)n, 0);
    }
    if (rank == sender) {
        wfill(buf, n, rank, id);
        MPI_Send(buf, (int)n, MPI_BYTE, peer, 11, MPI_COMM_WORLD);
    } else {
        MPI_Status st;
        int got = -1;
        memset(buf, 0xa5, n + 1);
        MPI_Recv(buf, (int)n, MPI_BYTE, peer, 11, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &got);
        if ((size_t)got != n || 0xa5 != buf[n]) {
            die("wrong length received (size, count)", (long)n, got);
        }
        wcheck(buf, n, peer, id);
    }
    free(buf);
}

static int sweep(size_t max, int nextra, char **extra)
{
    long id = 0;
    size_t last = 0; /* sizes come in increasing order: skip repeats */
    if ((rank ^ 1) >= size) {
        return 0;
    }
    for (size_t p = 1; p <= max; p *= 2) {
        for (size_t n = p > 1 ? p - 1 : p; n <= p + 1 && n <= max; ++n) {
            if (n > last) {
                sweep_one(n, id++);
                last = n;
            }
        }
    }
    for (int i = 0; i < nextra; ++i) {
        sweep_one((size_t)strtoull(extra[i], NULL, 0), id++);
    }
    if (0 == rank) {
        printf("t_llrdma: sweep: %ld sizes up to %zu verified\n", id, max);
    }
    return 0;
}

static int window(int n, size_t len, int reps)
{
    int peer = rank ^ 1;
    unsigned char **out = calloc((size_t)n, sizeof(*out)), **in = calloc((size_t)n, sizeof(*in));
    MPI_Request *req = calloc(2 * (size_t)n, sizeof(*req));
    if (peer >= size) {
        return 0;
    }
    if (NULL == out || NULL == in || NULL == req) {
        die("calloc", n, 0);
    }
    for (int k = 0; k < n; ++k) {
        out[k] = malloc(len);
        in[k] = malloc(len);
        if (NULL == out[k] || NULL == in[k]) {
            die("malloc", (long)len, k);
        }
    }
    for (int r = 0; r < reps; ++r) {
        for (int k = 0; k < n; ++k) {
            memset(in[k], 0, len);
            MPI_Irecv(in[k], (int)len, MPI_BYTE, peer, k, MPI_COMM_WORLD, &req[k]);
        }
        for (int k = 0; k < n; ++k) {
            wfill(out[k], len, rank, (long)r * n + k);
            MPI_Isend(out[k], (int)len, MPI_BYTE, peer, k, MPI_COMM_WORLD, &req[n + k]);
        }
        MPI_Waitall(2 * n, req, MPI_STATUSES_IGNORE);
        for (int k = 0; k < n; ++k) {
            wcheck(in[k], len, peer, (long)r * n + k);
        }
    }
    for (int k = 0; k < n; ++k) {
        free(out[k]);
        free(in[k]);
    }
    free(out);
    free(in);
    free(req);
    return 0;
}

static int vector(int count, int block)
{
    int peer = rank ^ 1, elems = count * block;
    size_t span = (size_t)count * 2 * (size_t)block;
    int *v = malloc(span * sizeof(int)), *c = malloc((size_t)elems * sizeof(int));
    MPI_Datatype vt;
    if (peer >= size) {
        return 0;
    }
    if (NULL == v || NULL == c) {
        die("malloc", elems, 0);
    }
    MPI_Type_vector(count, block, 2 * block, MPI_INT, &vt);
    MPI_Type_commit(&vt);
    for (int dir = 0; dir < 2; ++dir) {
        int sends = (rank & 1) == dir;
        if (sends) {
            /* Strided out, contiguous in (dir 0); contiguous out, strided in (dir 1). */
            if (0 == dir) {
                for (size_t i = 0; i < span; ++i) {
                    v[i] = (i / (size_t)block) % 2 ? -1 : (int)(i * 7 + 3);
                }
                MPI_Send(v, 1, vt, peer, 21, MPI_COMM_WORLD);
            } else {
                for (int i = 0; i < elems; ++i) {
                    c[i] = i * 5 + 1;
                }
                MPI_Send(c, elems, MPI_INT, peer, 22, MPI_COMM_WORLD);
            }
        } else if (0 == dir) {
            MPI_Recv(c, elems, MPI_INT, peer, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0, k = 0; i < count; ++i) {
                for (int j = 0; j < block; ++j, ++k) {
                    size_t src = (size_t)i * 2 * (size_t)block + (size_t)j;
                    if (c[k] != (int)(src * 7 + 3)) {
                        die("vector packed wrong (element, value)", k, c[k]);
                    }
                }
            }
        } else {
            for (size_t i = 0; i < span; ++i) {
                v[i] = -7;
            }
            MPI_Recv(v, 1, vt, peer, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t i = 0, k = 0; i < span; ++i) {
                int in_block = 0 == (i / (size_t)block) % 2;
                if (in_block ? v[i] != (int)(k * 5 + 1) : v[i] != -7) {
                    die("vector unpacked wrong (element, value)", (long)i, v[i]);
                }
                k += (size_t)in_block;
            }
        }
    }
    if (0 == rank) {
        printf("t_llrdma: vector: %d blocks of %d ints, both ways, verified\n", count, block);
    }
    MPI_Type_free(&vt);
    free(v);
    free(c);
    return 0;
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

/* Verified exchanges between rank pairs (1 KB, then 64 KB: both paths at
 * the hints the tests use) until FILE exists on rank 0, which the ranks
 * learn through an Allreduce; then how many rounds ran.  Lets a test do
 * something to a running job (tests/softroce/test-btl-foreign.sh). */
static int until(const char *file)
{
    static unsigned char out[65536], in[65536];
    long i;
    int stop = 0;
    for (i = 0; !stop; ++i) {
        int mine = 0 == rank && 0 == access(file, F_OK);
        size_t n = i % 2 ? sizeof(out) : 1024;
        if (size > 1 && (rank ^ 1) < size) {
            fill(out, n, i, rank, 7);
            MPI_Sendrecv(out, (int)n, MPI_BYTE, rank ^ 1, 3, in, (int)n, MPI_BYTE, rank ^ 1, 3,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(in, n, i, rank ^ 1, 7);
        }
        MPI_Allreduce(&mine, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (0 == i) {
            running();
        }
        if (!stop) {
            usleep(10000);
        }
    }
    printf("t_llrdma rank %d: %ld verified rounds until %s\n", rank, i, file);
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
    } else if (argc == 3 && 0 == strcmp(argv[1], "until")) {
        rc = until(argv[2]);
    } else if (argc == 2 && 0 == strcmp(argv[1], "stream")) {
        rc = stream();
    } else if (argc >= 3 && 0 == strcmp(argv[1], "sweep")) {
        rc = sweep((size_t)strtoull(argv[2], NULL, 0), argc - 3, argv + 3);
    } else if (argc == 5 && 0 == strcmp(argv[1], "window")) {
        rc = window(atoi(argv[2]), (size_t)strtoull(argv[3], NULL, 0), atoi(argv[4]));
    } else if (argc == 4 && 0 == strcmp(argv[1], "vector")) {
        rc = vector(atoi(argv[2]), atoi(argv[3]));
    } else if (0 == rank) {
        fprintf(stderr, "usage: t_llrdma pingpong ITERS SIZE... | random COUNT SEED MAX | "
                        "coll ITERS MAX | forever | until FILE | stream | sweep MAX [SIZE...] | "
                        "window N SIZE REPS | vector COUNT BLOCK\n");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (0 == rc) {
        printf("t_llrdma rank %d: PASS %s (%d ranks)\n", rank, argv[1], size);
    }
    return rc;
}

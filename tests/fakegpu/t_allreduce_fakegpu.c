/*
 * coll/llrdma's GPU path through real Open MPI on a machine without a GPU:
 * libfakegpu.so (fakegpu.c) plays libcuda.so.1 and libllrdma_cuda.so, and its
 * "device memory" faults on any CPU access, so the run also proves that no
 * device pointer reaches the PML, the host core or the module below.
 * Results must equal the host path's bit for bit; the fake's counters show the
 * staging path ran.  Fallbacks (user op, derived datatype) on device buffers
 * must get host copies.  --peer: the GPU peer path; --peer-split: that on
 * split communicators with host calls between the device calls.  --direct N COUNT: N calls on
 * the same device vectors, none staged (the GPU-direct inter-node step).  --fault N: the N-th
 * stage_out fails (FAKEGPU_FAIL_AT), the call must return an error and the next one work.
 * --fault-sticky N: the N-th call fails (FAKEGPU_FAIL_SYNC_AT through the shared-memory arena) and
 * so does every later one: a broken arena is never waited on again. Each rank judges its own
 * results: "t_allreduce_fakegpu rank R: PASS", or FAIL lines and exit status 1.  No verdict is
 * reduced through MPI_Allreduce (the code under test, and broken on purpose by --fault-sticky);
 * mpirun exits nonzero when any rank does.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks, fails;
static int expect_staging = 1;
static void *(*dmalloc)(size_t, int);
static void (*dcopy)(void *, const void *, size_t);
static void (*counters)(long[10]);
static void (*dfree)(void *);
static void (*pcounters)(long[5]); /* exports, opens, closes, peer reductions, waits */

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        if (fails++ < 10) {                                                                        \
            fprintf(stderr, "t_allreduce_fakegpu rank %d: FAIL: ", rank);                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

enum { HOST, DEV, MAN };
static const char *kname[] = {"host", "device", "managed"};

typedef struct {
    MPI_Datatype t;
    size_t size;
    const char *name;
} type_t;

static void *alloc(int kind, size_t n)
{
    return HOST == kind ? malloc(n + 1) : dmalloc(n + 1, MAN == kind);
}

static void fill(unsigned char *b, size_t n, int salt)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        b[i] = (unsigned char)((i * 131 + (size_t)salt * 7 + (size_t)rank * 29) >> 1);
    }
}

/* Inputs valid for the type: doubles from bytes would be NaNs, bools 0/1. */
static void gen(const type_t *t, unsigned char *b, size_t count, int salt)
{
    size_t i;
    fill(b, count * t->size, salt);
    for (i = 0; i < count; ++i) {
        if (MPI_DOUBLE == t->t || MPI_DOUBLE_COMPLEX == t->t) { /* one or two parts */
            size_t j;
            for (j = 0; j < t->size / 8; ++j) {
                double v =
                    (double)((int)((i * 7 + j * 13 + (size_t)rank * 3 + (size_t)salt) % 2001) -
                             1000) /
                    8;
                memcpy(b + i * t->size + j * 8, &v, 8);
            }
        } else if (MPI_2REAL == t->t) { /* value and index are floats */
            float v[2] = {(float)((i + (size_t)rank) % 3), (float)((i * 5 + (size_t)rank) % 7)};
            memcpy(b + i * 8, v, 8);
        } else if (MPI_C_BOOL == t->t) {
            b[i] &= 1;
        } else if (MPI_DOUBLE_INT == t->t) {
            double v = (double)((i + (size_t)rank) % 3);
            int k = (int)((i * 5 + (size_t)rank) % 7);
            memset(b + i * 16, 0, 16);
            memcpy(b + i * 16, &v, 8);
            memcpy(b + i * 16 + 8, &k, 4);
        }
    }
}

static void one(const type_t *t, MPI_Op op, size_t count, int sk, int rk, int inplace, int salt,
                MPI_Comm comm)
{
    size_t bytes = count * t->size;
    unsigned char *in = malloc(bytes + 1), *ref = malloc(bytes + 1), *got = malloc(bytes + 1);
    void *r = alloc(rk, bytes), *s = inplace ? NULL : alloc(sk, bytes);
    long before[10], after[10];
    int rc;

    gen(t, in, count, salt);
    memcpy(ref, in, bytes);
    MPI_Allreduce(MPI_IN_PLACE, ref, (int)count, t->t, op, comm);
    dcopy(inplace ? r : s, in, bytes);
    counters(before);
    rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, (int)count, t->t, op, comm);
    counters(after);
    dcopy(got, r, bytes);
    if (MPI_DOUBLE_INT == t->t) { /* padding is not part of the result */
        size_t i;
        for (i = 0; i < count; ++i) {
            memset(got + i * 16 + 12, 0, 4);
            memset(ref + i * 16 + 12, 0, 4);
        }
    }
    if (MPI_SUCCESS != rc) {
        FAIL("%s count %zu %s->%s: rc %d", t->name, count, kname[sk], kname[rk], rc);
    } else if (0 != memcmp(got, ref, bytes)) {
        FAIL("%s count %zu %s->%s inplace %d: differs from the host path", t->name, count,
             kname[sk], kname[rk], inplace);
    } else if (after[1] - after[0] != before[1] - before[0]) {
        FAIL("sessions begun %ld, ended %ld", after[0], after[1]);
    } else if (after[9] != before[9]) {
        FAIL("%s count %zu: the fake GPU saw a contract violation", t->name, count);
    } else if (expect_staging && HOST != rk && count > 0 && nranks > 1 &&
               (after[2] == before[2] || after[3] == before[3])) {
        FAIL("%s count %zu %s->%s: no staged transfer", t->name, count, kname[sk], kname[rk]);
    } else if (HOST == rk && HOST != sk && !inplace && count > 0 && after[8] == before[8]) {
        FAIL("device send, host receive: no copy to the host");
    }
    if (HOST == rk) {
        free(r);
    }
    if (HOST == sk && s) {
        free(s);
    }
    free(in);
    free(ref);
    free(got);
}

static MPI_Datatype pair; /* 2 x MPI_INT */

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int i, n = *len * (*dt == pair ? 2 : 1);
    for (i = 0; i < n; ++i) {
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

static void fallbacks(void)
{
    /* The module below must get host copies: device pointers would fault.
     * (Predefined ops are not defined on derived types: a user op on both.) */
    MPI_Op uop;
    int n = 1000, i, *h = malloc(2 * n * sizeof(int));
    int *d = dmalloc(2 * n * sizeof(int), 0), *d2 = dmalloc(2 * n * sizeof(int), 0);

    MPI_Op_create(user_sum, 1, &uop);
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    for (i = 0; i < 2 * n; ++i) {
        h[i] = i + rank;
    }
    dcopy(d, h, 2 * n * sizeof(int));
    if (MPI_SUCCESS != MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_INT, uop, MPI_COMM_WORLD)) {
        FAIL("user op on device buffers failed");
    }
    dcopy(h, d, n * sizeof(int));
    for (i = 0; i < n; ++i) {
        if (h[i] != nranks * i + nranks * (nranks - 1) / 2) {
            FAIL("user op on device buffers: element %d is %d", i, h[i]);
            break;
        }
    }
    for (i = 0; i < 2 * n; ++i) {
        h[i] = i - rank;
    }
    dcopy(d, h, 2 * n * sizeof(int));
    if (MPI_SUCCESS != MPI_Allreduce(d, d2, n, pair, uop, MPI_COMM_WORLD)) {
        FAIL("derived datatype on device buffers failed");
    }
    dcopy(h, d2, 2 * n * sizeof(int));
    for (i = 0; i < 2 * n; ++i) {
        if (h[i] != nranks * i - nranks * (nranks - 1) / 2) {
            FAIL("derived datatype on device buffers: element %d is %d", i, h[i]);
            break;
        }
    }
    MPI_Type_free(&pair);
    MPI_Op_free(&uop);
    free(h);
}

/* sticky: from call n on every call fails (a broken shared-memory arena). */
static void fault(int n, int sticky)
{
    double h[100], *d = dmalloc(sizeof(h), 0);
    int k, i, rc;
    /* T_FAULT_LATE=1: this rank enters call n half a second late, after
     * another rank's failure in it broke the arena. */
    int late = NULL != getenv("T_FAULT_LATE") && '1' == getenv("T_FAULT_LATE")[0];
    for (k = 1; k <= n + 1; ++k) {
        for (i = 0; i < 100; ++i) {
            h[i] = rank + k + i;
        }
        dcopy(d, h, sizeof(h));
        if (late && k == n) {
            usleep(500000);
        }
        rc = MPI_Allreduce(MPI_IN_PLACE, d, 100, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        dcopy(h, d, sizeof(h));
        int should_fail = sticky ? k >= n : k == n;
        double want = nranks * (nranks - 1) / 2 + nranks * (k + 7); /* element 7's sum */
        if (should_fail ? MPI_SUCCESS == rc : MPI_SUCCESS != rc || h[7] != want) {
            FAIL("fault run: call %d returned %d (element 7: %g)", k, rc, h[7]);
        }
    }
}

/* The GPU peer path on comm: results, handles opened once per allocation, a
 * buffer freed and allocated again at the same address (a new identity: the
 * stale mapping is dropped and the new one opened).  FAKEGPU_EXPECT_PEER=1:
 * every device call must take the peer path; 0: none may.  with_host: a host
 * Allreduce (which never takes it) before every device call. */
static void peer(MPI_Comm comm, int with_host)
{
    const size_t n = 1000;
    const char *e = getenv("FAKEGPU_EXPECT_PEER");
    int expect = NULL != e && '1' == e[0];
    double *h = malloc(n * sizeof(double)), *d = dmalloc(n * sizeof(double), 0);
    double *s = dmalloc(n * sizeof(double), 0), *hh = malloc(n * sizeof(double));
    long p0[5], p1[5];
    int k, round, rank, nranks; /* in comm: these shadow the world's */

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);

    for (round = 0; round < 3; ++round) {
        for (k = 0; k < 4; ++k) {
            int inplace = 2 != round;
            size_t i;
            for (i = 0; i < n; ++i) {
                h[i] = (double)(rank + 1) * 0.1 + (double)(i * (size_t)(k + round + 1));
            }
            dcopy(inplace ? (void *)d : (void *)s, h, n * sizeof(double));
            if (with_host) {
                for (i = 0; i < n; ++i) {
                    hh[i] = (double)(rank + k);
                }
                pcounters(p0);
                if (MPI_SUCCESS !=
                        MPI_Allreduce(MPI_IN_PLACE, hh, (int)n, MPI_DOUBLE, MPI_SUM, comm) ||
                    hh[n - 1] != (double)(nranks * k + nranks * (nranks - 1) / 2)) {
                    FAIL("peer: round %d host call %d failed or wrong (%g)", round, k, hh[n - 1]);
                }
                pcounters(p1);
                if (p1[3] != p0[3]) {
                    FAIL("peer: round %d host call %d took the peer path", round, k);
                }
            }
            pcounters(p0);
            if (MPI_SUCCESS !=
                MPI_Allreduce(inplace ? MPI_IN_PLACE : s, d, (int)n, MPI_DOUBLE, MPI_SUM, comm)) {
                FAIL("peer: round %d call %d failed", round, k);
            }
            pcounters(p1);
            dcopy(h, d, n * sizeof(double));
            for (i = 0; i < n; ++i) {
                double ref = 0; /* the left fold in rank order, as the arena does */
                for (int r = 0; r < nranks; ++r) {
                    ref =
                        0 == r
                            ? 0.1 + (double)(i * (size_t)(k + round + 1))
                            : ref + ((double)(r + 1) * 0.1 + (double)(i * (size_t)(k + round + 1)));
                }
                if (0 != memcmp(&h[i], &ref, sizeof(ref))) {
                    FAIL("peer: round %d call %d element %zu is %.17g, not %.17g", round, k, i,
                         h[i], ref);
                    break;
                }
            }
            if (expect != (p1[3] > p0[3])) {
                FAIL("peer: round %d call %d %s the peer path", round, k,
                     expect ? "did not take" : "took");
            }
            /* Mapped once per allocation: the first call of a round opens
             * the peers' new buffers, later calls open nothing. */
            if (expect && k > 0 && p1[1] != p0[1]) {
                FAIL("peer: round %d call %d opened %ld IPC handles again", round, k,
                     p1[1] - p0[1]);
            }
            if (expect && 0 == k && round > 0 && p1[1] - p0[1] != nranks - 1) {
                FAIL("peer: round %d: %ld handles opened, not one per peer", round, p1[1] - p0[1]);
            }
            if (expect && 1 == round && 0 == k && p1[2] - p0[2] != nranks - 1) {
                FAIL("peer: the freed buffers' stale mappings were not closed (%ld closed)",
                     p1[2] - p0[2]);
            }
        }
        if (0 == round) { /* free and allocate again: same address, new identity */
            void *again;
            dfree(d);
            again = dmalloc(n * sizeof(double), 0);
            if (again != d) {
                FAIL("peer: the fake GPU did not reuse the address (%p, %p)", again, (void *)d);
            }
            d = again;
        }
    }
    dfree(d);
    dfree(s);
    free(h);
    free(hh);
}

/* --direct N COUNT: N calls on the same device vectors (an application
 * reusing its buffers), COUNT int64 each, inputs changed every call (a stale
 * result cannot pass), each rank checking every element against the sum it
 * computes itself; no message may have been staged through host memory (the
 * GPU-direct inter-node step hands device memory to the NIC). */
static void direct(int n, size_t count)
{
    size_t bytes = count * sizeof(int64_t);
    int64_t *in = malloc(bytes), *got = malloc(bytes);
    void *s = dmalloc(bytes, 0), *r = dmalloc(bytes, 0);
    long before[10], after[10];
    int c, q;
    size_t i;

    for (c = 0; c < n; ++c) {
        for (i = 0; i < count; ++i) {
            in[i] = (int64_t)((i * 7 + (size_t)rank * 13 + (size_t)c * 101) % 1000);
        }
        dcopy(s, in, bytes);
        counters(before);
        if (MPI_SUCCESS != MPI_Allreduce(s, r, (int)count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD)) {
            FAIL("direct call %d: failed", c);
            continue;
        }
        counters(after);
        if (after[2] != before[2] || after[3] != before[3]) {
            FAIL("direct call %d: %ld messages staged out, %ld in", c, after[2] - before[2],
                 after[3] - before[3]);
        }
        dcopy(got, r, bytes);
        for (i = 0; i < count; ++i) {
            int64_t want = 0;
            for (q = 0; q < nranks; ++q) {
                want += (int64_t)((i * 7 + (size_t)q * 13 + (size_t)c * 101) % 1000);
            }
            if (got[i] != want) {
                FAIL("direct call %d: element %zu is %lld, not %lld", c, i, (long long)got[i],
                     (long long)want);
                break;
            }
        }
    }
    free(in);
    free(got);
}

int main(int argc, char **argv)
{
    /* FAKEGPU_EXPECT_STAGING=0: small vectors may be copied whole and reduced on
     * the host (coll_llrdma_gpu_stage_max), so per-segment staging is optional. */
    expect_staging =
        !(getenv("FAKEGPU_EXPECT_STAGING") && 0 == strcmp(getenv("FAKEGPU_EXPECT_STAGING"), "0"));
    static const type_t types[] = {{MPI_INT32_T, 4, "int32"},
                                   {MPI_DOUBLE, 8, "double"},
                                   {MPI_UINT8_T, 1, "uint8"},
                                   {MPI_C_BOOL, 1, "c_bool"},
                                   {MPI_INT64_T, 8, "int64"},
                                   {MPI_DOUBLE_INT, 16, "double_int"},
                                   {MPI_UNSIGNED, 4, "unsigned"},
                                   /* Fortran handles and complex (issue 26) */
                                   {MPI_DOUBLE_COMPLEX, 16, "double_complex"},
                                   {MPI_LOGICAL, 4, "logical"},
                                   {MPI_2REAL, 8, "2real"},
                                   {MPI_INTEGER, 4, "integer"}};
    MPI_Op ops[] = {MPI_SUM, MPI_MAX,  MPI_BXOR, MPI_LOR,    MPI_PROD, MPI_MINLOC,
                    MPI_MIN, MPI_PROD, MPI_LAND, MPI_MAXLOC, MPI_SUM};
    const int ntypes = (int)(sizeof types / sizeof types[0]);
    const char *lib = getenv("FAKEGPU_LIB") ? getenv("FAKEGPU_LIB") : getenv("LLRDMA_CUDA_LIB");
    void *h = lib ? dlopen(lib, RTLD_NOW) : NULL;
    int t, k, salt = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (!h || !(*(void **)&dmalloc = dlsym(h, "fakegpu_malloc")) ||
        !(*(void **)&dcopy = dlsym(h, "fakegpu_memcpy")) ||
        !(*(void **)&counters = dlsym(h, "fakegpu_counters")) ||
        !(*(void **)&dfree = dlsym(h, "fakegpu_free")) ||
        !(*(void **)&pcounters = dlsym(h, "fakegpu_peer_counters"))) {
        fprintf(stderr,
                "t_allreduce_fakegpu rank %d: FAIL: FAKEGPU_LIB or LLRDMA_CUDA_LIB must "
                "name libfakegpu.so\n",
                rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (argc > 1 && 0 == strcmp(argv[1], "--peer")) {
        peer(MPI_COMM_WORLD, 0);
    } else if (argc > 1 && 0 == strcmp(argv[1], "--peer-split")) {
        /* Halves by rank parity, in reverse order, each on an arena of its
         * own, with host calls between device calls; then the world again. */
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, nranks - rank, &half);
        MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);
        peer(half, 1);
        MPI_Comm_free(&half);
        peer(MPI_COMM_WORLD, 1);
    } else if (argc > 3 && 0 == strcmp(argv[1], "--direct")) {
        direct(atoi(argv[2]), (size_t)atol(argv[3]));
    } else if (argc > 2 && 0 == strcmp(argv[1], "--fault")) {
        fault(atoi(argv[2]), 0);
    } else if (argc > 2 && 0 == strcmp(argv[1], "--fault-sticky")) {
        fault(atoi(argv[2]), 1);
    } else {
        size_t counts[] = {1, 2, (size_t)nranks + 1, 1000, 70001};
        int kinds[][3] = {{DEV, DEV, 0},  {DEV, DEV, 1},  {MAN, MAN, 0}, {MAN, MAN, 1},
                          {HOST, DEV, 0}, {DEV, HOST, 0}, {MAN, DEV, 0}};
        for (t = 0; t < ntypes; ++t) {
            int tsize = 0;
            MPI_Type_size(types[t].t, &tsize);
            if ((size_t)tsize != types[t].size) {
                continue; /* a Fortran kind of another size in this build */
            }
            for (k = 0; k < 5; ++k) {
                int m = (t + k) % 7;
                one(&types[t], ops[t], counts[k], kinds[m][0], kinds[m][1], kinds[m][2], ++salt,
                    MPI_COMM_WORLD);
            }
        }
        /* Ranks on the host path next to ranks on the GPU path, in one call. */
        one(&types[1], MPI_SUM, 300001, rank % 2 ? HOST : DEV, rank % 2 ? HOST : DEV, 0, ++salt,
            MPI_COMM_WORLD);
        one(&types[0], MPI_SUM, 0, DEV, DEV, 0, ++salt, MPI_COMM_WORLD);
        fallbacks();
    }
    /* A rank that failed still finalizes: every rank made the same calls. */
    MPI_Finalize();
    if (fails) {
        fprintf(stderr, "t_allreduce_fakegpu rank %d: FAIL (%d failed checks, %d ranks)\n", rank,
                fails, nranks);
    } else {
        printf("t_allreduce_fakegpu rank %d: PASS (%d ranks)\n", rank, nranks);
    }
    return fails ? 1 : 0;
}

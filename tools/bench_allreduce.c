/*
 * bench_allreduce.c -- `llrdma-bench allreduce`: MPI_Allreduce latency per
 * message size over MPI_COMM_WORLD, host or CUDA device buffers.
 *
 * Iterations run back to back (no barrier between them, as in a training
 * loop).  Every rank times each of its calls; the per-iteration samples are
 * then reduced with MPI_MAX onto rank 0, so sample i is the slowest rank's
 * time for call i, and the percentiles are taken over those maxima.
 *
 * --verify checks every call, warm-up and timed (both sides with --paired):
 * before call i of a size each rank writes inputs that depend on (rank, i,
 * element), after it every element of the result is compared with the exact
 * value in closed form.  Both happen outside the timed region (only the
 * MPI_Allreduce, or --staging-baseline's copies around it, is timed), but
 * between the calls, which are then no longer back to back.  Without
 * --verify the input is written once and nothing runs between calls.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "llrdma_build_config.h"
#include "bench.h"
#include "bench_ompi.h"
#include "bench_stats.h"
#include "llrdma.h"

#ifdef LLRDMA_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <mpi-ext.h>
#endif

#define MODE "allreduce"
#define AR_BUDGET_DEFAULT ((uint64_t)256 << 20)

typedef enum { DT_DOUBLE = 0, DT_FLOAT, DT_INT } ar_dtype_t;
typedef enum { OP_SUM = 0, OP_MAX } ar_op_t;

typedef struct {
    long warmup, iters, min_iters;
    uint64_t budget;
    bench_size_spec_t sizes;
    ar_dtype_t dtype;
    ar_op_t op;
    int verify, device, staging, force_device, paired, rss;
    const char *csv;
} ar_opts_t;

static const char *dtype_names[] = {"double", "float", "int"};
static const char *op_names[] = {"sum", "max"};

/* Resident bytes now (/proc/self/statm), 0 when unknown. */
static long long resident_bytes(void)
{
    long long pages = 0, size = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (NULL != f) {
        if (2 != fscanf(f, "%lld %lld", &size, &pages)) {
            pages = 0;
        }
        fclose(f);
    }
    return pages * sysconf(_SC_PAGESIZE);
}

static int parse(int argc, char **argv, ar_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->warmup = 20;
    o->iters = 200;
    o->min_iters = 10;
    o->budget = AR_BUDGET_DEFAULT;
    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i], *v = NULL;
#define VAL()                                                                                      \
    do {                                                                                           \
        if (NULL == (v = bench_optarg(MODE, argc, argv, &i))) {                                    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
        if (bench_opt(a, "--warmup")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--warmup", v, 0, 100000000, &o->warmup)) {
                return -1;
            }
        } else if (bench_opt(a, "--iters")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--iters", v, 1, 100000000, &o->iters)) {
                return -1;
            }
        } else if (bench_opt(a, "--min-iters")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--min-iters", v, 1, 100000000, &o->min_iters)) {
                return -1;
            }
        } else if (bench_opt(a, "--budget")) {
            VAL();
            if (0 != bench_parse_bytes(MODE, "--budget", v, UINT64_MAX, &o->budget)) {
                return -1;
            }
        } else if (bench_opt(a, "--sizes") || bench_opt(a, "--min") || bench_opt(a, "--max")) {
            VAL();
            if (0 != bench_parse_size_option(MODE, a, v, &o->sizes)) {
                return -1;
            }
        } else if (bench_opt(a, "--around-hint")) {
            o->sizes.around_hint = 1;
        } else if (bench_opt(a, "--dtype")) {
            VAL();
            if (0 == strcmp(v, "double")) {
                o->dtype = DT_DOUBLE;
            } else if (0 == strcmp(v, "float")) {
                o->dtype = DT_FLOAT;
            } else if (0 == strcmp(v, "int")) {
                o->dtype = DT_INT;
            } else {
                bench_usage_error(MODE, "--dtype '%s': expected double, float or int", v);
                return -1;
            }
        } else if (bench_opt(a, "--op")) {
            VAL();
            if (0 == strcmp(v, "sum")) {
                o->op = OP_SUM;
            } else if (0 == strcmp(v, "max")) {
                o->op = OP_MAX;
            } else {
                bench_usage_error(MODE, "--op '%s': expected sum or max", v);
                return -1;
            }
        } else if (bench_opt(a, "--verify")) {
            o->verify = 1;
        } else if (bench_opt(a, "--device")) {
            o->device = 1;
        } else if (bench_opt(a, "--force-device")) {
            o->device = o->force_device = 1;
        } else if (bench_opt(a, "--staging-baseline")) {
            o->staging = 1;
        } else if (bench_opt(a, "--paired")) {
            o->paired = 1;
        } else if (bench_opt(a, "--rss")) {
            o->rss = 1;
        } else if (bench_opt(a, "--csv")) {
            VAL();
            o->csv = v;
        } else {
            bench_usage_error(MODE, "unknown option '%s'", a);
            return -1;
        }
#undef VAL
    }
    if (0 != bench_check_size_spec(MODE, &o->sizes)) {
        return -1;
    }
    if (o->staging && !o->device) {
        bench_usage_error(MODE, "--staging-baseline needs --device (it stages device buffers "
                                "through host memory)");
        return -1;
    }
    return 0;
}

static size_t elem_size(ar_dtype_t t)
{
    return DT_DOUBLE == t ? sizeof(double) : DT_FLOAT == t ? sizeof(float) : sizeof(int);
}

static MPI_Datatype mpi_dtype(ar_dtype_t t)
{
    return DT_DOUBLE == t ? MPI_DOUBLE : DT_FLOAT == t ? MPI_FLOAT : MPI_INT;
}

/* Iterations for one size: the byte budget bounds the time of large sizes
 * identically on every rank and in every run (so components compared with
 * allreduce-compare get the same sample counts). */
static long iters_for(const ar_opts_t *o, uint64_t bytes)
{
    long n = o->iters;
    if (bytes > 0 && o->budget / bytes < (uint64_t)n) {
        n = (long)(o->budget / bytes);
    }
    if (n < o->min_iters) {
        n = o->min_iters < o->iters ? o->min_iters : o->iters;
    }
    return n;
}

static long warmup_for(const ar_opts_t *o, long iters)
{
    long w;
    if (0 == o->warmup) {
        return 0;
    }
    w = (o->warmup * iters + o->iters - 1) / o->iters;
    return w < 1 ? 1 : w;
}

/* --verify inputs.  Element j of rank r's input at iteration i (counted from
 * 0 over a size's warm-up and timed calls together) is
 *     r + 1 + t,   t = (j + AR_VERIFY_STEP x i) mod AR_VERIFY_PERIOD,
 * so the exact result is nranks (nranks + 1) / 2 + nranks t for sum and
 * nranks + t for max.  Consecutive iterations differ at every element (the
 * step is not a multiple of the prime period), so a result left over from the
 * previous call, or an input not refilled, fails; the period repeats only
 * after 1021 iterations.  All values are integers small enough to be exact in
 * every dtype and in every partial sum (ar_verify_fits). */
#define AR_VERIFY_PERIOD 1021
#define AR_VERIFY_STEP 7
#define AR_VERIFY_REPORTS 10 /* wrong calls printed per rank; the rest counted */

static int verify_t0(long iter)
{
    return (int)(((iter % AR_VERIFY_PERIOD) * AR_VERIFY_STEP) % AR_VERIFY_PERIOD);
}

static void fill_input(void *buf, ar_dtype_t dt, size_t count, int rank, long iter)
{
    int t = verify_t0(iter);
    for (size_t j = 0; j < count; ++j) {
        int v = rank + 1 + t;
        if (DT_DOUBLE == dt) {
            ((double *)buf)[j] = v;
        } else if (DT_FLOAT == dt) {
            ((float *)buf)[j] = (float)v;
        } else {
            ((int *)buf)[j] = v;
        }
        if (++t == AR_VERIFY_PERIOD) {
            t = 0;
        }
    }
}

/* Largest exact result of --verify's inputs fits the dtype (float: 2^24,
 * int: INT_MAX, double: 2^53); partial sums are smaller. */
static int ar_verify_fits(const ar_opts_t *o, int nranks, double *largest, double *limit)
{
    double n = nranks;
    *largest =
        OP_SUM == o->op ? n * (n + 1) / 2 + n * (AR_VERIFY_PERIOD - 1) : n + AR_VERIFY_PERIOD - 1;
    *limit = DT_FLOAT == o->dtype ? 16777216.0
             : DT_INT == o->dtype ? (double)INT_MAX
                                  : 9007199254740992.0;
    return *largest <= *limit;
}

/* Test hooks, for tests/mpi/test-bench.sh only: they damage one call so that
 * the test can show --verify failing (the verdict is then read from the exit
 * status, not from this program's own summary).
 *   LLRDMA_BENCH_TEST_CORRUPT=RANK:SIZE:ITER:ELEM[:prev]  after call ITER
 *       of size SIZE, rank RANK adds 1 to element ELEM of its result, as read
 *       for the check (host memory; for --device, the copy brought back);
 *       ':prev' picks the --paired duplicate's result.
 *   LLRDMA_BENCH_TEST_STALE=RANK:SIZE:ITER  rank RANK does not refill its
 *       input before call ITER of size SIZE (it keeps the previous one's).
 * Unset (always, outside tests), neither does anything. */
typedef struct {
    int rank;
    unsigned long long size;
    long iter;
    size_t elem;
    int prev;
} ar_hook_t;

static int parse_hook(const char *var, int with_elem, ar_hook_t *h)
{
    const char *v = getenv(var);
    char side[8] = "";
    int n;

    h->rank = -1;
    if (NULL == v || '\0' == v[0]) {
        return 0;
    }
    n = with_elem ? sscanf(v, "%d:%llu:%ld:%zu:%7s", &h->rank, &h->size, &h->iter, &h->elem, side)
                  : sscanf(v, "%d:%llu:%ld", &h->rank, &h->size, &h->iter);
    h->prev = 0 == strcmp(side, "prev");
    if (n < (with_elem ? 4 : 3) || (side[0] && !h->prev)) {
        fprintf(stderr, "llrdma-bench: allreduce: %s='%s': expected %s\n", var, v,
                with_elem ? "RANK:SIZE:ITER:ELEM[:prev]" : "RANK:SIZE:ITER");
        return -1;
    }
    return 0;
}

static int hook_hits(const ar_hook_t *h, int me, uint64_t size, long iter, int prev)
{
    return h->rank == me && h->size == size && h->iter == iter && h->prev == prev;
}

/* Compares every element of one call's result with its exact value; returns
 * the number of wrong elements.  The first wrong element of each wrong call
 * is printed (rank, size, iteration, element, got, expected), for the first
 * AR_VERIFY_REPORTS wrong calls of this rank. */
static long check_result(const void *buf, const ar_opts_t *o, size_t count, int nranks, int me,
                         uint64_t size, long iter, long warm, int prev, long *reports)
{
    long bad = 0;
    size_t first = 0;
    double first_got = 0, first_want = 0;
    double base = OP_SUM == o->op ? (double)nranks * (nranks + 1) / 2 : (double)nranks;
    double mult = OP_SUM == o->op ? (double)nranks : 1.0;
    int t = verify_t0(iter);

    for (size_t j = 0; j < count; ++j) {
        double want = base + mult * t;
        double got = DT_DOUBLE == o->dtype  ? ((const double *)buf)[j]
                     : DT_FLOAT == o->dtype ? ((const float *)buf)[j]
                                            : ((const int *)buf)[j];
        if (got != want) {
            if (0 == bad) {
                first = j;
                first_got = got;
                first_want = want;
            }
            ++bad;
        }
        if (++t == AR_VERIFY_PERIOD) {
            t = 0;
        }
    }
    if (bad && (*reports)++ < AR_VERIFY_REPORTS) {
        char when[64];
        if (iter < warm) {
            snprintf(when, sizeof(when), "warm-up");
        } else {
            snprintf(when, sizeof(when), "timed call %ld", iter - warm);
        }
        fprintf(stderr,
                "llrdma-bench: allreduce: rank %d: --verify: size %llu iteration %ld (%s)%s: "
                "element %zu is %.17g, expected %.17g (%ld of %zu elements wrong)\n",
                me, (unsigned long long)size, iter, when, prev ? " on the --paired duplicate" : "",
                first, first_got, first_want, bad, count);
        if (AR_VERIFY_REPORTS == *reports) {
            fprintf(stderr,
                    "llrdma-bench: allreduce: rank %d: --verify: further wrong calls are "
                    "counted, not printed\n",
                    me);
        }
    }
    return bad;
}

typedef struct {
    void *s, *r;   /* buffers passed to MPI_Allreduce (device ones with --device) */
    void *r2;      /* result of the --paired duplicate: its own with --verify, else r */
    void *hs, *hr; /* host buffers: input staging, result check, --staging-baseline */
    int on_device;
    int gpu_shared; /* more ranks than GPUs on this node */
} ar_bufs_t;

#ifdef LLRDMA_HAVE_CUDA
static int cuda_setup(size_t bytes, int second_result, ar_bufs_t *b, char *err, size_t len)
{
    int ndev = 0, local = 0, nlocal = 1;
    cudaError_t e;
    MPI_Comm node;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_size(node, &nlocal);
    MPI_Comm_free(&node);
    if (cudaSuccess != (e = cudaGetDeviceCount(&ndev)) || 0 == ndev) {
        snprintf(err, len, "no usable CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    if (cudaSuccess != (e = cudaSetDevice(local % ndev)) ||
        cudaSuccess != (e = cudaMalloc(&b->s, bytes)) ||
        cudaSuccess != (e = cudaMalloc(&b->r, bytes)) ||
        cudaSuccess != (e = cudaMallocHost(&b->hs, bytes)) ||
        cudaSuccess != (e = cudaMallocHost(&b->hr, bytes)) ||
        (second_result && cudaSuccess != (e = cudaMalloc(&b->r2, bytes)))) {
        snprintf(err, len, "CUDA allocation of %d x %zu bytes failed: %s", 4 + second_result, bytes,
                 cudaGetErrorString(e));
        return -1;
    }
    if (!second_result) {
        b->r2 = b->r;
    }
    b->on_device = 1;
    b->gpu_shared = nlocal > ndev;
    return 0;
}

static void cuda_free(ar_bufs_t *b)
{
    if (b->on_device) {
        cudaFree(b->s);
        if (b->r2 != b->r) {
            cudaFree(b->r2);
        }
        cudaFree(b->r);
        cudaFreeHost(b->hs);
        cudaFreeHost(b->hr);
    }
}

static void to_device(void *d, const void *h, size_t n)
{
    cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
}

static void to_host(void *h, const void *d, size_t n)
{
    cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);
}

static int mpi_cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_Query_cuda_support();
#else
    return 0;
#endif
}
#endif

/* One timed call on comm, result in r (b->r or b->r2); returns seconds. */
static double one_call(const ar_opts_t *o, ar_bufs_t *b, void *r, int count, size_t bytes,
                       MPI_Comm comm)
{
    double t0 = MPI_Wtime();
#ifdef LLRDMA_HAVE_CUDA
    if (o->staging) {
        to_host(b->hs, b->s, bytes);
        MPI_Allreduce(b->hs, b->hr, count, mpi_dtype(o->dtype), OP_SUM == o->op ? MPI_SUM : MPI_MAX,
                      comm);
        to_device(r, b->hr, bytes);
        cudaDeviceSynchronize();
        return MPI_Wtime() - t0;
    }
#endif
    (void)bytes;
    MPI_Allreduce(b->s, r, count, mpi_dtype(o->dtype), OP_SUM == o->op ? MPI_SUM : MPI_MAX, comm);
    return MPI_Wtime() - t0;
}

/* --verify, before call iter (untimed): this rank's input for the call. */
static void verify_fill(const ar_opts_t *o, ar_bufs_t *b, size_t count, uint64_t size, int me,
                        long iter, const ar_hook_t *stale)
{
    if (hook_hits(stale, me, size, iter, 0)) {
        return; /* test hook: the input stays the previous call's */
    }
    fill_input(b->hs, o->dtype, count, me, iter);
#ifdef LLRDMA_HAVE_CUDA
    if (b->on_device) {
        to_device(b->s, b->hs, size);
        cudaDeviceSynchronize();
    }
#else
    (void)size;
#endif
}

/* --verify, after call iter (untimed): the result in r (b->r, or b->r2 of
 * the --paired duplicate), brought to host memory for --device, checked
 * element by element.  Returns the number of wrong elements. */
static long verify_result(const ar_opts_t *o, ar_bufs_t *b, void *r, size_t count, uint64_t size,
                          int nranks, int me, long iter, long warm, int prev,
                          const ar_hook_t *corrupt, long *reports)
{
    void *h = r;
#ifdef LLRDMA_HAVE_CUDA
    if (b->on_device) {
        to_host(b->hr, r, size);
        h = b->hr;
    }
#else
    (void)b;
#endif
    if (hook_hits(corrupt, me, size, iter, prev) && corrupt->elem < count) {
        /* test hook: one wrong element in what is checked */
        size_t j = corrupt->elem;
        if (DT_DOUBLE == o->dtype) {
            ((double *)h)[j] += 1;
        } else if (DT_FLOAT == o->dtype) {
            ((float *)h)[j] += 1;
        } else {
            ((int *)h)[j] += 1;
        }
    }
    return check_result(h, o, count, nranks, me, size, iter, warm, prev, reports);
}

int bench_allreduce_main(int argc, char **argv)
{
    ar_opts_t o;
    ar_bufs_t b;
    long long rss_base = 0;
    int me, nranks, n, dropped = 0, rc = BENCH_EXIT_OK, failed = 0, any_failed = 0;
    uint64_t hint = 0, hint_min, hint_max, sizes[BENCH_MAX_SIZES], maxsize;
    double *samples = NULL, *maxs = NULL, *psamples = NULL, *pmaxs = NULL, *ratios = NULL;
    MPI_Comm prev = MPI_COMM_NULL; /* --paired: the duplicate coll/llrdma leaves alone */
    FILE *out = stdout, *csv = NULL;
    long errors = 0, all_errors = 0, reports = 0, checked_timed = 0, checked_warm = 0;
    ar_hook_t corrupt, stale; /* test hooks (parse_hook) */
    char err[512] = "";
    int csv_stdout;

    if (0 != parse(argc, argv, &o)) {
        return BENCH_EXIT_USAGE;
    }
    if (0 != parse_hook("LLRDMA_BENCH_TEST_CORRUPT", 1, &corrupt) ||
        0 != parse_hook("LLRDMA_BENCH_TEST_STALE", 0, &stale)) {
        return BENCH_EXIT_USAGE;
    }
#ifndef LLRDMA_HAVE_CUDA
    if (o.device) {
        if (bench_early_printer()) {
            fprintf(stderr, "llrdma-bench: allreduce: --device: this llrdma-bench was built "
                            "without CUDA (configure found no CUDA Toolkit; see --with-cuda)\n");
        } else {
            bench_early_wait();
        }
        return BENCH_EXIT_UNSUPPORTED;
    }
#endif
    memset(&b, 0, sizeof(b));
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    hint = llrdma_get_size_hint();
    MPI_Allreduce(&hint, &hint_min, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&hint, &hint_max, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    MPI_Bcast(&hint, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    n = bench_resolve_sizes(&o.sizes, 8, 64 << 20, hint, sizes, &dropped);
    /* Sizes below one element are dropped; the rest rounded down to whole elements. */
    {
        int m = 0;
        size_t es = elem_size(o.dtype);
        for (int k = 0; k < n; ++k) {
            uint64_t s = sizes[k] / es * es;
            if (0 == s || (m > 0 && sizes[m - 1] == s)) {
                ++dropped;
                continue;
            }
            sizes[m++] = s;
        }
        n = m;
    }
    if (n <= 0) {
        if (0 == me) {
            fprintf(stderr,
                    "llrdma-bench: allreduce: no message sizes to measure (each needs at "
                    "least one %s element)\n",
                    dtype_names[o.dtype]);
        }
        MPI_Finalize();
        return BENCH_EXIT_USAGE;
    }
    if (o.verify) {
        double largest, limit;
        if (!ar_verify_fits(&o, nranks, &largest, &limit)) {
            if (0 == me) {
                fprintf(stderr,
                        "llrdma-bench: allreduce: --verify: with %d ranks the exact %s of its "
                        "inputs reaches %.0f, past what %s holds exactly (%.0f); use --dtype "
                        "double or fewer ranks\n",
                        nranks, op_names[o.op], largest, dtype_names[o.dtype], limit);
            }
            MPI_Finalize();
            return BENCH_EXIT_USAGE;
        }
    }
    maxsize = sizes[n - 1];
    if (o.device) {
#ifdef LLRDMA_HAVE_CUDA
        failed = cuda_setup(maxsize, o.verify && o.paired, &b, err, sizeof(err));
#endif
    } else {
        b.s = b.hs = bench_alloc(maxsize);
        b.r = b.hr = bench_alloc(maxsize);
        /* --paired --verify: each side its own result, both checked after
         * the pair (without --verify both write b.r, as before) */
        b.r2 = o.verify && o.paired ? bench_alloc(maxsize) : b.r;
        if (NULL == b.s || NULL == b.r || NULL == b.r2) {
            snprintf(err, sizeof(err), "cannot allocate %d x %llu bytes",
                     2 + (o.verify && o.paired), (unsigned long long)maxsize);
            failed = 1;
        }
    }
    rss_base = resident_bytes(); /* the buffers are allocated and touched */
    samples = malloc(sizeof(double) * (size_t)o.iters);
    maxs = malloc(sizeof(double) * (size_t)o.iters);
    if (o.paired) {
        psamples = malloc(sizeof(double) * (size_t)o.iters);
        pmaxs = malloc(sizeof(double) * (size_t)o.iters);
        ratios = malloc(sizeof(double) * (size_t)o.iters);
    }
    if (NULL == samples || NULL == maxs ||
        (o.paired && (NULL == psamples || NULL == pmaxs || NULL == ratios))) {
        snprintf(err, sizeof(err), "out of memory");
        failed = 1;
    }
#ifdef LLRDMA_HAVE_CUDA
    if (!failed && o.device && !o.staging && !mpi_cuda_aware()) {
        /* Device pointers in a host-only MPI_Allreduce crash it: only a coll
         * component that handles device memory itself may get them. */
        char name[64], detail[BENCH_LINE_MAX];
        bench_allreduce_component(MPI_COMM_WORLD, name, sizeof(name), detail, sizeof(detail));
        if (0 != strcmp(name, "llrdma") && !o.force_device) {
            snprintf(err, sizeof(err),
                     "this Open MPI is not CUDA-aware (MPIX_Query_cuda_support() = 0) and "
                     "MPI_Allreduce is served by coll/%s, which would crash on device "
                     "pointers: use --staging-baseline, coll/llrdma, or --force-device",
                     name);
            failed = 1;
        }
    }
#endif
    if (failed && (0 == me || !o.device)) {
        fprintf(stderr, "llrdma-bench: allreduce: rank %d: %s%s\n", me,
                o.device ? "--device: " : "", err);
    }
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) {
        rc = BENCH_EXIT_RUNTIME;
        goto out;
    }
    {
        int shared = b.gpu_shared, any_shared = 0;
        MPI_Allreduce(&shared, &any_shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        b.gpu_shared = any_shared;
    }
    /* The input of iteration 0; without --verify every call reuses it. */
    fill_input(b.hs, o.dtype, maxsize / elem_size(o.dtype), me, 0);
#ifdef LLRDMA_HAVE_CUDA
    if (o.device) {
        to_device(b.s, b.hs, maxsize);
    }
#endif
    if (o.paired) {
        /* The info key makes coll/llrdma hand this communicator to the module
         * below it at its first call; one untimed call settles that. */
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "llrdma_allreduce", "false");
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &prev);
        MPI_Info_free(&info);
        (void)one_call(&o, &b, b.r, 1, elem_size(o.dtype), prev);
    }
    csv_stdout = NULL != o.csv && 0 == strcmp(o.csv, "-");
    if (0 == me) {
        if (NULL != o.csv && !csv_stdout && NULL == (csv = fopen(o.csv, "w"))) {
            fprintf(stderr, "llrdma-bench: allreduce: --csv '%s': cannot open for writing\n",
                    o.csv);
            MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_RUNTIME);
        }
        if (csv_stdout) {
            csv = stdout;
        }
        fprintf(out,
                "# llrdma-bench allreduce: %d ranks, %s %s, %s; latency = time of one "
                "iteration in microseconds, per iteration the MAX over ranks (iterations back "
                "to back, no barrier between them; MPI_Wtime)\n",
                nranks, dtype_names[o.dtype], op_names[o.op],
                !o.device   ? "host buffers"
                : o.staging ? "device buffers staged through pinned host memory "
                              "(cudaMemcpy D2H + host MPI_Allreduce + cudaMemcpy H2D, timed "
                              "together)"
                            : "device buffers passed to MPI_Allreduce");
        fprintf(out,
                "# iterations per size: min(%ld, max(%ld, %llu bytes / size)), warm-up scaled "
                "alike from %ld; percentiles: nearest rank; MB/s = size / P50\n",
                o.iters, o.min_iters, (unsigned long long)o.budget, o.warmup);
        fprintf(out, "# size hint %llu bytes", (unsigned long long)hint);
        if (hint_min != hint_max) {
            fprintf(out, " -- WARNING: ranks disagree (min %llu, max %llu)",
                    (unsigned long long)hint_min, (unsigned long long)hint_max);
        }
        fputc('\n', out);
        if (o.verify) {
            fprintf(out,
                    "# with --verify: before each call (warm-up and timed) every rank writes "
                    "inputs of (rank, iteration, element)%s, after it every element of the "
                    "result%s%s is compared with its exact value; both untimed but between "
                    "the calls, which are then not back to back (caches, skew): compare these "
                    "numbers only with other --verify runs\n",
                    o.device ? " (host memory, copied to the device)" : "",
                    o.paired ? " of both sides" : "",
                    o.device ? " (copied back to host memory)" : "");
        }
#ifdef LLRDMA_HAVE_CUDA
        if (b.gpu_shared) {
            fprintf(out, "# WARNING: more ranks than GPUs on a node: ranks share a GPU, whose "
                         "contexts then take turns (small-size latency grows by hundreds of "
                         "microseconds); use one GPU per rank\n");
        }
        if (o.device && !o.staging && !mpi_cuda_aware()) {
            fprintf(out, "# WARNING: this Open MPI is not CUDA-aware (MPIX_Query_cuda_support() "
                         "= 0): device pointers reach MPI_Allreduce directly; only a coll "
                         "component handling device memory (coll/llrdma) can take them\n");
        }
#endif
    }
    {
        int r0 = 0;
        char name[64], detail[BENCH_LINE_MAX];
        bench_print_ranks(out, 0, &r0, 1);
        if (0 == me) {
            bench_allreduce_component(MPI_COMM_WORLD, name, sizeof(name), detail, sizeof(detail));
            fprintf(out, "# allreduce served by: coll/%s (%s)\n", name, detail);
            if (o.paired) {
                bench_allreduce_component(prev, name, sizeof(name), detail, sizeof(detail));
                fprintf(out,
                        "# --paired: every iteration also calls MPI_Allreduce on a duplicate of "
                        "MPI_COMM_WORLD with info llrdma_allreduce=false, served by: coll/%s "
                        "(%s); the two calls take turns going first.  prev = that duplicate; "
                        "ratio = P50 / prev P50; paired = median over iterations of time / "
                        "prev time (same iteration)\n",
                        name, detail);
            }
        }
    }
    if (0 == me) {
        if (NULL != csv) {
            fprintf(csv,
                    "ranks,hint,size,count,iters,p50_us,p90_us,p99_us,p999_us,max_us,"
                    "mean_us,min_us,bw_MBps%s\n",
                    o.paired ? ",prev_p50_us,prev_p99_us,ratio_p50,ratio_paired" : "");
        }
        if (!csv_stdout && o.paired) {
            fprintf(out, "%10s %10s %6s %10s %10s %10s %10s %7s %7s\n", "size", "count", "iters",
                    "P50", "P99", "prev P50", "prev P99", "ratio", "paired");
        } else if (!csv_stdout) {
            fprintf(out, "%10s %10s %6s %10s %10s %10s %10s %10s %10s\n", "size", "count", "iters",
                    "P50", "P90", "P99", "max", "mean", "MB/s");
        }
        fflush(out);
    }
    for (int k = 0; k < n; ++k) {
        uint64_t size = sizes[k];
        int count = (int)(size / elem_size(o.dtype));
        long iters = iters_for(&o, size), warm = warmup_for(&o, iters);
        bench_summary_t s;

        long size_errors = 0, wrong_calls = 0;

        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < warm + iters; ++i) {
            double t, tp = 0.0;
            if (o.verify) {
                verify_fill(&o, &b, (size_t)count, size, me, i, &stale);
            }
            /* --paired: odd iterations call the duplicate first, so neither
             * side always follows the other. */
            if (o.paired && (i & 1)) {
                tp = one_call(&o, &b, b.r2, count, size, prev);
            }
            t = one_call(&o, &b, b.r, count, size, MPI_COMM_WORLD);
            if (o.paired && !(i & 1)) {
                tp = one_call(&o, &b, b.r2, count, size, prev);
            }
            if (i >= warm) {
                samples[i - warm] = t * 1e6;
                if (o.paired) {
                    psamples[i - warm] = tp * 1e6;
                }
            }
            if (o.verify) {
                for (int side = 0; side < (o.paired ? 2 : 1); ++side) {
                    long bad = verify_result(&o, &b, side ? b.r2 : b.r, (size_t)count, size, nranks,
                                             me, i, warm, side, &corrupt, &reports);
                    size_errors += bad;
                    wrong_calls += bad > 0;
                }
            }
        }
        if (o.verify) {
            checked_timed += iters;
            checked_warm += warm;
        }
        if (wrong_calls) {
            fprintf(stderr,
                    "llrdma-bench: allreduce: rank %d: --verify: size %llu: %ld of %ld calls "
                    "wrong, %ld wrong element(s)\n",
                    me, (unsigned long long)size, wrong_calls, (warm + iters) * (o.paired ? 2 : 1),
                    size_errors);
            errors += size_errors;
        }
        MPI_Reduce(samples, maxs, (int)iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (o.paired) {
            MPI_Reduce(psamples, pmaxs, (int)iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        }
        if (0 == me && o.paired) {
            char label[32];
            bench_summary_t ps, rs;
            for (long i = 0; i < iters; ++i) {
                ratios[i] = pmaxs[i] > 0 ? maxs[i] / pmaxs[i] : 0.0;
            }
            bench_summarize(ratios, (size_t)iters, &rs);
            bench_summarize(maxs, (size_t)iters, &s);
            bench_summarize(pmaxs, (size_t)iters, &ps);
            bench_size_label(size, label, sizeof(label));
            if (!csv_stdout) {
                fprintf(out, "%10s %10d %6ld %10.2f %10.2f %10.2f %10.2f %7.3f %7.3f\n", label,
                        count, iters, s.p50, s.p99, ps.p50, ps.p99,
                        ps.p50 > 0 ? s.p50 / ps.p50 : 0.0, rs.p50);
                fflush(out);
            }
            if (NULL != csv) {
                fprintf(csv,
                        "%d,%llu,%llu,%d,%ld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,"
                        "%.4f,%.4f\n",
                        nranks, (unsigned long long)hint, (unsigned long long)size, count, iters,
                        s.p50, s.p90, s.p99, s.p999, s.max, s.mean, s.min,
                        s.p50 > 0 ? (double)size / s.p50 : 0.0, ps.p50, ps.p99,
                        ps.p50 > 0 ? s.p50 / ps.p50 : 0.0, rs.p50);
                fflush(csv);
            }
        } else if (0 == me) {
            char label[32];
            double bw;
            bench_summarize(maxs, (size_t)iters, &s);
            bw = s.p50 > 0 ? (double)size / s.p50 : 0.0;
            bench_size_label(size, label, sizeof(label));
            if (!csv_stdout) {
                fprintf(out, "%10s %10d %6ld %10.2f %10.2f %10.2f %10.2f %10.2f %10.1f\n", label,
                        count, iters, s.p50, s.p90, s.p99, s.max, s.mean, bw);
                fflush(out);
            }
            if (NULL != csv) {
                fprintf(csv, "%d,%llu,%llu,%d,%ld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
                        nranks, (unsigned long long)hint, (unsigned long long)size, count, iters,
                        s.p50, s.p90, s.p99, s.p999, s.max, s.mean, s.min, bw);
                fflush(csv);
            }
        }
    }
    if (0 == me && nranks > 1) {
        char t[BENCH_LINE_MAX];
        bench_peer_transport(MPI_COMM_WORLD, 1, t, sizeof(t));
        fprintf(out, "# transport rank0 -> rank1: %s\n", t);
    }
    if (o.rss) {
        /* Peak against the resident size once the buffers were touched: what
         * MPI_Allreduce (scratch, staging) added during the calls. */
        struct rusage ru;
        double mine[2] = {0, 0}, all[2];
        if (0 == getrusage(RUSAGE_SELF, &ru)) {
            mine[0] = (double)ru.ru_maxrss * 1024.0;
            mine[1] = mine[0] - (double)rss_base;
        }
        MPI_Reduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (0 == me) {
            fprintf(out,
                    "# --rss: peak RSS %.1f MB, %.1f MB more than with the buffers touched "
                    "before the first call (max over ranks)\n",
                    all[0] / 1048576.0, all[1] / 1048576.0);
        }
    }
    all_errors = bench_gather_errors(errors, 0);
    if (0 == me && o.verify) {
        char what[160];
        if (all_errors) {
            snprintf(what, sizeof(what),
                     "FAILED: %ld wrong element(s) on all ranks (see the "
                     "messages above)",
                     all_errors);
        } else {
            snprintf(what, sizeof(what), "all results correct");
        }
        fprintf(out,
                "# --verify: %s; checked: every call of every size, %ld timed (the iters "
                "column) + %ld warm-up%s, inputs varied per iteration (rank, iteration, "
                "element), all elements compared with the exact result%s\n",
                what, checked_timed, checked_warm, o.paired ? " on each side of --paired" : "",
                o.device ? " (device buffers filled and read back through host memory)" : "");
    }
    if (errors) {
        rc = BENCH_EXIT_VERIFY; /* this rank's own verdict */
    }
    if (NULL != csv && stdout != csv) {
        fclose(csv);
    }
out:
    if (o.device) {
#ifdef LLRDMA_HAVE_CUDA
        cuda_free(&b);
#endif
    } else {
        if (b.r2 != b.r) {
            free(b.r2);
        }
        free(b.s);
        free(b.r);
    }
    if (MPI_COMM_NULL != prev) {
        MPI_Comm_free(&prev);
    }
    free(ratios);
    free(pmaxs);
    free(psamples);
    free(maxs);
    free(samples);
    fflush(out);
    MPI_Finalize();
    return rc;
}

/*
 * bench_bw.c -- `llrdma-bench bw` and `bibw`: streaming bandwidth between two
 * ranks per message size, with a window of messages in flight (as osu_bw and
 * osu_bibw).
 *
 * bw:   rank 0 posts --window MPI_Isend of the size, rank 1 the matching
 *       MPI_Irecv; both MPI_Waitall, then rank 1 sends a 4-byte ack, which
 *       rank 0 receives before the next window.
 * bibw: both ranks post --window MPI_Irecv, then --window MPI_Isend, then
 *       MPI_Waitall both: both directions at once; no ack.
 * Rank 0 times the measured windows as a whole (MPI_Wtime before the first,
 * after the last); MB/s = bytes moved / time, 1 MB = 10^6 bytes (bibw counts
 * both directions, as osu_bibw does).
 *
 * --verify: every message of a window has its own buffer on both sides; its
 * bytes are a function of (size, window, message index, sender), written
 * before the window is posted and checked by the receiver after its
 * MPI_Waitall (bw: after the ack).  Each rank's exit status carries its own
 * mismatches, so the verdict does not travel through the transport.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_ompi.h"
#include "llrdma.h"

#define TAG_DATA 301
#define TAG_ACK 302
#define TAG_INFO 303
#define ACK_BYTES 4
#define BW_BUDGET_DEFAULT ((uint64_t)1 << 30) /* bytes per size and direction */
#define BW_VERIFY_MEM_MAX ((uint64_t)2 << 30) /* --verify: window x size per buffer set */
#define BW_MAX_REPORTED 5                     /* wrong messages printed per rank */

typedef struct {
    const char *mode; /* "bw" or "bibw" */
    int bidir;
    long window, warmup, iters, min_iters;
    uint64_t window_bytes; /* 0: a fixed window */
    uint64_t budget;
    bench_size_spec_t sizes;
    int verify;
    const char *csv; /* NULL, "-" or a file */
} bw_opts_t;

static int parse(int argc, char **argv, bw_opts_t *o)
{
    const char *mode = o->mode;

    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i], *v;
#define VAL()                                                                                      \
    do {                                                                                           \
        if (NULL == (v = bench_optarg(mode, argc, argv, &i))) {                                    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
        if (bench_opt(a, "--window")) {
            VAL();
            if (0 != bench_parse_long(mode, "--window", v, 1, 4096, &o->window)) {
                return -1;
            }
        } else if (bench_opt(a, "--window-bytes")) {
            VAL();
            if (0 != bench_parse_bytes(mode, "--window-bytes", v, UINT64_MAX, &o->window_bytes)) {
                return -1;
            }
        } else if (bench_opt(a, "--warmup")) {
            VAL();
            if (0 != bench_parse_long(mode, "--warmup", v, 0, 100000000, &o->warmup)) {
                return -1;
            }
        } else if (bench_opt(a, "--iters")) {
            VAL();
            if (0 != bench_parse_long(mode, "--iters", v, 1, 100000000, &o->iters)) {
                return -1;
            }
        } else if (bench_opt(a, "--min-iters")) {
            VAL();
            if (0 != bench_parse_long(mode, "--min-iters", v, 1, 100000000, &o->min_iters)) {
                return -1;
            }
        } else if (bench_opt(a, "--budget")) {
            VAL();
            if (0 != bench_parse_bytes(mode, "--budget", v, UINT64_MAX, &o->budget)) {
                return -1;
            }
            if (0 == o->budget) {
                bench_usage_error(mode, "--budget '%s': must be more than 0", v);
                return -1;
            }
        } else if (bench_opt(a, "--sizes") || bench_opt(a, "--min") || bench_opt(a, "--max")) {
            VAL();
            if (0 != bench_parse_size_option(mode, a, v, &o->sizes)) {
                return -1;
            }
        } else if (bench_opt(a, "--around-hint")) {
            o->sizes.around_hint = 1;
        } else if (bench_opt(a, "--verify")) {
            o->verify = 1;
        } else if (bench_opt(a, "--csv")) {
            VAL();
            o->csv = v;
        } else {
            bench_usage_error(mode, "unknown option '%s'", a);
            return -1;
        }
#undef VAL
    }
    return bench_check_size_spec(mode, &o->sizes);
}

/* Messages per window at one size: --window, or fewer where --window-bytes
 * caps the bytes in flight (at least one message). */
static long window_for(const bw_opts_t *o, uint64_t size)
{
    if (0 != o->window_bytes && size > 0 && o->window_bytes / size < (uint64_t)o->window) {
        uint64_t w = o->window_bytes / size;
        return w < 1 ? 1 : (long)w;
    }
    return o->window;
}

/* Windows measured at one size: the byte budget (per direction) bounds the
 * time of large sizes, identically in every run. */
static long iters_for(const bw_opts_t *o, uint64_t size)
{
    uint64_t per_window = (size ? size : 1) * (uint64_t)window_for(o, size);
    long n = o->iters;

    if (o->budget / per_window < (uint64_t)n) {
        n = (long)(o->budget / per_window);
    }
    if (n < o->min_iters) {
        n = o->min_iters < o->iters ? o->min_iters : o->iters;
    }
    return n;
}

static long warmup_for(const bw_opts_t *o, long iters)
{
    long w;

    if (0 == o->warmup) {
        return 0;
    }
    w = (o->warmup * iters + o->iters - 1) / o->iters;
    return w < 1 ? 1 : w;
}

/* Byte j of message `msg` of window `win` at `size`, sent by rank `from`:
 * differs per window, message, sender and byte position, so a stale,
 * swapped or shifted buffer is caught. */
static inline unsigned char pattern(uint64_t size, long win, int msg, int from, size_t j)
{
    return (unsigned char)(j * 131u + (size_t)win * 7u + (size_t)msg * 29u + size * 13u +
                           (size_t)from * 101u + (j >> 8));
}

static void fill(unsigned char *const *bufs, int n, uint64_t size, long win, int from)
{
    for (int m = 0; m < n; ++m) {
        for (size_t j = 0; j < size; ++j) {
            bufs[m][j] = pattern(size, win, m, from, j);
        }
    }
}

/* Checks the n received messages of window `win`; returns how many are
 * wrong, printing the first bad byte of the first few (*reported counts). */
static long check(const bw_opts_t *o, int me, unsigned char *const *bufs, int n, uint64_t size,
                  long win, int from, long *reported)
{
    long bad = 0;

    for (int m = 0; m < n; ++m) {
        for (size_t j = 0; j < size; ++j) {
            unsigned char want = pattern(size, win, m, from, j);
            if (bufs[m][j] != want) {
                if (*reported < BW_MAX_REPORTED) {
                    fprintf(stderr,
                            "llrdma-bench: %s: rank %d: --verify: message %d of window %ld "
                            "(%llu bytes from rank %d): byte %zu is 0x%02x, expected 0x%02x\n",
                            o->mode, me, m, win, (unsigned long long)size, from, j, bufs[m][j],
                            want);
                }
                ++*reported;
                ++bad;
                break;
            }
        }
    }
    return bad;
}

/* Buffers of one side: with --verify one per message of the window, side by
 * side, else one shared by the whole window (as osu_bw).  bufs[m] is the
 * buffer of message m at the current size (bufs_place). */
typedef struct {
    unsigned char *base;
    unsigned char **bufs;
} bw_bufs_t;

static int bufs_alloc(bw_bufs_t *b, long window, uint64_t bytes, int verify)
{
    b->bufs = calloc((size_t)window, sizeof(*b->bufs));
    b->base = bench_alloc(bytes ? bytes : 1);
    if (NULL == b->bufs || NULL == b->base) {
        return -1;
    }
    if (!verify) {
        memset(b->base, 0xa5, bytes);
    }
    return 0;
}

static void bufs_place(bw_bufs_t *b, long window, uint64_t size, int verify)
{
    for (long m = 0; NULL != b->base && m < window; ++m) {
        b->bufs[m] = b->base + (verify ? (size_t)m * size : 0);
    }
}

static void bufs_free(bw_bufs_t *b)
{
    free(b->base);
    free(b->bufs);
}

/* One size: warm + iters windows.  Returns the seconds of the measured
 * windows on rank 0 (0 elsewhere); *errors += this rank's wrong messages. */
static double run_size(const bw_opts_t *o, int me, uint64_t size, long warm, long iters,
                       bw_bufs_t *sb, bw_bufs_t *rb, MPI_Request *reqs, long *errors,
                       long *reported)
{
    int n = (int)size, w = (int)window_for(o, size), peer = 1 - me;
    char ack[ACK_BYTES] = {0};
    double t0 = 0.0;

    for (long k = 0; k < warm + iters; ++k) {
        if (k == warm) {
            t0 = MPI_Wtime();
        }
        if (o->bidir) {
            if (o->verify) {
                fill(sb->bufs, w, size, k, me);
            }
            for (int m = 0; m < w; ++m) {
                MPI_Irecv(rb->bufs[m], n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[m]);
            }
            for (int m = 0; m < w; ++m) {
                MPI_Isend(sb->bufs[m], n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w + m]);
            }
            MPI_Waitall(2 * w, reqs, MPI_STATUSES_IGNORE);
            if (o->verify) {
                *errors += check(o, me, rb->bufs, w, size, k, peer, reported);
            }
        } else if (0 == me) {
            if (o->verify) {
                fill(sb->bufs, w, size, k, me);
            }
            for (int m = 0; m < w; ++m) {
                MPI_Isend(sb->bufs[m], n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[m]);
            }
            MPI_Waitall(w, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(ack, ACK_BYTES, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int m = 0; m < w; ++m) {
                MPI_Irecv(rb->bufs[m], n, MPI_BYTE, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[m]);
            }
            MPI_Waitall(w, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(ack, ACK_BYTES, MPI_BYTE, peer, TAG_ACK, MPI_COMM_WORLD);
            /* Checked after the ack, before the next window's receives. */
            if (o->verify) {
                *errors += check(o, me, rb->bufs, w, size, k, peer, reported);
            }
        }
    }
    return 0 == me ? MPI_Wtime() - t0 : 0.0;
}

static void print_header(FILE *fp, const bw_opts_t *o, uint64_t hint)
{
    if (o->bidir) {
        fprintf(fp,
                "# llrdma-bench bibw: ranks 0 <-> 1, both directions at once: each rank posts "
                "%ld MPI_Irecv and %ld MPI_Isend per window, then MPI_Waitall (osu_bibw)\n",
                o->window, o->window);
        fprintf(fp, "# MB/s = both directions' bytes / time of the measured windows on rank 0 "
                    "(MPI_Wtime), 1 MB = 10^6 bytes; msgs/s counts both directions\n");
    } else {
        fprintf(fp,
                "# llrdma-bench bw: rank 0 -> rank 1, windows of %ld MPI_Isend / MPI_Irecv, "
                "then a %d-byte ack 1 -> 0 (osu_bw)\n",
                o->window, ACK_BYTES);
        fprintf(fp, "# MB/s = bytes / time of the measured windows on rank 0 (MPI_Wtime), "
                    "1 MB = 10^6 bytes\n");
    }
    if (0 != o->window_bytes) {
        fprintf(fp,
                "# --window-bytes %llu: at most that many bytes per window (at least one "
                "message)\n",
                (unsigned long long)o->window_bytes);
    }
    fprintf(fp,
            "# windows per size: min(%ld, max(%ld, %llu bytes / (size x window))), warm-up %ld "
            "scaled alike\n",
            o->iters, o->min_iters, (unsigned long long)o->budget, o->warmup);
    fprintf(fp, "# size hint %llu bytes%s\n", (unsigned long long)hint,
            o->verify ? "; every message verified (--verify: one buffer per message, filled and "
                        "checked inside the timed loop: timing perturbed)"
                      : "; one send and one receive buffer per rank, as osu_bw");
}

static int bw_main(int argc, char **argv, const char *mode, int bidir)
{
    bw_opts_t o;
    int me, nranks, n, dropped = 0, rc = BENCH_EXIT_OK, csv_stdout;
    uint64_t hint = 0, sizes[BENCH_MAX_SIZES], bytes = 0;
    bw_bufs_t sb = {0}, rb = {0};
    MPI_Request *reqs = NULL;
    FILE *out = stdout, *csv = NULL;
    long errors = 0, reported = 0, all_errors;
    const char *csv_header = "hint,size,window,iters,bw_MBps,msgs_s";

    memset(&o, 0, sizeof(o));
    o.mode = mode;
    o.bidir = bidir;
    o.window = 64;
    o.warmup = 10;
    o.iters = 100;
    o.min_iters = 2;
    o.budget = BW_BUDGET_DEFAULT;
    if (0 != parse(argc, argv, &o)) {
        return BENCH_EXIT_USAGE;
    }
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (2 != nranks) {
        if (0 == me) {
            fprintf(stderr,
                    "llrdma-bench: %s: needs exactly 2 ranks but the job has %d: launch with "
                    "mpirun -np 2\n",
                    mode, nranks);
        }
        MPI_Finalize();
        return BENCH_EXIT_RUNTIME;
    }
    if (0 == me) {
        hint = llrdma_get_size_hint();
    }
    MPI_Bcast(&hint, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    n = bench_resolve_sizes(&o.sizes, 1, 4 << 20, hint, sizes, &dropped);
    if (n <= 0) {
        if (0 == me) {
            fprintf(stderr, "llrdma-bench: %s: no message sizes to measure%s\n", mode,
                    dropped ? " (hint-relative sizes need a non-zero size hint)" : "");
        }
        MPI_Finalize();
        return BENCH_EXIT_USAGE;
    }
    /* Bytes per buffer set: the largest size, or with --verify the largest
     * window x size. */
    for (int k = 0; k < n; ++k) {
        uint64_t b = sizes[k] * (o.verify ? (uint64_t)window_for(&o, sizes[k]) : 1);
        bytes = b > bytes ? b : bytes;
    }
    if (o.verify && bytes > BW_VERIFY_MEM_MAX) {
        if (0 == me) {
            fprintf(stderr,
                    "llrdma-bench: %s: --verify needs window x size = %llu bytes per buffer set "
                    "at the largest, more than %llu: lower --window, --window-bytes or --max\n",
                    mode, (unsigned long long)bytes, (unsigned long long)BW_VERIFY_MEM_MAX);
        }
        MPI_Finalize();
        return BENCH_EXIT_USAGE;
    }
    csv_stdout = NULL != o.csv && 0 == strcmp(o.csv, "-");
    reqs = malloc(sizeof(MPI_Request) * 2 * (size_t)o.window);
    if (NULL == reqs || ((bidir || 0 == me) && 0 != bufs_alloc(&sb, o.window, bytes, o.verify)) ||
        ((bidir || 1 == me) && 0 != bufs_alloc(&rb, o.window, bytes, o.verify))) {
        fprintf(stderr, "llrdma-bench: %s: rank %d: cannot allocate 2 x %llu bytes\n", mode, me,
                (unsigned long long)bytes);
        MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_RUNTIME);
    }
    if (0 == me && NULL != o.csv) {
        csv = csv_stdout ? stdout : fopen(o.csv, "w");
        if (NULL == csv) {
            fprintf(stderr, "llrdma-bench: %s: --csv '%s': cannot open for writing\n", mode, o.csv);
            MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_RUNTIME);
        }
    }
    if (0 == me) {
        print_header(out, &o, hint);
        if (dropped > 0) {
            fprintf(out, "# %d hint-relative size(s) skipped (no hint or out of range)\n", dropped);
        }
    }
    {
        int pair[2] = {0, 1};
        bench_print_ranks(out, 0, pair, 2);
    }
    {
        /* One message each way first: ob1 connects to a peer on first use. */
        char t[BENCH_LINE_MAX], one = 0, other = 0;
        int peer = 1 - me;
        MPI_Sendrecv(&one, 1, MPI_CHAR, peer, TAG_INFO, &other, 1, MPI_CHAR, peer, TAG_INFO,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bench_peer_transport(MPI_COMM_WORLD, peer, t, sizeof(t));
        if (1 == me) {
            MPI_Send(t, (int)strlen(t) + 1, MPI_CHAR, 0, TAG_INFO, MPI_COMM_WORLD);
        } else {
            fprintf(out, "# transport rank0 -> rank1: %s\n", t);
            MPI_Recv(t, (int)sizeof(t), MPI_CHAR, 1, TAG_INFO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            fprintf(out, "# transport rank1 -> rank0: %s\n", t);
        }
    }
    if (0 == me) {
        if (NULL != csv) {
            fprintf(csv, "%s\n", csv_header);
        }
        if (!csv_stdout) {
            fprintf(out, "%10s %7s %7s %12s %12s\n", "size", "window", "iters", "MB/s", "msgs/s");
        }
        fflush(out);
    }
    for (int k = 0; k < n; ++k) {
        uint64_t size = sizes[k];
        long w = window_for(&o, size), iters = iters_for(&o, size), warm = warmup_for(&o, iters);
        double t, msgs, bw = 0.0, rate = 0.0;

        bufs_place(&sb, w, size, o.verify);
        bufs_place(&rb, w, size, o.verify);
        MPI_Barrier(MPI_COMM_WORLD);
        t = run_size(&o, me, size, warm, iters, &sb, &rb, reqs, &errors, &reported);
        if (0 != me) {
            continue;
        }
        msgs = (double)iters * (double)w * (bidir ? 2.0 : 1.0);
        if (t > 0) {
            rate = msgs / t;
            bw = rate * (double)size / 1e6;
        }
        if (!csv_stdout) {
            char label[32];
            bench_size_label(size, label, sizeof(label));
            fprintf(out, "%10s %7ld %7ld %12.2f %12.0f\n", label, w, iters, bw, rate);
            fflush(out);
        }
        if (NULL != csv) {
            fprintf(csv, "%llu,%llu,%ld,%ld,%.3f,%.1f\n", (unsigned long long)hint,
                    (unsigned long long)size, w, iters, bw, rate);
            fflush(csv);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    all_errors = bench_gather_errors(errors, 0);
    if (0 == me) {
        if (o.verify) {
            fprintf(out, "# --verify: %s\n",
                    all_errors ? "FAILED: wrong messages (see messages above)"
                               : "every message of every window correct");
        }
        fflush(out);
        if (NULL != csv && csv != stdout) {
            fclose(csv);
        }
    }
    if (errors) {
        fprintf(stderr, "llrdma-bench: %s: rank %d: --verify: %ld wrong message(s)\n", mode, me,
                errors);
        rc = BENCH_EXIT_VERIFY; /* this rank's own verdict */
    }
    free(reqs);
    bufs_free(&sb);
    bufs_free(&rb);
    MPI_Finalize();
    return rc;
}

int bench_bw_main(int argc, char **argv)
{
    return bw_main(argc, argv, "bw", 0);
}

int bench_bibw_main(int argc, char **argv)
{
    return bw_main(argc, argv, "bibw", 1);
}

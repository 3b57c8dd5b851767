/*
 * bench_pingpong.c -- `llrdma-bench pingpong`: round-trip latency between two
 * ranks per message size, optional message rate / streaming bandwidth and
 * payload verification.
 *
 * One sample = one round trip as rank A sees it: MPI_Wtime() before the
 * MPI_Send to B, MPI_Wtime() after the MPI_Recv of B's echo.  Samples go into
 * an array allocated once; statistics are computed after each size.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_ompi.h"
#include "bench_stats.h"
#include "llrdma.h"

#define MODE "pingpong"
#define TAG_PING 101
#define TAG_PONG 102
#define TAG_RATE 103
#define TAG_ACK 104
#define RATE_WARM_WINDOWS 2
#define RATE_BYTES_PER_SIZE ((uint64_t)1 << 30) /* --rate moves at most 1 GiB per size */

typedef struct {
    long warmup, iters;
    bench_size_spec_t sizes;
    int verify;
    int rate;
    long window, windows;
    long pair[2];
    const char *csv; /* NULL, "-" or a file */
} pp_opts_t;

typedef struct {
    uint64_t size;
    bench_summary_t s;
    double bw;        /* MB/s = size / (mean round trip / 2) */
    double rate;      /* messages/s (--rate) */
    double stream_bw; /* MB/s (--rate) */
    long errors;      /* --verify mismatches at this size */
} pp_result_t;

static int parse(int argc, char **argv, pp_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->warmup = 100;
    o->iters = 1000;
    o->window = 64;
    o->windows = 100;
    o->pair[0] = 0;
    o->pair[1] = 1;
    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i], *v;
        long l;
#define OPT(name) bench_opt(a, name)
#define VAL()                                                                                      \
    do {                                                                                           \
        if (NULL == (v = bench_optarg(MODE, argc, argv, &i))) {                                    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
        if (OPT("--warmup")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--warmup", v, 0, 100000000, &o->warmup)) {
                return -1;
            }
        } else if (OPT("--iters")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--iters", v, 1, 100000000, &o->iters)) {
                return -1;
            }
        } else if (OPT("--sizes") || OPT("--min") || OPT("--max")) {
            VAL();
            if (0 != bench_parse_size_option(MODE, a, v, &o->sizes)) {
                return -1;
            }
        } else if (OPT("--around-hint")) {
            o->sizes.around_hint = 1;
        } else if (OPT("--verify")) {
            o->verify = 1;
        } else if (OPT("--rate")) {
            o->rate = 1;
        } else if (OPT("--window")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--window", v, 1, 4096, &o->window)) {
                return -1;
            }
        } else if (OPT("--windows")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--windows", v, 1, 10000000, &o->windows)) {
                return -1;
            }
        } else if (OPT("--pair")) {
            char *end;
            VAL();
            o->pair[0] = strtol(v, &end, 10);
            if (end == v || ',' != *end || o->pair[0] < 0) {
                bench_usage_error(MODE, "--pair '%s': expected two ranks A,B", v);
                return -1;
            }
            if (0 != bench_parse_long(MODE, "--pair (second rank)", end + 1, 0, 1L << 30, &l)) {
                return -1;
            }
            o->pair[1] = l;
            if (o->pair[0] == o->pair[1]) {
                bench_usage_error(MODE, "--pair '%s': the two ranks must differ", v);
                return -1;
            }
        } else if (OPT("--csv")) {
            VAL();
            o->csv = v;
        } else {
            bench_usage_error(MODE, "unknown option '%s'", a);
            return -1;
        }
#undef VAL
#undef OPT
    }
    if (0 != bench_check_size_spec(MODE, &o->sizes)) {
        return -1;
    }
    return 0;
}

/* Payload of round trip `iter` at `size`: cheap, differs per iteration and
 * per byte position, so a stale or shifted buffer is caught. */
static inline unsigned char pattern(uint64_t size, long iter, size_t j)
{
    return (unsigned char)(j * 131u + (size_t)iter * 7u + size * 13u + (j >> 8));
}

static void fill(unsigned char *b, uint64_t size, long iter)
{
    for (size_t j = 0; j < size; ++j) {
        b[j] = pattern(size, iter, j);
    }
}

/* Returns 1 and prints the first bad byte when b is not the pattern. */
static int check(int rank, const char *what, const unsigned char *b, uint64_t size, long iter)
{
    for (size_t j = 0; j < size; ++j) {
        if (b[j] != pattern(size, iter, j)) {
            fprintf(stderr,
                    "llrdma-bench: pingpong: rank %d: --verify: %s of %llu bytes, round trip "
                    "%ld: byte %zu is 0x%02x, expected 0x%02x\n",
                    rank, what, (unsigned long long)size, iter, j, b[j], pattern(size, iter, j));
            return 1;
        }
    }
    return 0;
}

/* Round trips at one size.  Rank a records samples[0..iters). */
static long run_latency(const pp_opts_t *o, int me, int a, int b, uint64_t size,
                        unsigned char *sbuf, unsigned char *rbuf, double *samples)
{
    long total = o->warmup + o->iters, errors = 0;
    int n = (int)size;

    for (long i = 0; i < total; ++i) {
        if (me == a) {
            double t0, t1;
            if (o->verify) {
                fill(sbuf, size, i);
            }
            t0 = MPI_Wtime();
            MPI_Send(sbuf, n, MPI_BYTE, b, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, n, MPI_BYTE, b, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            t1 = MPI_Wtime();
            if (i >= o->warmup) {
                samples[i - o->warmup] = t1 - t0;
            }
            if (o->verify && 0 == errors) {
                errors += check(me, "echo", rbuf, size, i);
            }
        } else {
            MPI_Recv(rbuf, n, MPI_BYTE, a, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(rbuf, n, MPI_BYTE, a, TAG_PONG, MPI_COMM_WORLD);
            /* Checked after echoing so the check is not inside A's round trip. */
            if (o->verify && 0 == errors) {
                errors += check(me, "message", rbuf, size, i);
            }
        }
    }
    return errors;
}

/* Windowed non-blocking streaming A -> B, one zero-byte ack per window
 * (osu_bw style; all receives of a window use the same buffer, so the
 * contents are not meaningful here). Returns elapsed seconds on a. */
static double run_rate(const pp_opts_t *o, int me, int a, int b, uint64_t size, unsigned char *sbuf,
                       unsigned char *rbuf, MPI_Request *reqs, long windows)
{
    int n = (int)size, w = (int)o->window;
    double t0 = 0.0;

    for (long k = 0; k < windows + RATE_WARM_WINDOWS; ++k) {
        if (k == RATE_WARM_WINDOWS) {
            t0 = MPI_Wtime();
        }
        if (me == a) {
            for (int j = 0; j < w; ++j) {
                MPI_Isend(sbuf, n, MPI_BYTE, b, TAG_RATE, MPI_COMM_WORLD, &reqs[j]);
            }
            MPI_Waitall(w, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, b, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int j = 0; j < w; ++j) {
                MPI_Irecv(rbuf, n, MPI_BYTE, a, TAG_RATE, MPI_COMM_WORLD, &reqs[j]);
            }
            MPI_Waitall(w, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, a, TAG_ACK, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

/* Ranks outside the pair wait here while the pair measures: sleeping
 * between polls, so that on a node with more ranks than cores they do not
 * take the pair's CPU time (MPI_Barrier would spin). */
static void barrier(int active)
{
    MPI_Request req;
    int done = 0;

    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    if (active) {
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return;
    }
    for (;;) {
        struct timespec ts = {0, 200 * 1000};
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) {
            break;
        }
        nanosleep(&ts, NULL);
    }
}

static void print_header(FILE *fp, const pp_opts_t *o, int a, int b, int nranks, uint64_t hint)
{
    fprintf(fp,
            "# llrdma-bench pingpong: ranks %d <-> %d of %d; latency = ROUND TRIP time in "
            "microseconds (MPI_Wtime, tick %.3g s)\n",
            a, b, nranks, MPI_Wtick());
    fprintf(fp,
            "# %ld warm-up + %ld measured round trips per size; percentiles: nearest rank on "
            "the sorted samples; MB/s = size / (mean round trip / 2), 1 MB = 10^6 bytes\n",
            o->warmup, o->iters);
    if (o->rate) {
        fprintf(fp,
                "# --rate: windows of %ld non-blocking sends + 1 ack; up to %ld windows, at "
                "most 1 GiB per size\n",
                o->window, o->windows);
    }
    fprintf(fp, "# size hint %llu bytes%s\n", (unsigned long long)hint,
            o->verify ? "; payload verified (--verify): timing slightly perturbed" : "");
}

static void print_table_header(FILE *fp, int rate)
{
    fprintf(fp, "%10s %7s %9s %9s %9s %9s %9s %9s %10s", "size", "iters", "P50", "P90", "P99",
            "P99.9", "max", "mean", "MB/s");
    if (rate) {
        fprintf(fp, " %12s %11s", "msgs/s", "stream MB/s");
    }
    fputc('\n', fp);
}

static void print_row(FILE *fp, const pp_result_t *r, int rate)
{
    char label[32];

    bench_size_label(r->size, label, sizeof(label));
    fprintf(fp, "%10s %7zu %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.1f", label, r->s.n, r->s.p50,
            r->s.p90, r->s.p99, r->s.p999, r->s.max, r->s.mean, r->bw);
    if (rate) {
        fprintf(fp, " %12.0f %11.1f", r->rate, r->stream_bw);
    }
    fputc('\n', fp);
    fflush(fp);
}

static void csv_row(FILE *fp, uint64_t hint, const pp_result_t *r)
{
    fprintf(fp, "%llu,%llu,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.3f\n",
            (unsigned long long)hint, (unsigned long long)r->size, r->s.n, r->s.p50, r->s.p90,
            r->s.p99, r->s.p999, r->s.max, r->s.mean, r->s.min, r->bw, r->rate, r->stream_bw);
    fflush(fp);
}

int bench_pingpong_main(int argc, char **argv)
{
    pp_opts_t o;
    int me, nranks, a, b, n, dropped = 0, rc = BENCH_EXIT_OK, csv_stdout;
    uint64_t hint = 0, sizes[BENCH_MAX_SIZES], maxsize = 0;
    unsigned char *sbuf = NULL, *rbuf = NULL;
    double *samples = NULL;
    MPI_Request *reqs = NULL;
    FILE *out = stdout, *csv = NULL;
    long errors = 0, all_errors = 0;

    if (0 != parse(argc, argv, &o)) {
        return BENCH_EXIT_USAGE;
    }
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    a = (int)o.pair[0];
    b = (int)o.pair[1];
    if (nranks < 2 || o.pair[0] >= nranks || o.pair[1] >= nranks) {
        if (0 == me) {
            fprintf(stderr,
                    "llrdma-bench: pingpong: needs ranks %ld and %ld but the job has %d "
                    "rank(s): launch with mpirun -np 2 (or more)\n",
                    o.pair[0], o.pair[1], nranks);
        }
        MPI_Finalize();
        return BENCH_EXIT_RUNTIME;
    }
    if (me == a) {
        hint = llrdma_get_size_hint();
    }
    MPI_Bcast(&hint, 1, MPI_UINT64_T, a, MPI_COMM_WORLD);
    n = bench_resolve_sizes(&o.sizes, 8, 4 << 20, hint, sizes, &dropped);
    if (n <= 0) {
        if (me == a) {
            fprintf(stderr, "llrdma-bench: pingpong: no message sizes to measure%s\n",
                    dropped ? " (hint-relative sizes need a non-zero size hint)" : "");
        }
        MPI_Finalize();
        return BENCH_EXIT_USAGE;
    }
    maxsize = sizes[n - 1];
    csv_stdout = NULL != o.csv && 0 == strcmp(o.csv, "-");
    if (me == a || me == b) {
        sbuf = bench_alloc(maxsize);
        rbuf = bench_alloc(maxsize);
        samples = malloc(sizeof(double) * (size_t)o.iters);
        reqs = malloc(sizeof(MPI_Request) * (size_t)o.window);
        if (NULL == sbuf || NULL == rbuf || NULL == samples || NULL == reqs) {
            fprintf(stderr, "llrdma-bench: pingpong: rank %d: cannot allocate 2 x %llu bytes\n", me,
                    (unsigned long long)maxsize);
            MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_RUNTIME);
        }
        if (o.verify == 0) {
            memset(sbuf, 0xa5, maxsize);
        }
    }
    if (me == a && NULL != o.csv && !csv_stdout) {
        csv = fopen(o.csv, "w");
        if (NULL == csv) {
            fprintf(stderr, "llrdma-bench: pingpong: --csv '%s': cannot open for writing\n", o.csv);
            MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_RUNTIME);
        }
    } else if (me == a && csv_stdout) {
        csv = stdout;
    }
    if (me == a) {
        print_header(out, &o, a, b, nranks, hint);
        if (dropped > 0) {
            fprintf(out, "# %d hint-relative size(s) skipped (no hint or out of range)\n", dropped);
        }
    }
    {
        int pair[2] = {a, b};
        bench_print_ranks(out, a, pair, 2);
    }
    if (me == a || me == b) {
        /* One message each way first: ob1 connects to a peer on first use. */
        char t[BENCH_LINE_MAX], one = 0, other = 0;
        int peer = me == a ? b : a;
        MPI_Sendrecv(&one, 1, MPI_CHAR, peer, TAG_PING, &other, 1, MPI_CHAR, peer, TAG_PING,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bench_peer_transport(MPI_COMM_WORLD, peer, t, sizeof(t));
        if (me == b) {
            MPI_Send(t, (int)strlen(t) + 1, MPI_CHAR, a, TAG_PONG, MPI_COMM_WORLD);
        } else {
            fprintf(out, "# transport rank%d -> rank%d: %s\n", a, b, t);
            MPI_Recv(t, (int)sizeof(t), MPI_CHAR, b, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            fprintf(out, "# transport rank%d -> rank%d: %s\n", b, a, t);
        }
    }
    if (me == a) {
        if (csv_stdout) {
            fprintf(csv, "hint,size,iters,p50_us,p90_us,p99_us,p999_us,max_us,mean_us,min_us,"
                         "bw_MBps,rate_msgs_s,stream_MBps\n");
        } else {
            if (NULL != csv) {
                fprintf(csv, "hint,size,iters,p50_us,p90_us,p99_us,p999_us,max_us,mean_us,"
                             "min_us,bw_MBps,rate_msgs_s,stream_MBps\n");
            }
            print_table_header(out, o.rate);
        }
    }
    for (int k = 0; k < n; ++k) {
        uint64_t size = sizes[k];
        pp_result_t r;

        memset(&r, 0, sizeof(r));
        r.size = size;
        barrier(me == a || me == b);
        if (me == a || me == b) {
            r.errors = run_latency(&o, me, a, b, size, sbuf, rbuf, samples);
            errors += r.errors;
            if (o.rate) {
                long windows = o.windows;
                uint64_t per_window = (size ? size : 1) * (uint64_t)o.window;
                if ((uint64_t)windows * per_window > RATE_BYTES_PER_SIZE) {
                    windows = (long)(RATE_BYTES_PER_SIZE / per_window);
                }
                if (windows < 10) {
                    windows = 10;
                }
                double t = run_rate(&o, me, a, b, size, sbuf, rbuf, reqs, windows);
                if (t > 0) {
                    r.rate = (double)(windows * o.window) / t;
                    r.stream_bw = r.rate * (double)size / 1e6;
                }
            }
        }
        if (me == a) {
            for (long i = 0; i < o.iters; ++i) {
                samples[i] *= 1e6; /* microseconds */
            }
            bench_summarize(samples, (size_t)o.iters, &r.s);
            r.bw = r.s.mean > 0 ? (double)size / (r.s.mean / 2.0) : 0.0; /* bytes/us = MB/s */
            if (!csv_stdout) {
                print_row(out, &r, o.rate);
            }
            if (NULL != csv) {
                csv_row(csv, hint, &r);
            }
        }
    }
    barrier(me == a || me == b);
    all_errors = bench_gather_errors(errors, a);
    if (me == a) {
        if (o.verify) {
            fprintf(out, "# --verify: %s\n",
                    all_errors ? "FAILED: payload mismatch (see messages above)"
                               : "all payloads correct");
        }
        fflush(out);
        if (NULL != csv && csv != stdout) {
            fclose(csv);
        }
    }
    if (errors) {
        rc = BENCH_EXIT_VERIFY; /* this rank's own verdict */
    }
    free(reqs);
    free(samples);
    free(rbuf);
    free(sbuf);
    MPI_Finalize();
    return rc;
}

/*
 * bench_incast.c -- `llrdma-bench incast`: many senders, one receiver that is
 * busy (computing, no MPI calls) while the messages arrive.
 *
 * Every rank but 0 MPI_Isends --messages messages of each size to rank 0 and
 * waits for them (MPI_Waitall); rank 0 spends --busy-ms without calling MPI,
 * then posts the matching receives and drains them.  Measured per round:
 *   drain   the receiver's end of busy -> its last message received;
 *   sender  the slowest sender's first MPI_Isend -> its MPI_Waitall returned;
 *   latency per message: arrival at rank 0 - max(its MPI_Isend, end of busy)
 *           (CLOCK_MONOTONIC of both processes: one host only).
 * Every byte of every message is checked by rank 0 against a pattern of
 * (round, size, sender, index); a corrupt, missing or late message makes rank
 * 0 exit 1 by itself: the verdict never travels through the transport.
 */
#include <mpi.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_ompi.h"
#include "bench_stats.h"
#include "llrdma.h"

#define MODE "incast"
#define TAG_DATA 201
#define TAG_WARM 202
#define TAG_RESULT 203
#define TAG_INFO 204
#define RECV_MEM_MAX ((uint64_t)4 << 30) /* all messages of one round, at rank 0 */
#define MAX_REPORTED_ERRORS 10

typedef struct {
    long messages, busy_ms, iters, timeout_s;
    int busy_sleep;
    int json;
    bench_size_spec_t sizes;
} ic_opts_t;

/* Per size, at rank 0. */
typedef struct {
    uint64_t size;
    long rounds;
    double *drain_ms;  /* [rounds] */
    double *sender_ms; /* [rounds]: slowest sender */
    double *post_ms;   /* [rounds]: slowest sender's Isend loop */
    double *lat_us;    /* [rounds * nmsg]: after the wake */
    double *oneway_us; /* [rounds * nmsg]: arrival - Isend */
    size_t nlat;
    long errors;
} ic_result_t;

static int parse(int argc, char **argv, ic_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->messages = 400;
    o->busy_ms = 1000;
    o->iters = 3;
    o->timeout_s = 300;
    for (int i = 0; i < argc; ++i) {
        const char *a = argv[i], *v = NULL;
#define VAL()                                                                                      \
    do {                                                                                           \
        if (NULL == (v = bench_optarg(MODE, argc, argv, &i))) {                                    \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
        if (bench_opt(a, "--messages")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--messages", v, 1, 1000000, &o->messages)) {
                return -1;
            }
        } else if (bench_opt(a, "--busy-ms")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--busy-ms", v, 0, 3600000, &o->busy_ms)) {
                return -1;
            }
        } else if (bench_opt(a, "--busy-sleep")) {
            o->busy_sleep = 1;
        } else if (bench_opt(a, "--iters")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--iters", v, 1, 100000, &o->iters)) {
                return -1;
            }
        } else if (bench_opt(a, "--timeout")) {
            VAL();
            if (0 != bench_parse_long(MODE, "--timeout", v, 1, 86400, &o->timeout_s)) {
                return -1;
            }
        } else if (bench_opt(a, "--size") || bench_opt(a, "--sizes")) {
            VAL();
            if (0 != bench_parse_size_list(MODE, "--size", v, &o->sizes)) {
                return -1;
            }
        } else if (bench_opt(a, "--json")) {
            o->json = 1;
        } else {
            bench_usage_error(MODE, "unknown option '%s'", a);
            return -1;
        }
#undef VAL
    }
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static volatile double busy_sink;

/* The receiver's busy time: computing (or sleeping) without any MPI call, so
 * nothing progresses the transport on this rank. */
static void busy(long ms, int sleep_instead)
{
    int64_t end = now_ns() + (int64_t)ms * 1000000;
    double x = busy_sink + 1.0;

    if (sleep_instead) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
        while (0 != nanosleep(&ts, &ts)) {
        }
        return;
    }
    while (now_ns() < end) {
        for (int k = 0; k < 4096; ++k) {
            x = x * 1.0000001 + 1e-9;
        }
    }
    busy_sink = x;
}

/* Byte j of message `index` from `sender` in round `round` at `size`. */
static inline unsigned char pattern(long round, uint64_t size, int sender, long index, size_t j)
{
    uint64_t x = (uint64_t)round * 0x9e3779b97f4a7c15ull ^ size * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)sender * 0x165667b19e3779f9ull ^ (uint64_t)index * 0x27d4eb2f165667c5ull;
    x ^= (uint64_t)j * 0x94d049bb133111ebull;
    return (unsigned char)(x >> 56 ^ x >> 29 ^ j);
}

static void fill(unsigned char *b, long round, uint64_t size, int sender, long index)
{
    for (size_t j = 0; j < size; ++j) {
        b[j] = pattern(round, size, sender, index, j);
    }
}

/* Returns 1 (and prints, up to MAX_REPORTED_ERRORS lines) when b is wrong. */
static int check(const unsigned char *b, long round, uint64_t size, int sender, long index,
                 long *reported)
{
    for (size_t j = 0; j < size; ++j) {
        unsigned char want = pattern(round, size, sender, index, j);
        if (b[j] != want) {
            if (++*reported <= MAX_REPORTED_ERRORS) {
                fprintf(stderr,
                        "llrdma-bench: incast: rank 0: round %ld, %llu-byte message %ld from "
                        "rank %d: byte %zu is 0x%02x, expected 0x%02x\n",
                        round, (unsigned long long)size, index, sender, j, b[j], want);
            }
            return 1;
        }
    }
    return 0;
}

/* Rank 0 gives up: says what is missing and ends the job with status 1. */
static void give_up(const char *what, long round, uint64_t size, int nsenders, const long *missing,
                    long timeout_s)
{
    fprintf(stderr,
            "llrdma-bench: incast: FAILED: round %ld, %llu-byte messages: %s within %ld s of the "
            "receiver's wake (--timeout):",
            round, (unsigned long long)size, what, timeout_s);
    for (int s = 0; s < nsenders; ++s) {
        if (missing[s] > 0) {
            fprintf(stderr, " rank %d: %ld", s + 1, missing[s]);
        }
    }
    fprintf(stderr, "\n");
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_VERIFY);
}

typedef struct {
    int me, nranks, nsenders;
    long nmsg; /* per sender */
    unsigned char *sbuf, *rbuf;
    MPI_Request *reqs;
    MPI_Status *st;
    int *idx;
    int64_t *arrival; /* [nsenders * nmsg] */
    int64_t *result;  /* [nsenders * (3 + nmsg)]: first, posted, done, Isend times */
    int one_host;
} ic_state_t;

/* One round at one size.  Returns the number of corrupt messages (rank 0). */
static long round_once(const ic_opts_t *o, ic_state_t *S, long round, uint64_t size, ic_result_t *r,
                       long k, long *reported)
{
    const int n = (int)size;
    const long nmsg = S->nmsg;
    const long total = (long)S->nsenders * nmsg;
    const long per = 3 + nmsg;
    long errors = 0;

    if (0 != S->me) {
        int64_t *res = S->result;
        for (long i = 0; i < nmsg; ++i) {
            fill(S->sbuf + (size_t)i * size, round, size, S->me, i);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        res[0] = now_ns();
        for (long i = 0; i < nmsg; ++i) {
            res[3 + i] = now_ns();
            MPI_Isend(S->sbuf + (size_t)i * size, n, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD,
                      &S->reqs[i]);
        }
        res[1] = now_ns();
        MPI_Waitall((int)nmsg, S->reqs, MPI_STATUSES_IGNORE);
        res[2] = now_ns();
        MPI_Send(res, (int)per, MPI_INT64_T, 0, TAG_RESULT, MPI_COMM_WORLD);
        return 0;
    }

    /* Rank 0. */
    long done = 0, *missing = calloc((size_t)S->nsenders, sizeof(long));
    int64_t wake, deadline, last = 0;
    double smax = 0, pmax = 0;

    if (NULL == missing) {
        MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_RUNTIME);
    }
    memset(S->rbuf, 0, (size_t)total * size);
    for (long m = 0; m < total; ++m) {
        S->arrival[m] = -1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    busy(o->busy_ms, o->busy_sleep);
    wake = now_ns();
    deadline = wake + (int64_t)o->timeout_s * 1000000000;
    for (int s = 0; s < S->nsenders; ++s) {
        for (long i = 0; i < nmsg; ++i) {
            long m = (long)s * nmsg + i;
            MPI_Irecv(S->rbuf + (size_t)m * size, n, MPI_BYTE, s + 1, TAG_DATA, MPI_COMM_WORLD,
                      &S->reqs[m]);
        }
    }
    while (done < total) {
        int outcount = 0;
        int64_t t;
        MPI_Testsome((int)total, S->reqs, &outcount, S->idx, S->st);
        t = now_ns();
        if (MPI_UNDEFINED == outcount) {
            break;
        }
        for (int q = 0; q < outcount; ++q) {
            long m = S->idx[q];
            int count = -1;
            S->arrival[m] = t;
            MPI_Get_count(&S->st[q], MPI_BYTE, &count);
            if (count != n || S->st[q].MPI_SOURCE != (int)(m / nmsg) + 1 ||
                S->st[q].MPI_TAG != TAG_DATA) {
                if (++*reported <= MAX_REPORTED_ERRORS) {
                    fprintf(stderr,
                            "llrdma-bench: incast: rank 0: round %ld, message %ld from rank %ld: "
                            "%d bytes from rank %d with tag %d, expected %d bytes, tag %d\n",
                            round, m % nmsg, m / nmsg + 1, count, S->st[q].MPI_SOURCE,
                            S->st[q].MPI_TAG, n, TAG_DATA);
                }
                ++errors;
            }
        }
        done += outcount;
        if (outcount > 0) {
            last = t;
        }
        if (done < total && t > deadline) {
            for (long m = 0; m < total; ++m) {
                missing[m / nmsg] += S->arrival[m] < 0;
            }
            give_up("messages did not arrive", round, size, S->nsenders, missing, o->timeout_s);
        }
    }
    /* Every byte, outside the timed part. */
    for (long m = 0; m < total; ++m) {
        errors +=
            check(S->rbuf + (size_t)m * size, round, size, (int)(m / nmsg) + 1, m % nmsg, reported);
    }
    /* The senders' own times (measurements only, not the verdict). */
    for (int s = 0; s < S->nsenders; ++s) {
        MPI_Irecv(S->result + (size_t)s * (size_t)per, (int)per, MPI_INT64_T, s + 1, TAG_RESULT,
                  MPI_COMM_WORLD, &S->reqs[s]);
    }
    for (;;) {
        int flag = 0;
        MPI_Testall(S->nsenders, S->reqs, &flag, MPI_STATUSES_IGNORE);
        if (flag) {
            break;
        }
        if (now_ns() > deadline) {
            for (int s = 0; s < S->nsenders; ++s) {
                missing[s] = MPI_REQUEST_NULL != S->reqs[s];
            }
            give_up("the senders' MPI_Waitall did not return", round, size, S->nsenders, missing,
                    o->timeout_s);
        }
    }
    for (int s = 0; s < S->nsenders; ++s) {
        const int64_t *res = S->result + (size_t)s * (size_t)per;
        double sm = (double)(res[2] - res[0]) / 1e6, pm = (double)(res[1] - res[0]) / 1e6;
        smax = sm > smax ? sm : smax;
        pmax = pm > pmax ? pm : pmax;
        if (S->one_host) {
            for (long i = 0; i < nmsg; ++i) {
                int64_t sent = res[3 + i], arr = S->arrival[(long)s * nmsg + i];
                int64_t from = sent > wake ? sent : wake;
                r->lat_us[r->nlat] = (double)(arr - from) / 1e3;
                r->oneway_us[r->nlat] = (double)(arr - sent) / 1e3;
                ++r->nlat;
            }
        }
    }
    r->drain_ms[k] = (double)(last - wake) / 1e6;
    r->sender_ms[k] = smax;
    r->post_ms[k] = pmax;
    free(missing);
    return errors;
}

/* Connections first: one message of `size` each way between rank 0 and every
 * sender (ob1 and btl/llrdma connect on first use; that is not measured). */
static void warm_up(ic_state_t *S, uint64_t size)
{
    const int n = (int)size;
    if (0 == S->me) {
        for (int s = 1; s < S->nranks; ++s) {
            MPI_Recv(S->rbuf, n, MPI_BYTE, s, TAG_WARM, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(S->rbuf, n, MPI_BYTE, s, TAG_WARM, MPI_COMM_WORLD);
        }
    } else {
        MPI_Send(S->sbuf, n, MPI_BYTE, 0, TAG_WARM, MPI_COMM_WORLD);
        MPI_Recv(S->sbuf, n, MPI_BYTE, 0, TAG_WARM, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

static void print_header(FILE *fp, const ic_opts_t *o, const ic_state_t *S, uint64_t hint)
{
    fprintf(fp,
            "# llrdma-bench incast: ranks 1..%d each MPI_Isend %ld messages per size to rank 0, "
            "then MPI_Waitall; rank 0 is busy %ld ms (%s, no MPI calls), then receives them "
            "all; %ld round(s) per size\n",
            S->nranks - 1, o->messages, o->busy_ms, o->busy_sleep ? "sleeping" : "computing",
            o->iters);
    fprintf(fp, "# drain = rank 0's end of busy -> last message received; sender = slowest "
                "sender's first MPI_Isend -> MPI_Waitall returned (ms; median and max over "
                "rounds)\n");
    fprintf(fp,
            "# latency = arrival at rank 0 - max(MPI_Isend, end of busy), per message, us, "
            "nearest-rank percentiles over all rounds; %s\n",
            S->one_host ? "CLOCK_MONOTONIC, all ranks on one host"
                        : "NOT MEASURED: the ranks are on several hosts (clocks differ)");
    fprintf(fp, "# every byte of every message checked by rank 0; size hint %llu bytes\n",
            (unsigned long long)hint);
}

static void print_table(FILE *fp, const ic_result_t *res, int n, const ic_state_t *S)
{
    fprintf(fp, "%10s %6s %7s %9s %9s %9s %9s %9s %9s %9s %s\n", "size", "rounds", "msgs",
            "drain P50", "drain max", "send P50", "send max", "lat P50", "lat P99", "lat max",
            "data");
    for (int k = 0; k < n; ++k) {
        const ic_result_t *r = &res[k];
        bench_summary_t d, s, l;
        double *tmp = malloc(sizeof(double) * (size_t)r->rounds * 2);
        char label[32];
        if (NULL == tmp) {
            continue;
        }
        memcpy(tmp, r->drain_ms, sizeof(double) * (size_t)r->rounds);
        memcpy(tmp + r->rounds, r->sender_ms, sizeof(double) * (size_t)r->rounds);
        bench_summarize(tmp, (size_t)r->rounds, &d);
        bench_summarize(tmp + r->rounds, (size_t)r->rounds, &s);
        bench_summarize(r->lat_us, r->nlat, &l);
        bench_size_label(r->size, label, sizeof(label));
        fprintf(fp, "%10s %6ld %7ld %9.2f %9.2f %9.2f %9.2f", label, r->rounds,
                r->rounds * S->nsenders * S->nmsg, d.p50, d.max, s.p50, s.max);
        if (S->one_host) {
            fprintf(fp, " %9.1f %9.1f %9.1f", l.p50, l.p99, l.max);
        } else {
            fprintf(fp, " %9s %9s %9s", "-", "-", "-");
        }
        fprintf(fp, " %s\n", r->errors ? "CORRUPT" : "ok");
        free(tmp);
    }
    fprintf(fp, "# drain/send in ms, latency in us\n");
    fflush(fp);
}

static void json_array(FILE *fp, const double *v, long n)
{
    fputc('[', fp);
    for (long i = 0; i < n; ++i) {
        fprintf(fp, "%s%.3f", i ? "," : "", v[i]);
    }
    fputc(']', fp);
}

static void json_string(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; ++s) {
        if ('"' == *s || '\\' == *s) {
            fprintf(fp, "\\%c", *s);
        } else if ((unsigned char)*s < 0x20) {
            fprintf(fp, "\\u%04x", *s);
        } else {
            fputc(*s, fp);
        }
    }
    fputc('"', fp);
}

/* One JSON document; each result object on one line (easy to grep). */
static void print_json(FILE *fp, const ic_opts_t *o, const ic_state_t *S, uint64_t hint,
                       const char *transport, const ic_result_t *res, int n, long errors)
{
    fprintf(fp, "{\"bench\":\"incast\",\"ranks\":%d,\"senders\":%d,\"messages\":%ld,", S->nranks,
            S->nsenders, o->messages);
    fprintf(fp, "\"busy_ms\":%ld,\"busy\":\"%s\",\"rounds\":%ld,\"size_hint\":%llu,", o->busy_ms,
            o->busy_sleep ? "sleep" : "compute", o->iters, (unsigned long long)hint);
    fprintf(fp, "\"one_host\":%s,\"transport\":", S->one_host ? "true" : "false");
    json_string(fp, transport);
    fprintf(fp, ",\n\"results\":[\n");
    for (int k = 0; k < n; ++k) {
        const ic_result_t *r = &res[k];
        double *tmp = malloc(sizeof(double) * (size_t)r->rounds * 3);
        bench_summary_t d, s, p, l, w;
        if (NULL == tmp) {
            continue;
        }
        memcpy(tmp, r->drain_ms, sizeof(double) * (size_t)r->rounds);
        memcpy(tmp + r->rounds, r->sender_ms, sizeof(double) * (size_t)r->rounds);
        memcpy(tmp + 2 * r->rounds, r->post_ms, sizeof(double) * (size_t)r->rounds);
        bench_summarize(tmp, (size_t)r->rounds, &d);
        bench_summarize(tmp + r->rounds, (size_t)r->rounds, &s);
        bench_summarize(tmp + 2 * r->rounds, (size_t)r->rounds, &p);
        fprintf(fp, "{\"size\":%llu,\"rounds\":%ld,\"messages\":%ld,\"errors\":%ld,",
                (unsigned long long)r->size, r->rounds, r->rounds * S->nsenders * S->nmsg,
                r->errors);
        fprintf(fp, "\"drain_ms_p50\":%.3f,\"drain_ms_max\":%.3f,", d.p50, d.max);
        fprintf(fp, "\"sender_ms_p50\":%.3f,\"sender_ms_max\":%.3f,\"post_ms_max\":%.3f,", s.p50,
                s.max, p.max);
        fprintf(fp, "\"drain_ms\":");
        json_array(fp, r->drain_ms, r->rounds);
        fprintf(fp, ",\"sender_ms\":");
        json_array(fp, r->sender_ms, r->rounds);
        if (S->one_host && r->nlat > 0) {
            bench_summarize(r->lat_us, r->nlat, &l);
            bench_summarize(r->oneway_us, r->nlat, &w);
            fprintf(fp,
                    ",\"lat_us_p50\":%.3f,\"lat_us_p99\":%.3f,\"lat_us_max\":%.3f,"
                    "\"oneway_us_p50\":%.3f,\"oneway_us_p99\":%.3f",
                    l.p50, l.p99, l.max, w.p50, w.p99);
        } else {
            fprintf(fp, ",\"lat_us_p50\":null,\"lat_us_p99\":null,\"lat_us_max\":null,"
                        "\"oneway_us_p50\":null,\"oneway_us_p99\":null");
        }
        fprintf(fp, "}%s\n", k + 1 < n ? "," : "");
        free(tmp);
    }
    fprintf(fp, "],\n\"errors\":%ld,\"verified\":%s}\n", errors, errors ? "false" : "true");
    fflush(fp);
}

int bench_incast_main(int argc, char **argv)
{
    ic_opts_t o;
    ic_state_t S;
    ic_result_t *res = NULL;
    uint64_t hint = 0, sizes[BENCH_MAX_SIZES], maxsize;
    int n, dropped = 0, ok = 1;
    long errors = 0, reported = 0, round = 0;
    char transport[BENCH_LINE_MAX] = "unknown", host[MPI_MAX_PROCESSOR_NAME] = "";
    FILE *out;

    if (0 != parse(argc, argv, &o)) {
        return BENCH_EXIT_USAGE;
    }
    out = o.json ? stderr : stdout; /* --json: stdout carries the JSON only */
    memset(&S, 0, sizeof(S));
    S.nmsg = o.messages;
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &S.me);
    MPI_Comm_size(MPI_COMM_WORLD, &S.nranks);
    S.nsenders = S.nranks - 1;
    if (S.nranks < 2) {
        fprintf(stderr, "llrdma-bench: incast: needs at least 2 ranks (rank 0 receives, the "
                        "others send): launch with mpirun -np 4 (or more)\n");
        MPI_Finalize();
        return BENCH_EXIT_RUNTIME;
    }
    if (0 == S.me) {
        hint = llrdma_get_size_hint();
    }
    MPI_Bcast(&hint, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (0 == o.sizes.nterms) {
        n = 1;
        sizes[0] = 8;
    } else {
        n = bench_resolve_sizes(&o.sizes, 8, 8, hint, sizes, &dropped);
    }
    if (n <= 0) {
        if (0 == S.me) {
            fprintf(stderr, "llrdma-bench: incast: no message sizes to measure%s\n",
                    dropped ? " (hint-relative sizes need a non-zero size hint)" : "");
        }
        MPI_Finalize();
        return BENCH_EXIT_USAGE;
    }
    maxsize = sizes[n - 1];
    if (maxsize > (uint64_t)INT32_MAX ||
        (maxsize > 0 && (uint64_t)S.nsenders * (uint64_t)S.nmsg > RECV_MEM_MAX / maxsize)) {
        if (0 == S.me) {
            fprintf(stderr,
                    "llrdma-bench: incast: %d senders x %ld messages x %llu bytes exceed what "
                    "rank 0 holds for one round (%llu MiB): fewer --messages or smaller sizes\n",
                    S.nsenders, S.nmsg, (unsigned long long)maxsize,
                    (unsigned long long)(RECV_MEM_MAX >> 20));
        }
        MPI_Finalize();
        return BENCH_EXIT_USAGE;
    }

    /* Are all ranks on one host (CLOCK_MONOTONIC comparable)? */
    {
        int len = 0, same = 1;
        char *all = NULL;
        MPI_Get_processor_name(host, &len);
        if (0 == S.me) {
            all = malloc((size_t)S.nranks * MPI_MAX_PROCESSOR_NAME);
            if (NULL == all) {
                MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_RUNTIME);
            }
        }
        MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
                   MPI_COMM_WORLD);
        if (0 == S.me) {
            for (int r = 1; r < S.nranks; ++r) {
                same &= 0 == strncmp(all, all + (size_t)r * MPI_MAX_PROCESSOR_NAME,
                                     MPI_MAX_PROCESSOR_NAME);
            }
            free(all);
        }
        MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
        S.one_host = same;
    }

    /* Buffers: each sender's messages of one round, rank 0 all of them. */
    {
        size_t total = (size_t)S.nsenders * (size_t)S.nmsg;
        size_t nreq = 0 == S.me ? total : (size_t)S.nmsg;
        int bad = 0;
        S.reqs = malloc(sizeof(MPI_Request) * nreq);
        if (0 == S.me) {
            S.rbuf = bench_alloc(total * maxsize);
            S.st = malloc(sizeof(MPI_Status) * total);
            S.idx = malloc(sizeof(int) * total);
            S.arrival = malloc(sizeof(int64_t) * total);
            S.result = malloc(sizeof(int64_t) * (size_t)S.nsenders * (3 + (size_t)S.nmsg));
            res = calloc((size_t)n, sizeof(*res));
            bad = NULL == S.rbuf || NULL == S.st || NULL == S.idx || NULL == S.arrival ||
                  NULL == S.result || NULL == res;
            for (int k = 0; !bad && k < n; ++k) {
                res[k].size = sizes[k];
                res[k].drain_ms = calloc((size_t)o.iters, sizeof(double));
                res[k].sender_ms = calloc((size_t)o.iters, sizeof(double));
                res[k].post_ms = calloc((size_t)o.iters, sizeof(double));
                res[k].lat_us = malloc(sizeof(double) * (size_t)o.iters * total);
                res[k].oneway_us = malloc(sizeof(double) * (size_t)o.iters * total);
                bad = NULL == res[k].drain_ms || NULL == res[k].sender_ms ||
                      NULL == res[k].post_ms || NULL == res[k].lat_us || NULL == res[k].oneway_us;
            }
        } else {
            S.sbuf = bench_alloc((size_t)S.nmsg * maxsize);
            S.result = malloc(sizeof(int64_t) * (3 + (size_t)S.nmsg));
            bad = NULL == S.sbuf || NULL == S.result;
        }
        if (NULL == S.reqs || bad) {
            fprintf(stderr, "llrdma-bench: incast: rank %d: cannot allocate the buffers\n", S.me);
            MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_RUNTIME);
        }
    }

    if (0 == S.me) {
        print_header(out, &o, &S, hint);
        if (dropped > 0) {
            fprintf(out, "# %d hint-relative size(s) skipped (no hint or out of range)\n", dropped);
        }
    }
    {
        int shown[2] = {0, 1};
        bench_print_ranks(out, 0, shown, 2);
    }
    for (int k = 0; k < n; ++k) {
        warm_up(&S, sizes[k]);
        if (0 == k) {
            /* What rank 1 uses towards rank 0, now that it has sent there. */
            if (1 == S.me) {
                bench_peer_transport(MPI_COMM_WORLD, 0, transport, sizeof(transport));
                MPI_Send(transport, (int)strlen(transport) + 1, MPI_CHAR, 0, TAG_INFO,
                         MPI_COMM_WORLD);
            } else if (0 == S.me) {
                MPI_Recv(transport, (int)sizeof(transport), MPI_CHAR, 1, TAG_INFO, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                fprintf(out, "# transport rank1 -> rank0: %s\n", transport);
                fflush(out);
            }
        }
        for (long it = 0; it < o.iters; ++it) {
            long e =
                round_once(&o, &S, round++, sizes[k], 0 == S.me ? &res[k] : NULL, it, &reported);
            if (0 == S.me) {
                res[k].errors += e;
                errors += e;
            }
        }
        if (0 == S.me) {
            res[k].rounds = o.iters;
            if (!o.json) {
                char label[32];
                bench_size_label(sizes[k], label, sizeof(label));
                fprintf(out, "# %s: %ld round(s) done, drain of the last %.2f ms\n", label, o.iters,
                        res[k].drain_ms[o.iters - 1]);
                fflush(out);
            }
        }
    }
    if (0 == S.me) {
        if (o.json) {
            print_json(stdout, &o, &S, hint, transport, res, n, errors);
        } else {
            print_table(out, res, n, &S);
        }
        fprintf(out, "# incast: %s\n",
                errors ? "FAILED: corrupt messages (see above)"
                       : "every byte of every message correct");
        fflush(out);
        ok = 0 == errors;
        for (int k = 0; k < n; ++k) {
            free(res[k].drain_ms);
            free(res[k].sender_ms);
            free(res[k].post_ms);
            free(res[k].lat_us);
            free(res[k].oneway_us);
        }
        free(res);
    }
    free(S.reqs);
    free(S.rbuf);
    free(S.sbuf);
    free(S.st);
    free(S.idx);
    free(S.arrival);
    free(S.result);
    MPI_Finalize();
    /* Rank 0's own verdict: mpirun exits non-zero when a rank does. */
    return ok ? BENCH_EXIT_OK : BENCH_EXIT_VERIFY;
}

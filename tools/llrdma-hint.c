/*
 * llrdma-hint: the size-hint arithmetic of libllrdma for scripts.
 *
 *   llrdma-hint parse TEXT                      validate, print bytes
 *   llrdma-hint gradient BYTES RANKS [HEADROOM] print BYTES/RANKS*(1+HEADROOM)
 *   llrdma-hint profile TEXT...                 the transport profile each hint gives
 *   llrdma-hint recommend [--json] DUMP...      a hint for the traffic the dumps counted
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_read.h"
#include "llrdma.h"
#include "llrdma_core.h"
#include "llrdma_hist.h"

static int usage(FILE *fp, int rc)
{
    fprintf(fp, "Usage: llrdma-hint parse TEXT\n"
                "       llrdma-hint gradient GRAD_BYTES RANKS [HEADROOM]\n"
                "       llrdma-hint profile HINT...\n"
                "       llrdma-hint recommend [--json] DUMP|DIR...\n"
                "\n"
                "parse: check TEXT as a size hint (16384, 16K, 16KiB, 2M, 0x4000; 0 = none)\n"
                "       and print it in bytes; exit 2 with the reason when it is invalid.\n"
                "gradient: print the per-message hint for a gradient of GRAD_BYTES (same\n"
                "       size syntax) over RANKS ranks: GRAD_BYTES / RANKS * (1 + HEADROOM),\n"
                "       HEADROOM defaulting to 0.2 (control-message margin).\n"
                "profile: print, as a Markdown table, the transport profile derived from\n"
                "       each hint (no overrides applied; see docs/profile.md).\n"
                "recommend: read the per-rank dumps of a job run with btl_llrdma_dump set to a\n"
                "       file pattern (DIR: every *.json in it), combine the message-size\n"
                "       histograms written at MPI_Finalize and propose a hint with its reasons\n"
                "       (docs/hint.md, \"Recommendation\").  --json: one JSON object.\n"
                "       Exit 0 with a recommendation (a hint, or \"no hint\"), 1 when the dumps\n"
                "       counted no traffic, 2 bad input (the message names the file).\n");
    return rc;
}

static void cell(char *buf, size_t len, uint64_t v)
{
    if (UINT64_MAX == v) {
        snprintf(buf, len, "inf");
    } else {
        llrdma_format_size(v, buf, len);
    }
}

/* One Markdown table, a column per path of each hint. */
static int profile(int n, char **texts)
{
    llrdma_profile_t p[16];
    char err[512], a[32], b[32];
    uint64_t hint;
    int cols = 0;
    const llrdma_path_profile_t *path[32];
    char head[32][64];

    if (n > 16) {
        fprintf(stderr, "llrdma-hint: at most 16 hints\n");
        return 3;
    }
    for (int i = 0; i < n; ++i) {
        if (LLRDMA_OK != llrdma_parse_size(texts[i], LLRDMA_HINT_MAX, &hint, err, sizeof(err)) ||
            LLRDMA_OK != llrdma_profile_derive(hint, NULL, &p[i])) {
            fprintf(stderr, "llrdma-hint: %s\n", err);
            return 2;
        }
        llrdma_format_size(hint, a, sizeof(a));
        if (!p[i].generic) {
            snprintf(head[cols], sizeof(head[cols]), "hint %s: low latency", a);
            path[cols++] = &p[i].ll;
        }
        snprintf(head[cols], sizeof(head[cols]),
                 p[i].generic ? "hint 0: generic" : "hint %s: bandwidth", a);
        path[cols++] = &p[i].bw;
    }
    printf("| field |");
    for (int c = 0; c < cols; ++c) {
        printf(" %s |", head[c]);
    }
    printf("\n|---|");
    for (int c = 0; c < cols; ++c) {
        printf("---|");
    }
    printf("\n| message sizes |");
    for (int c = 0; c < cols; ++c) {
        cell(a, sizeof(a), path[c]->min_bytes);
        cell(b, sizeof(b), path[c]->max_bytes);
        printf(" %s..%s |", a, b);
    }
#define ROW(label, expr)                                                                           \
    printf("\n| %s |", label);                                                                     \
    for (int c = 0; c < cols; ++c) {                                                               \
        const llrdma_path_profile_t *q = path[c];                                                  \
        expr;                                                                                      \
    }
    ROW("send queue depth", printf(" %u |", q->sq_depth));
    ROW("receive buffers per connection", printf(" %u |", q->rq_depth));
    ROW("receive buffer bytes", printf(" %u |", q->recv_buf_bytes));
    ROW("inline bytes requested", printf(" %u |", q->inline_bytes));
    ROW("signal 1 send WR in", printf(" %u |", q->signal_interval));
    ROW("CQ moderation requested (count / usec)",
        printf(" %u / %u |", q->cq_mod_count, q->cq_mod_usec));
    ROW("completion polling requested",
        printf(" %s |", LLRDMA_POLL_BUSY == q->poll ? "busy" : "event"));
    ROW("eager limit", cell(a, sizeof(a), q->eager_limit); printf(" %s |", a));
    ROW("max send (fragment)", cell(a, sizeof(a), q->max_send_size); printf(" %s |", a));
    ROW("RDMA pipeline from", cell(a, sizeof(a), q->rdma_pipeline_bytes);
        printf(" %s |", q->rdma_pipeline_bytes ? a : "-"));
    ROW("RDMA reads outstanding requested", snprintf(a, sizeof(a), "%u", q->rdma_rd_atomic);
        printf(" %s |", q->rdma_rd_atomic ? a : "-"));
    ROW("RDMA put/get fragment", cell(a, sizeof(a), q->rdma_frag_bytes);
        printf(" %s |", q->rdma_frag_bytes ? a : "-"));
#undef ROW
    printf("\n\n| hint |");
    for (int i = 0; i < n; ++i) {
        printf(" %s |", texts[i]);
    }
    printf("\n|---|");
    for (int i = 0; i < n; ++i) {
        printf("---|");
    }
    printf("\n| Allreduce segment |");
    for (int i = 0; i < n; ++i) {
        cell(a, sizeof(a), p[i].coll_segment_bytes);
        printf(" %s |", a);
    }
    /* The profile is a request; say what btl/llrdma does with it today. */
    printf("\n\nbtl/llrdma busy-polls both paths from the application's threads by default;\n"
           "the bw CQ moderation and event polling requested here take effect with\n"
           "btl_llrdma_progress_thread=1 (a thread sleeps on the bw CQ's events;\n"
           "docs/btl-design.md, \"Threads\").\n");
    return 0;
}

/* Payload range of bucket b, as the histogram defines it (llrdma_hist.h). */
static void bucket_range(unsigned b, char *buf, size_t len)
{
    char lo[32], hi[32];
    if (0 == b) {
        snprintf(buf, len, "0..1 B");
        return;
    }
    llrdma_format_size(llrdma_hist_bucket_max(b - 1), lo, sizeof(lo));
    if (UINT64_MAX == llrdma_hist_bucket_max(b)) {
        snprintf(buf, len, "> %s", lo);
        return;
    }
    llrdma_format_size(llrdma_hist_bucket_max(b), hi, sizeof(hi));
    snprintf(buf, len, "(%s, %s]", lo, hi);
}

static void print_distribution(const llrdma_dumpset_t *set, uint64_t hint)
{
    llrdma_hist_t all;
    uint64_t counts[LLRDMA_HIST_BUCKETS], total, peak = 0;
    int printed_mark = 0;

    memset(&all, 0, sizeof(all));
    for (int i = 0; i < set->n; ++i) {
        llrdma_hist_merge(&all, &set->ranks[i].hist);
    }
    total = llrdma_hist_totals(&all, counts);
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
        peak = counts[b] > peak ? counts[b] : peak;
    }
    printf("\nfragments by payload, all ranks (ll/bw: the path they took):\n");
    printf("%-18s %12s %7s %12s %12s\n", "payload", "fragments", "share", "ll", "bw");
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS && total > 0; ++b) {
        char range[80], bar[41];
        int w;
        if (0 == counts[b]) {
            continue;
        }
        if (hint && !printed_mark && llrdma_hist_bucket_max(b) > hint) {
            char h[32];
            llrdma_format_size(hint, h, sizeof(h));
            printf("%-18s ---------- recommended hint %s ----------\n", "", h);
            printed_mark = 1;
        }
        bucket_range(b, range, sizeof(range));
        w = (int)(40.0 * (double)counts[b] / (double)peak + 0.5);
        memset(bar, '#', (size_t)w);
        bar[w] = '\0';
        printf("%-18s %12llu %6.1f%% %12llu %12llu  %s\n", range, (unsigned long long)counts[b],
               100.0 * (double)counts[b] / (double)total,
               (unsigned long long)all.count[LLRDMA_HIST_LL][b],
               (unsigned long long)all.count[LLRDMA_HIST_BW][b], bar);
    }
    if (hint && !printed_mark) {
        char h[32];
        llrdma_format_size(hint, h, sizeof(h));
        printf("%-18s ---------- recommended hint %s ----------\n", "", h);
    }
}

static int recommend(int argc, char **argv)
{
    llrdma_dumpset_t set;
    llrdma_advice_t a;
    int json = 0, ndumps = 0, rc = 0;
    char h[32];

    memset(&set, 0, sizeof(set));
    for (int i = 0; i < argc; ++i) {
        if (0 == strcmp(argv[i], "--json")) {
            json = 1;
        } else if ('-' == argv[i][0] && '\0' != argv[i][1]) {
            fprintf(stderr, "llrdma-hint: recommend: unknown option '%s'\n", argv[i]);
            return 3;
        } else {
            ++ndumps;
        }
    }
    if (0 == ndumps) {
        fprintf(stderr, "llrdma-hint: recommend: give the dump files or their directory\n");
        return 3;
    }
    for (int i = 0; i < argc && 0 == rc; ++i) {
        if (0 != strcmp(argv[i], "--json")) {
            rc = llrdma_dumpset_read("llrdma-hint", argv[i], &set);
        }
    }
    if (0 != rc || 0 != llrdma_dumpset_check("llrdma-hint", &set)) {
        llrdma_dumpset_free(&set);
        return 2;
    }
    if (LLRDMA_OK != llrdma_advise(set.ranks, set.n, &a)) {
        fprintf(stderr, "llrdma-hint: out of memory\n");
        llrdma_dumpset_free(&set);
        return 3;
    }
    if (json) {
        char buf[16384];
        if (LLRDMA_OK != llrdma_advice_to_json(&a, buf, sizeof(buf))) {
            fprintf(stderr, "llrdma-hint: cannot format the recommendation\n");
            llrdma_dumpset_free(&set);
            return 3;
        }
        printf("%s\n", buf);
    } else {
        llrdma_format_size(a.hint, h, sizeof(h));
        printf("llrdma-hint: %d rank(s), %llu fragments, %llu bytes\n", a.nranks,
               (unsigned long long)a.fragments, (unsigned long long)a.bytes);
        if (LLRDMA_ADVICE_HINT == a.kind) {
            printf("recommended hint: %s (%llu bytes)\n", h, (unsigned long long)a.hint);
            printf("  mpirun --mca btl_llrdma_size_hint %s ...\n", h);
        } else if (LLRDMA_ADVICE_NO_HINT == a.kind) {
            printf("recommendation: don't use a hint (btl_llrdma_size_hint 0)\n");
        } else {
            printf("no recommendation: no traffic was counted\n");
        }
        for (int i = 0; i < a.nreasons; ++i) {
            printf("  because %s\n", a.reasons[i]);
        }
        for (int i = 0; i < a.nwarnings; ++i) {
            printf("  WARNING: %s\n", a.warnings[i]);
        }
        print_distribution(&set, LLRDMA_ADVICE_HINT == a.kind ? a.hint : 0);
    }
    llrdma_dumpset_free(&set);
    return LLRDMA_ADVICE_NO_DATA == a.kind ? 1 : 0;
}

int main(int argc, char **argv)
{
    char err[512];
    uint64_t bytes = 0;

    if (argc >= 2 && (0 == strcmp(argv[1], "--help") || 0 == strcmp(argv[1], "-h"))) {
        return usage(stdout, 0);
    }
    if (argc == 3 && 0 == strcmp(argv[1], "parse")) {
        if (LLRDMA_OK != llrdma_parse_size(argv[2], LLRDMA_HINT_MAX, &bytes, err, sizeof(err))) {
            fprintf(stderr, "llrdma-hint: %s\n", err);
            return 2;
        }
        printf("%llu\n", (unsigned long long)bytes);
        return 0;
    }
    if ((argc == 4 || argc == 5) && 0 == strcmp(argv[1], "gradient")) {
        char *end = NULL;
        long ranks;
        double headroom = 0.2;
        if (LLRDMA_OK != llrdma_parse_size(argv[2], UINT64_MAX, &bytes, err, sizeof(err))) {
            fprintf(stderr, "llrdma-hint: gradient bytes: %s\n", err);
            return 2;
        }
        errno = 0;
        ranks = strtol(argv[3], &end, 10);
        if (errno || end == argv[3] || *end || ranks <= 0 || ranks > 1L << 30) {
            fprintf(stderr, "llrdma-hint: ranks '%s': not a positive integer\n", argv[3]);
            return 2;
        }
        if (argc == 5) {
            headroom = strtod(argv[4], &end);
            if (end == argv[4] || *end || !(headroom >= 0.0)) {
                fprintf(stderr, "llrdma-hint: headroom '%s': not a number >= 0\n", argv[4]);
                return 2;
            }
        }
        printf("%llu\n",
               (unsigned long long)llrdma_hint_for_gradient_u64(bytes, (int)ranks, headroom));
        return 0;
    }
    if (argc >= 2 && 0 == strcmp(argv[1], "recommend")) {
        return recommend(argc - 2, argv + 2);
    }
    if (argc >= 3 && 0 == strcmp(argv[1], "profile")) {
        return profile(argc - 2, argv + 2);
    }
    return usage(stderr, 3);
}

/*
 * llrdma-hint: the size-hint arithmetic of libllrdma for scripts.
 *
 *   llrdma-hint parse TEXT                      validate, print bytes
 *   llrdma-hint gradient BYTES RANKS [HEADROOM] print BYTES/RANKS*(1+HEADROOM)
 *   llrdma-hint profile TEXT...                 the transport profile each hint gives
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llrdma.h"
#include "llrdma_core.h"

static int usage(FILE *fp, int rc)
{
    fprintf(fp, "Usage: llrdma-hint parse TEXT\n"
                "       llrdma-hint gradient GRAD_BYTES RANKS [HEADROOM]\n"
                "       llrdma-hint profile HINT...\n"
                "\n"
                "parse: check TEXT as a size hint (16384, 16K, 16KiB, 2M, 0x4000; 0 = none)\n"
                "       and print it in bytes; exit 2 with the reason when it is invalid.\n"
                "gradient: print the per-message hint for a gradient of GRAD_BYTES (same\n"
                "       size syntax) over RANKS ranks: GRAD_BYTES / RANKS * (1 + HEADROOM),\n"
                "       HEADROOM defaulting to 0.2 (control-message margin).\n"
                "profile: print, as a Markdown table, the transport profile derived from\n"
                "       each hint (no overrides applied; see docs/profile.md).\n");
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
    printf("\n\nbtl/llrdma busy-polls every completion queue and never waits for completion\n"
           "events, so the CQ moderation and event polling requested here have no effect\n"
           "until a blocking progress mode exists (docs/btl-design.md, \"Signalling vs\n"
           "moderation\").\n");
    return 0;
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
    if (argc >= 3 && 0 == strcmp(argv[1], "profile")) {
        return profile(argc - 2, argv + 2);
    }
    return usage(stderr, 3);
}

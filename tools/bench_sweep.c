/*
 * bench_sweep.c -- `llrdma-bench sweep`: one pingpong run per size hint
 * (mpirun --mca btl_llrdma_size_hint H), then the field report's tables:
 * P50 round trip by size and hint, the 8 B / 62 KB percentiles per hint, the
 * cliff just above the hint and the tail (P99/P50) up to 4x the hint.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "llrdma_core.h"

#define MODE "sweep"
#define MAX_HINTS 32
/* The report's rows, plus 62 KB for its percentile table. */
#define CHILD_SIZES "8,256,1K,4K,8K,16K,62K,64K"
static const uint64_t report_rows[] = {8, 256, 1024, 4096, 8192, 16384, 65536};

static void hint_label(uint64_t hint, char *buf, size_t len)
{
    char s[32];
    if (0 == hint) {
        snprintf(buf, len, "hint 0");
    } else {
        bench_size_label(hint, s, sizeof(s));
        snprintf(buf, len, "hint %s", s);
    }
}

static int parse_hints(const char *text, uint64_t *hints, int max)
{
    char *copy = strdup(text), *save = NULL, *tok, err[256];
    int n = 0;

    if (NULL == copy) {
        return -1;
    }
    for (tok = strtok_r(copy, ",", &save); NULL != tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            bench_usage_error(MODE, "--hints '%s': more than %d hints", text, max);
            n = -1;
            break;
        }
        if (LLRDMA_OK != llrdma_parse_size(tok, LLRDMA_HINT_MAX, &hints[n], err, sizeof(err))) {
            bench_usage_error(MODE, "--hints '%s': %s", text, err);
            n = -1;
            break;
        }
        ++n;
    }
    free(copy);
    if (0 == n) {
        bench_usage_error(MODE, "--hints '%s': no hint given", text);
        return -1;
    }
    return n;
}

static int has_size_option(const bench_argv_t *child)
{
    for (int i = 0; i < child->n; ++i) {
        if (bench_opt(child->v[i], "--sizes") || bench_opt(child->v[i], "--min") ||
            bench_opt(child->v[i], "--max")) {
            return 1;
        }
    }
    return 0;
}

/* Sizes present in every successful run, ascending. */
static int common_sizes(const bench_run_t *runs, int nruns, uint64_t *out, int max)
{
    int n = 0, first = -1;

    for (int r = 0; r < nruns; ++r) {
        if (0 == runs[r].exit_code) {
            first = r;
            break;
        }
    }
    if (first < 0) {
        return 0;
    }
    for (int i = 0; i < runs[first].nrows && n < max; ++i) {
        uint64_t s = runs[first].rows[i].size;
        int everywhere = 1;
        for (int r = 0; r < nruns; ++r) {
            if (0 == runs[r].exit_code && NULL == bench_run_find(&runs[r], s)) {
                everywhere = 0;
            }
        }
        if (everywhere) {
            out[n++] = s;
        }
    }
    return n;
}

static int any_has(const bench_run_t *runs, int nruns, uint64_t size)
{
    for (int r = 0; r < nruns; ++r) {
        if (NULL != bench_run_find(&runs[r], size)) {
            return 1;
        }
    }
    return 0;
}

static void cell(double v, int width, int ok)
{
    if (ok) {
        printf(" %*.2f", width, v);
    } else {
        printf(" %*s", width, "-");
    }
}

static void print_tables(const bench_run_t *runs, int nruns, const uint64_t *rows, int nrows)
{
    char label[48];
    uint64_t s1, s2;

    printf("\nRound-trip latency P50 (us) by size hint\n");
    printf("%8s", "size");
    for (int r = 0; r < nruns; ++r) {
        printf(" %12s", runs[r].label);
    }
    printf("\n");
    for (int i = 0; i < nrows; ++i) {
        bench_size_label(rows[i], label, sizeof(label));
        printf("%8s", label);
        for (int r = 0; r < nruns; ++r) {
            const bench_row_t *x = bench_run_find(&runs[r], rows[i]);
            cell(x ? x->p50 : 0, 12, NULL != x);
        }
        printf("\n");
    }

    /* The report's percentile table uses 8 B and 62 KB. */
    s1 = any_has(runs, nruns, 8) || 0 == nrows ? 8 : rows[0];
    s2 = any_has(runs, nruns, 62 * 1024) || 0 == nrows ? 62 * 1024 : rows[nrows - 1];
    printf("\nPercentiles (us, round trip)\n%-12s", "setting");
    for (int k = 0; k < 2; ++k) {
        char sl[32], h[48];
        bench_size_label(k ? s2 : s1, sl, sizeof(sl));
        snprintf(h, sizeof(h), "%s P50", sl);
        printf(" %11s", h);
        snprintf(h, sizeof(h), "%s P99", sl);
        printf(" %11s", h);
    }
    printf("\n");
    for (int r = 0; r < nruns; ++r) {
        const bench_row_t *a = bench_run_find(&runs[r], s1), *b = bench_run_find(&runs[r], s2);
        printf("%-12s", runs[r].label);
        cell(a ? a->p50 : 0, 11, NULL != a);
        cell(a ? a->p99 : 0, 11, NULL != a);
        cell(b ? b->p50 : 0, 11, NULL != b);
        cell(b ? b->p99 : 0, 11, NULL != b);
        printf("\n");
    }
}

static void print_ratios(const bench_run_t *runs, int nruns)
{
    printf("\nCliff above the hint: P50 at hint+1 / P50 at hint (> 1: the first size on the "
           "bandwidth path pays its overhead)\n");
    for (int r = 0; r < nruns; ++r) {
        const bench_row_t *h = bench_run_find(&runs[r], runs[r].key);
        const bench_row_t *h1 = bench_run_find(&runs[r], runs[r].key + 1);
        if (0 == runs[r].key) {
            printf("  %-12s no hint: not applicable\n", runs[r].label);
        } else if (NULL == h || NULL == h1 || h->p50 <= 0) {
            printf("  %-12s not measured (hint and hint+1 are measured unless the run failed)\n",
                   runs[r].label);
        } else {
            char l1[32], l0[32];
            bench_size_label(h1->size, l1, sizeof(l1));
            bench_size_label(h->size, l0, sizeof(l0));
            printf("  %-12s %s %.2f us / %s %.2f us = %.2f  (P99 ratio %.2f)\n", runs[r].label, l1,
                   h1->p50, l0, h->p50, h1->p50 / h->p50, h->p99 > 0 ? h1->p99 / h->p99 : 0.0);
        }
    }
    printf("\nTail: P99/P50 per size up to 4x the hint (all sizes without a hint; a large ratio "
           "on small sizes: the low-latency queue is too shallow for the bursts)\n");
    for (int r = 0; r < nruns; ++r) {
        uint64_t limit = runs[r].key ? 4 * runs[r].key : UINT64_MAX;
        double worst = 0;
        uint64_t worst_size = 0;
        int shown = 0;
        char lim[32];

        bench_size_label(limit, lim, sizeof(lim));
        printf("  %-12s (%s%s):", runs[r].label, runs[r].key ? "sizes <= " : "all sizes",
               runs[r].key ? lim : "");
        for (int i = 0; i < runs[r].nrows; ++i) {
            const bench_row_t *x = &runs[r].rows[i];
            char sl[32];
            double q;
            if (x->size > limit || x->p50 <= 0) {
                continue;
            }
            q = x->p99 / x->p50;
            bench_size_label(x->size, sl, sizeof(sl));
            printf("%s %s %.2f", shown ? "," : "", sl, q);
            ++shown;
            if (q > worst) {
                worst = q;
                worst_size = x->size;
            }
        }
        if (shown) {
            char wl[32];
            bench_size_label(worst_size, wl, sizeof(wl));
            printf("; worst %.2f at %s\n", worst, wl);
        } else {
            printf(" no sizes measured\n");
        }
    }
}

int bench_sweep_main(int argc, char **argv, const char *self)
{
    bench_driver_t d;
    bench_run_t runs[MAX_HINTS];
    uint64_t hints[MAX_HINTS], rows[BENCH_MAX_SIZES];
    int nh, nrows, user_sizes, failed = 0;
    FILE *csv = NULL;

    if (0 != bench_driver_parse(&d, MODE, "--hints", "0,8K,64K", argc, argv, self)) {
        return BENCH_EXIT_USAGE;
    }
    if ((nh = parse_hints(d.list, hints, MAX_HINTS)) < 0) {
        bench_driver_free(&d);
        return BENCH_EXIT_USAGE;
    }
    if (NULL != d.csv && NULL == (csv = fopen(d.csv, "w"))) {
        fprintf(stderr, "llrdma-bench: sweep: --csv '%s': cannot open for writing\n", d.csv);
        bench_driver_free(&d);
        return BENCH_EXIT_RUNTIME;
    }
    user_sizes = has_size_option(&d.child);
    printf("# llrdma-bench sweep: pingpong round trips (us) on %ld ranks, once per size hint "
           "(mpirun --mca btl_llrdma_size_hint H)\n",
           d.np);
    memset(runs, 0, sizeof(runs));
    for (int h = 0; h < nh; ++h) {
        bench_argv_t a = {0};
        char num[32];

        runs[h].key = hints[h];
        hint_label(hints[h], runs[h].label, sizeof(runs[h].label));
        bench_argv_add(&a, d.mpirun);
        for (int i = 0; i < d.mpirun_args.n; ++i) {
            bench_argv_add(&a, d.mpirun_args.v[i]);
        }
        snprintf(num, sizeof(num), "%ld", d.np);
        bench_argv_add(&a, "-np");
        bench_argv_add(&a, num);
        snprintf(num, sizeof(num), "%llu", (unsigned long long)hints[h]);
        bench_argv_add(&a, "--mca");
        bench_argv_add(&a, "btl_llrdma_size_hint");
        bench_argv_add(&a, num);
        bench_argv_add(&a, d.self);
        bench_argv_add(&a, "pingpong");
        bench_argv_add(&a, "--csv");
        bench_argv_add(&a, "-");
        for (int i = 0; i < d.child.n; ++i) {
            bench_argv_add(&a, d.child.v[i]);
        }
        bench_argv_add(&a, "--around-hint");
        if (!user_sizes) {
            bench_argv_add(&a, "--sizes");
            bench_argv_add(&a, CHILD_SIZES);
        }
        if (0 != bench_run_child(&d, &a, "hint,size,", &runs[h])) {
            ++failed;
        }
        bench_argv_free(&a);
        for (int i = 0; i < runs[h].nrows; ++i) {
            if (runs[h].rows[i].hint != hints[h]) {
                printf("# [%s] WARNING: rank 0 reports size hint %llu, not %llu: another "
                       "source overrides the launcher's (check with llrdma-check)\n",
                       runs[h].label, (unsigned long long)runs[h].rows[i].hint,
                       (unsigned long long)hints[h]);
                break;
            }
        }
        if (NULL != csv) {
            static int header_done = 0;
            if (!header_done && '\0' != runs[h].header[0]) {
                fprintf(csv, "%s\n", runs[h].header);
                header_done = 1;
            }
            for (int i = 0; i < runs[h].nrows; ++i) {
                fprintf(csv, "%s\n", runs[h].rows[i].raw);
            }
            fflush(csv);
        }
    }
    if (user_sizes) {
        nrows = common_sizes(runs, nh, rows, BENCH_MAX_SIZES);
    } else {
        nrows = (int)(sizeof(report_rows) / sizeof(report_rows[0]));
        memcpy(rows, report_rows, sizeof(report_rows));
    }
    print_tables(runs, nh, rows, nrows);
    print_ratios(runs, nh);
    return bench_driver_finish(&d, runs, nh, csv, failed);
}

/*
 * bench_compare.c -- `llrdma-bench allreduce-compare`: the same allreduce
 * measurement once per coll component (coll selection happens when a
 * communicator is created and follows MCA variables, so each component needs
 * its own mpirun), then one table of P50s, the first component over the best
 * of the others, and the P99s.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MODE "allreduce-compare"
#define MAX_COLLS 16

/* MCA settings that make `name` the Allreduce of MPI_COMM_WORLD: only the
 * component and the fallbacks it needs are allowed (basic: every collective;
 * libnbc: the non-blocking ones; self: MPI_COMM_SELF), and components that
 * are off by default get a priority above all of those. */
static void coll_mca(const char *name, bench_argv_t *a)
{
    char list[256], prio[128];

    if (0 == strcmp(name, "llrdma")) {
        /* coll/llrdma (priority 40) hands what it does not handle to tuned. */
        snprintf(list, sizeof(list), "llrdma,tuned,basic,libnbc,self");
    } else if (0 == strcmp(name, "han")) {
        /* han splits the communicator and runs tuned/basic inside and across nodes. */
        snprintf(list, sizeof(list), "han,tuned,basic,libnbc,self");
    } else if (0 == strcmp(name, "basic")) {
        snprintf(list, sizeof(list), "basic,libnbc,self");
    } else {
        snprintf(list, sizeof(list), "%.31s,basic,libnbc,self", name);
    }
    bench_argv_add(a, "--mca");
    bench_argv_add(a, "coll");
    bench_argv_add(a, list);
    if (0 != strcmp(name, "llrdma") && 0 != strcmp(name, "tuned") && 0 != strcmp(name, "basic")) {
        /* han, adapt, sm, ...: priority 0 (disabled) by default. */
        snprintf(prio, sizeof(prio), "coll_%.31s_priority", name);
        bench_argv_add(a, "--mca");
        bench_argv_add(a, prio);
        bench_argv_add(a, "100");
    }
}

static int parse_colls(const char *text, char names[][32], int max)
{
    char *copy = strdup(text), *save = NULL, *tok;
    int n = 0;

    if (NULL == copy) {
        return -1;
    }
    for (tok = strtok_r(copy, ",", &save); NULL != tok; tok = strtok_r(NULL, ",", &save)) {
        size_t l = strlen(tok);
        if (n == max) {
            bench_usage_error(MODE, "--colls '%s': more than %d components", text, max);
            n = -1;
            break;
        }
        if (0 == l || l >= 32 || strspn(tok, "abcdefghijklmnopqrstuvwxyz0123456789_") != l) {
            bench_usage_error(MODE, "--colls '%s': '%s' is not a coll component name", text, tok);
            n = -1;
            break;
        }
        snprintf(names[n++], 32, "%s", tok);
    }
    free(copy);
    if (0 == n) {
        bench_usage_error(MODE, "--colls '%s': no component given", text);
        return -1;
    }
    return n;
}

static void cell(const bench_row_t *x, int p99, int width)
{
    if (NULL != x) {
        printf(" %*.2f", width, p99 ? x->p99 : x->p50);
    } else {
        printf(" %*s", width, "-");
    }
}

/* Every size any run measured, ascending. */
static int all_sizes(const bench_run_t *runs, int n, uint64_t *sizes)
{
    int ns = 0;
    for (int r = 0; r < n; ++r) {
        for (int i = 0; i < runs[r].nrows; ++i) {
            uint64_t s = runs[r].rows[i].size;
            int k = 0;
            while (k < ns && sizes[k] < s) {
                ++k;
            }
            if ((k < ns && sizes[k] == s) || ns == BENCH_MAX_SIZES) {
                continue;
            }
            memmove(&sizes[k + 1], &sizes[k], sizeof(uint64_t) * (size_t)(ns - k));
            sizes[k] = s;
            ++ns;
        }
    }
    return ns;
}

static void print_table(const bench_run_t *runs, int n, long np)
{
    const bench_run_t *ref = n > 1 ? &runs[0] : NULL;
    char h[64], label[32];
    uint64_t sizes[BENCH_MAX_SIZES];
    int ns = all_sizes(runs, n, sizes), w[MAX_COLLS], wr = 0;

    for (int r = 0; r < n; ++r) {
        w[r] = (int)strlen(runs[r].label) + 4;
        w[r] = w[r] < 10 ? 10 : w[r];
    }
    printf("\nAllreduce latency (us, max over ranks per call) on %ld ranks, by coll component: "
           "P50%s, then P99\n",
           np,
           ref ? "; ratio = first component's P50 / best P50 of the others (< 1: first is "
                 "faster)"
               : "");
    printf("%8s", "size");
    for (int r = 0; r < n; ++r) {
        snprintf(h, sizeof(h), "%.40s P50", runs[r].label);
        printf(" %*s", w[r], h);
    }
    if (ref) {
        snprintf(h, sizeof(h), "%.40s/best", ref->label);
        wr = (int)strlen(h) < 10 ? 10 : (int)strlen(h);
        printf(" %*s", wr, h);
    }
    for (int r = 0; r < n; ++r) {
        snprintf(h, sizeof(h), "%.40s P99", runs[r].label);
        printf(" %*s", w[r], h);
    }
    printf("\n");
    for (int i = 0; i < ns; ++i) {
        bench_size_label(sizes[i], label, sizeof(label));
        printf("%8s", label);
        for (int r = 0; r < n; ++r) {
            cell(bench_run_find(&runs[r], sizes[i]), 0, w[r]);
        }
        if (ref) {
            const bench_row_t *x = bench_run_find(ref, sizes[i]);
            double best = 0;
            for (int r = 1; r < n; ++r) {
                const bench_row_t *y = bench_run_find(&runs[r], sizes[i]);
                if (NULL != y && y->p50 > 0 && (0 == best || y->p50 < best)) {
                    best = y->p50;
                }
            }
            if (NULL != x && best > 0) {
                printf(" %*.2f", wr, x->p50 / best);
            } else {
                printf(" %*s", wr, "-");
            }
        }
        for (int r = 0; r < n; ++r) {
            cell(bench_run_find(&runs[r], sizes[i]), 1, w[r]);
        }
        printf("\n");
    }
}

int bench_compare_main(int argc, char **argv, const char *self)
{
    bench_driver_t d;
    bench_run_t runs[MAX_COLLS];
    char names[MAX_COLLS][32];
    int n, failed = 0, header_done = 0;
    FILE *csv = NULL;

    if (0 != bench_driver_parse(&d, MODE, "--colls", "llrdma,tuned,han,basic", argc, argv, self)) {
        return BENCH_EXIT_USAGE;
    }
    if ((n = parse_colls(d.list, names, MAX_COLLS)) < 0) {
        bench_driver_free(&d);
        return BENCH_EXIT_USAGE;
    }
    if (NULL != d.csv && NULL == (csv = fopen(d.csv, "w"))) {
        fprintf(stderr, "llrdma-bench: %s: --csv '%s': cannot open for writing\n", MODE, d.csv);
        bench_driver_free(&d);
        return BENCH_EXIT_RUNTIME;
    }
    printf("# llrdma-bench allreduce-compare: allreduce on %ld ranks, once per coll component "
           "(mpirun --mca coll ...)\n",
           d.np);
    memset(runs, 0, sizeof(runs));
    for (int c = 0; c < n; ++c) {
        bench_argv_t a = {0};
        char num[32];

        snprintf(runs[c].label, sizeof(runs[c].label), "%.31s", names[c]);
        bench_argv_add(&a, d.mpirun);
        for (int i = 0; i < d.mpirun_args.n; ++i) {
            bench_argv_add(&a, d.mpirun_args.v[i]);
        }
        snprintf(num, sizeof(num), "%ld", d.np);
        bench_argv_add(&a, "-np");
        bench_argv_add(&a, num);
        coll_mca(names[c], &a);
        bench_argv_add(&a, d.self);
        bench_argv_add(&a, "allreduce");
        bench_argv_add(&a, "--csv");
        bench_argv_add(&a, "-");
        for (int i = 0; i < d.child.n; ++i) {
            bench_argv_add(&a, d.child.v[i]);
        }
        if (0 != bench_run_child(&d, &a, "ranks,hint,size,", &runs[c])) {
            ++failed;
        }
        bench_argv_free(&a);
        if ('\0' != runs[c].served_by[0] && 0 != strcmp(runs[c].served_by, names[c])) {
            printf("# [%s] WARNING: MPI_Allreduce was served by coll/%s, not coll/%s: the "
                   "component disqualified itself (coll/han does on a single node)\n",
                   names[c], runs[c].served_by, names[c]);
            char served[64];
            snprintf(served, sizeof(served), "%s", runs[c].served_by);
            snprintf(runs[c].label, sizeof(runs[c].label), "%.15s>%.15s", names[c], served);
        }
        if (NULL != csv) {
            if (!header_done && '\0' != runs[c].header[0]) {
                fprintf(csv, "coll,%s\n", runs[c].header);
                header_done = 1;
            }
            for (int i = 0; i < runs[c].nrows; ++i) {
                fprintf(csv, "%s,%s\n", names[c], runs[c].rows[i].raw);
            }
            fflush(csv);
        }
    }
    print_table(runs, n, d.np);
    return bench_driver_finish(&d, runs, n, csv, failed);
}

/*
 * bench_stats.c -- sorting, nearest-rank percentiles, self-test.
 */
#include "bench_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_sort(double *v, size_t n)
{
    if (n > 1) {
        qsort(v, n, sizeof(*v), cmp_double);
    }
}

double bench_percentile_sorted(const double *v, size_t n, double pct)
{
    /* Integer arithmetic in tenths of a percent: 0.99 * 1000 in floating
     * point is not exactly 990, and ceil() would then pick rank 991. */
    long long tenths, rank;

    if (0 == n) {
        return 0.0;
    }
    tenths = llround(pct * 10.0);
    if (tenths < 0) {
        tenths = 0;
    } else if (tenths > 1000) {
        tenths = 1000;
    }
    rank = (tenths * (long long)n + 999) / 1000; /* ceil(pct/100 * n) */
    if (rank < 1) {
        rank = 1;
    }
    return v[rank - 1];
}

void bench_summarize(double *v, size_t n, bench_summary_t *out)
{
    double sum = 0.0;

    memset(out, 0, sizeof(*out));
    if (0 == n) {
        return;
    }
    bench_sort(v, n);
    for (size_t i = 0; i < n; ++i) {
        sum += v[i];
    }
    out->n = n;
    out->min = v[0];
    out->max = v[n - 1];
    out->mean = sum / (double)n;
    out->p50 = bench_percentile_sorted(v, n, 50.0);
    out->p90 = bench_percentile_sorted(v, n, 90.0);
    out->p99 = bench_percentile_sorted(v, n, 99.0);
    out->p999 = bench_percentile_sorted(v, n, 99.9);
}

static int expect(FILE *fp, const char *what, double got, double want)
{
    if (fabs(got - want) > 1e-12) {
        fprintf(fp, "stats self-test: %s = %g, expected %g\n", what, got, want);
        return 1;
    }
    return 0;
}

int bench_stats_selftest(FILE *fp)
{
    int fail = 0;
    double v[1000], one = 7.0, ten[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    double four[4] = {4, 1, 3, 2};
    bench_summary_t s;

    /* 1..1000 shuffled: P50 = 500, P90 = 900, P99 = 990, P99.9 = 999. */
    for (int i = 0; i < 1000; ++i) {
        v[i] = (double)(((i * 7919) % 1000) + 1);
    }
    bench_summarize(v, 1000, &s);
    fail += expect(fp, "n=1000 min", s.min, 1);
    fail += expect(fp, "n=1000 P50", s.p50, 500);
    fail += expect(fp, "n=1000 P90", s.p90, 900);
    fail += expect(fp, "n=1000 P99", s.p99, 990);
    fail += expect(fp, "n=1000 P99.9", s.p999, 999);
    fail += expect(fp, "n=1000 max", s.max, 1000);
    fail += expect(fp, "n=1000 mean", s.mean, 500.5);
    for (int i = 1; i < 1000; ++i) {
        if (v[i - 1] > v[i]) {
            fprintf(fp, "stats self-test: not sorted at %d\n", i);
            ++fail;
            break;
        }
    }
    /* 1..10: rank ceil(0.5*10)=5 -> 5, ceil(9)=9 -> 9, ceil(9.9)=10 -> 10. */
    bench_summarize(ten, 10, &s);
    fail += expect(fp, "n=10 P50", s.p50, 5);
    fail += expect(fp, "n=10 P90", s.p90, 9);
    fail += expect(fp, "n=10 P99", s.p99, 10);
    fail += expect(fp, "n=10 P99.9", s.p999, 10);
    /* 1..4: P50 = rank 2 (nearest rank never interpolates: not 2.5). */
    bench_summarize(four, 4, &s);
    fail += expect(fp, "n=4 P50", s.p50, 2);
    fail += expect(fp, "n=4 P0", bench_percentile_sorted(four, 4, 0.0), 1);
    fail += expect(fp, "n=4 P100", bench_percentile_sorted(four, 4, 100.0), 4);
    fail += expect(fp, "n=4 P25", bench_percentile_sorted(four, 4, 25.0), 1);
    fail += expect(fp, "n=4 P25.1", bench_percentile_sorted(four, 4, 25.1), 2);
    /* One sample: every percentile is that sample. */
    bench_summarize(&one, 1, &s);
    fail += expect(fp, "n=1 P50", s.p50, 7);
    fail += expect(fp, "n=1 P99.9", s.p999, 7);
    /* No samples: zeros, no crash. */
    bench_summarize(v, 0, &s);
    fail += expect(fp, "n=0 P50", s.p50, 0);
    fail += expect(fp, "n=0 n", (double)s.n, 0);
    return fail;
}

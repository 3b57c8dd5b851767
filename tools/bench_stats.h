/*
 * bench_stats.h -- summary statistics of llrdma-bench samples.
 *
 * Percentiles use the nearest-rank method on the sorted samples: the P-th
 * percentile of n samples is the sample of (1-based) rank ceil(P/100 * n),
 * an actual measurement (no interpolation).  With 1000 samples P99 is the
 * 990th smallest and P99.9 the 999th.
 */
#ifndef LLRDMA_BENCH_STATS_H
#define LLRDMA_BENCH_STATS_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    size_t n;
    double min, max, mean;
    double p50, p90, p99, p999;
} bench_summary_t;

/* Sort ascending in place. */
void bench_sort(double *v, size_t n);
/* Nearest-rank percentile of sorted v (pct in [0, 100], resolution 0.1);
 * 0 when n == 0. */
double bench_percentile_sorted(const double *v, size_t n, double pct);
/* Sorts v in place and fills out; n == 0 gives all zeros. */
void bench_summarize(double *v, size_t n, bench_summary_t *out);
/* Checks the functions above on known inputs; prints each failure to fp and
 * returns the number of failures. */
int bench_stats_selftest(FILE *fp);

#endif

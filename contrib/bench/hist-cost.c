/*
 * Cost of btl/llrdma's per-fragment histogram increment (llrdma_hist_add,
 * docs/hint.md "Hot-path cost"): one loop over random fragment sizes with and
 * without it, best of 5 rounds.
 *
 *   gcc -O2 -Illrdma_core -o hist-cost contrib/bench/hist-cost.c && ./hist-cost
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "llrdma_hist.h"

#define N (1 << 16)
#define REPS 2000

static llrdma_hist_t h;
static uint64_t sz[N];
static volatile uint64_t sink;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
    double best_base = 1e9, best_hist = 1e9, n = (double)REPS * N;

    srand(1);
    for (int i = 0; i < N; ++i) {
        sz[i] = 8 + (uint64_t)(rand() % 70000);
    }
    for (int round = 0; round < 5; ++round) {
        double t0 = now(), t1, t2;
        for (int r = 0; r < REPS; ++r) {
            uint64_t s = 0;
            for (int i = 0; i < N; ++i) {
                s += sz[i];
                __asm__ volatile("" ::: "memory"); /* same loop shape as below */
            }
            sink = s;
        }
        t1 = now();
        for (int r = 0; r < REPS; ++r) {
            uint64_t s = 0;
            for (int i = 0; i < N; ++i) {
                s += sz[i];
                llrdma_hist_add(&h, i & 1, sz[i]);
                __asm__ volatile("" ::: "memory");
            }
            sink = s;
        }
        t2 = now();
        best_base = t1 - t0 < best_base ? t1 - t0 : best_base;
        best_hist = t2 - t1 < best_hist ? t2 - t1 : best_hist;
    }
    printf("per fragment: loop %.2f ns, loop + llrdma_hist_add %.2f ns, added %.2f ns\n",
           best_base / n * 1e9, best_hist / n * 1e9, (best_hist - best_base) / n * 1e9);
    return 0;
}

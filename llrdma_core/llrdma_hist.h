/*
 * llrdma_hist.h -- message-size histogram of btl/llrdma and the hint advisor
 * (C API of llrdma_core/histogram.cc and llrdma_core/advisor.cc).
 *
 * The BTL counts every fragment it posts into log2 buckets per path, plus the
 * sends that had to wait for a send-queue slot or a credit; at MPI_Finalize
 * the counts go into the per-rank dump.  The advisor reads the dumps of every
 * rank and proposes a hint following the field report's guidance
 * (docs/background.md, docs/hint.md "Recommendation").  No Open MPI header,
 * no I/O.
 */
#ifndef LLRDMA_HIST_H
#define LLRDMA_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "llrdma_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Paths counted.  LL and BW are btl/llrdma's LLRDMA_PATH_LL/BW; RDMA counts
 * btl_put/btl_get operations by size (no BTL header: the bucket is the size). */
enum { LLRDMA_HIST_LL = 0, LLRDMA_HIST_BW = 1, LLRDMA_HIST_RDMA = 2, LLRDMA_HIST_NPATHS = 3 };

/* Bucket b >= 1 holds fragments whose payload (fragment bytes minus
 * LLRDMA_HIST_HDR_ALLOWANCE of ob1 and BTL headers) lies in (2^(b-1), 2^b]:
 * exactly the fragments the low-latency path of a hint of 2^b carries (the
 * profile sizes its buffers as hint + the same 64 header bytes).  Bucket 0
 * holds payloads of 0 or 1 byte, the last bucket everything above 2^30. */
#define LLRDMA_HIST_BUCKETS 32
#define LLRDMA_HIST_HDR_ALLOWANCE 64

typedef struct {
    uint64_t count[LLRDMA_HIST_NPATHS][LLRDMA_HIST_BUCKETS]; /* fragments posted */
    uint64_t bytes[LLRDMA_HIST_NPATHS][LLRDMA_HIST_BUCKETS]; /* their fragment bytes */
    uint64_t waits[LLRDMA_HIST_NPATHS]; /* sends queued for a send-queue slot or a credit */
    /* Completion queues of the LL and BW paths (index LLRDMA_HIST_LL/BW):
     * work completions polled, and completion events taken (the progress
     * thread's wake-ups; 0 on a polled path).  Events per completion show
     * the moderation working. */
    uint64_t cq_completions[2], cq_events[2];
    /* The progress thread's share of cq_completions (LL: taken while the
     * application computed) and its CPU time (microseconds, summed over
     * ports); 0 without a thread. */
    uint64_t thread_completions[2], thread_cpu_us;
} llrdma_hist_t;

/* Hot path: inline, one count and one sum per fragment, no branch beyond the
 * clamp (the cost is measured in docs/hint.md). */
static inline unsigned llrdma_hist_bucket(uint64_t frag_bytes)
{
    uint64_t p =
        frag_bytes > LLRDMA_HIST_HDR_ALLOWANCE ? frag_bytes - LLRDMA_HIST_HDR_ALLOWANCE : 0;
    unsigned b = p <= 1 ? 0u : 64u - (unsigned)__builtin_clzll(p - 1);
    return b < LLRDMA_HIST_BUCKETS ? b : LLRDMA_HIST_BUCKETS - 1;
}

static inline void llrdma_hist_add(llrdma_hist_t *h, int path, uint64_t frag_bytes)
{
    unsigned b = llrdma_hist_bucket(frag_bytes);
    h->count[path][b] += 1;
    h->bytes[path][b] += frag_bytes;
}

static inline void llrdma_hist_wait(llrdma_hist_t *h, int path)
{
    h->waits[path] += 1;
}

/* A histogram one writer updates at a time (btl/llrdma: each module's, under
 * that module's lock) while any thread may read it (MPI_T, the dump):
 * relaxed atomic loads and stores, plain moves on common machines, so no
 * read-modify-write and no cache line shared with another module's writer. */
static inline void llrdma_hist_bump(uint64_t *x, uint64_t by)
{
    __atomic_store_n(x, __atomic_load_n(x, __ATOMIC_RELAXED) + by, __ATOMIC_RELAXED);
}

static inline void llrdma_hist_add_sw(llrdma_hist_t *h, int path, uint64_t frag_bytes,
                                      uint64_t counted_bytes)
{
    unsigned b = llrdma_hist_bucket(frag_bytes);
    llrdma_hist_bump(&h->count[path][b], 1);
    llrdma_hist_bump(&h->bytes[path][b], counted_bytes);
}

static inline void llrdma_hist_wait_sw(llrdma_hist_t *h, int path)
{
    llrdma_hist_bump(&h->waits[path], 1);
}

/* Largest payload of bucket b (2^b; bucket 0: 1); UINT64_MAX for the last. */
uint64_t llrdma_hist_bucket_max(unsigned b);
/* dst += src. */
void llrdma_hist_merge(llrdma_hist_t *dst, const llrdma_hist_t *src);
/* dst += the send-side counts of src (fragments, bytes, waits), read with
 * relaxed atomic loads: src may be written meanwhile by its one writer
 * (llrdma_hist_add_sw); each counter is read whole.  Inline beside the
 * writer, so both sides are compiled (and sanitised) where they are used.
 * The CQ and thread counts are merged when a module is destroyed. */
static inline void llrdma_hist_merge_live(llrdma_hist_t *dst, const llrdma_hist_t *src)
{
    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
        for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
            dst->count[p][b] += __atomic_load_n(&src->count[p][b], __ATOMIC_RELAXED);
            dst->bytes[p][b] += __atomic_load_n(&src->bytes[p][b], __ATOMIC_RELAXED);
        }
        dst->waits[p] += __atomic_load_n(&src->waits[p], __ATOMIC_RELAXED);
    }
}
/* Small sends by exact wire size: one increment per send, no bucket or byte
 * sum computed (btl/llrdma's sendi, where a send costs a few hundred
 * instructions in all), folded into a histogram's buckets when read.  Same
 * discipline as llrdma_hist_add_sw: one writer at a time, readers any time. */
#define LLRDMA_HIST_SMALL_MAX 1024
typedef struct {
    uint64_t count[LLRDMA_HIST_SMALL_MAX + 1][LLRDMA_HIST_BW + 1]; /* [wire bytes][LL or BW] */
} llrdma_hist_small_t;

/* One fragment of `wire` bytes (at most LLRDMA_HIST_SMALL_MAX) on path
 * LLRDMA_HIST_LL or LLRDMA_HIST_BW: as llrdma_hist_add_sw(h, path, wire, wire). */
static inline void llrdma_hist_small_add_sw(llrdma_hist_small_t *s, int path, size_t wire)
{
    llrdma_hist_bump(&s->count[wire][path], 1);
}

/* dst += src, in buckets (relaxed loads, as llrdma_hist_merge_live). */
static inline void llrdma_hist_small_fold(llrdma_hist_t *dst, const llrdma_hist_small_t *src)
{
    for (int p = LLRDMA_HIST_LL; p <= LLRDMA_HIST_BW; ++p) {
        for (uint32_t w = 0; w <= LLRDMA_HIST_SMALL_MAX; ++w) {
            const uint64_t n = __atomic_load_n(&src->count[w][p], __ATOMIC_RELAXED);
            if (0 != n) {
                const unsigned b = llrdma_hist_bucket(w);
                dst->count[p][b] += n;
                dst->bytes[p][b] += n * w;
            }
        }
    }
}

/* Fragments of every path per bucket (counts[LLRDMA_HIST_BUCKETS]); returns the total. */
uint64_t llrdma_hist_totals(const llrdma_hist_t *h, uint64_t *counts);
/* Nearest-rank percentile over all paths: the bucket holding fragment number
 * ceil(pct/100 x total); -1 when the histogram is empty or pct is outside (0, 100]. */
int llrdma_hist_percentile_bucket(const llrdma_hist_t *h, double pct);

/* ------------------------------------------------------------ dump record */

/* What the advisor needs of one rank's dump. */
typedef struct {
    int rank;
    char host[256];
    long pid;
    uint64_t hint;        /* the hint the rank ran with */
    uint32_t ll_sq_depth; /* low-latency send queue of that hint (0: generic) */
    llrdma_hist_t hist;
} llrdma_rank_stats_t;

/* Buffer size for any finalize record. */
#define LLRDMA_STATS_JSON_MAX (LLRDMA_CONFIG_JSON_MAX + 8192)

/* The finalize record: the configuration line (llrdma_config_to_json) with
 * "record":"finalize" and a "stats" member added.  On LLRDMA_ERR_TRUNCATED
 * buf holds the empty string. */
int llrdma_stats_to_json(const llrdma_rank_config_t *cfg, const llrdma_hist_t *h, char *buf,
                         size_t len);
/* Parse one dump line.  LLRDMA_OK: *out filled.  LLRDMA_ERR_NOT_FOUND: an
 * llrdma record without statistics (the MPI_Init line).  LLRDMA_ERR_INVALID:
 * not JSON, not an llrdma dump, or malformed statistics; err says which. */
int llrdma_stats_from_json(const char *json, llrdma_rank_stats_t *out, char *err, size_t errlen);

/* ---------------------------------------------------------------- advisor */

typedef enum {
    LLRDMA_ADVICE_HINT = 0,    /* use `hint` */
    LLRDMA_ADVICE_NO_HINT = 1, /* don't use a hint (sizes span, bandwidth-first) */
    LLRDMA_ADVICE_NO_DATA = 2, /* no fragment was counted */
} llrdma_advice_kind_t;

/* Which rules fired (bit set in llrdma_advice_t.rules). */
enum {
    LLRDMA_RULE_MEDIAN = 1 << 0,       /* hint covers the median size's bucket */
    LLRDMA_RULE_PLUS_BIT = 1 << 1,     /* raised above it: to P75, or many sizes just above */
    LLRDMA_RULE_SPAN = 1 << 2,         /* sizes span orders of magnitude: no hint */
    LLRDMA_RULE_BW_FIRST = 1 << 3,     /* most fragments are large: no hint */
    LLRDMA_RULE_QUEUE_FULL = 1 << 4,   /* the LL queue was often full at the current hint */
    LLRDMA_RULE_RANKS_DIFFER = 1 << 5, /* ranks saw very different size mixes */
    LLRDMA_RULE_HINTS_DIFFER = 1 << 6, /* ranks ran with different hints */
    LLRDMA_RULE_TOO_LARGE = 1 << 7,    /* current hint well above the recommendation */
    LLRDMA_RULE_ABOVE_HINT = 1 << 8,   /* many fragments above the current hint */
};

#define LLRDMA_ADVICE_MAX_LINES 8

typedef struct {
    llrdma_advice_kind_t kind;
    uint64_t hint;      /* recommendation (kind HINT), else 0 */
    unsigned rules;     /* LLRDMA_RULE_* */
    int nranks;         /* records read */
    int nranks_data;    /* records with at least one fragment */
    uint64_t fragments; /* all paths, all ranks */
    uint64_t bytes;
    uint64_t current_hint;              /* the hint of the lowest rank */
    uint64_t p10_max, p50_max, p90_max; /* payload bound of those percentile buckets */
    double covered;                     /* share of fragments at or below `hint` */
    double ll_wait_share;               /* LL sends that waited / LL sends */
    int nreasons;
    char reasons[LLRDMA_ADVICE_MAX_LINES][256];
    int nwarnings;
    char warnings[LLRDMA_ADVICE_MAX_LINES][256];
} llrdma_advice_t;

/* Pure.  n == 0 or no fragment gives kind NO_DATA. */
int llrdma_advise(const llrdma_rank_stats_t *ranks, int n, llrdma_advice_t *out);
/* One JSON object, single line.  LLRDMA_ERR_TRUNCATED: buf empty. */
int llrdma_advice_to_json(const llrdma_advice_t *a, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif

// hier_plan.cc -- communicators spanning nodes: the layout, the per-
// communicator mode and the per-call plan of the hierarchical schedule
// (hier.cc), and the test-only node grouping.  Pure; docs/allreduce.md,
// "Several nodes".
//
// Why per slice and not through one leader per node: with L ranks per node a
// leader scheme (coll/han, UCC's "rab") sends the whole vector across the
// network from one process per node while the other L - 1 wait; here each
// of the U = min(L) local ranks carries 1/U of it, so U processes drive the
// NIC (and reduce) at once and each inter-node message is 1/U as large --
// which is also why the inter-node step's algorithm and segment are planned
// for the slice, with the size hint, exactly as a flat Allreduce of the slice
// on `nodes` ranks would be.  Slices of less than 8 KiB are not worth a
// message each: small vectors use fewer slices (down to one, which is the
// leader scheme).
#include "internal.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace
{

// Slices below this are not worth a message each: one slice, one holder per
// node (the leader scheme).  8 KiB: across two guests, 8 KB vectors took
// 0.72-0.82x han's time with one slice and 1.13-1.18x with two
// (docs/benchmarks-cluster.md, 2026-12-06); 16 KB was level either way.
constexpr size_t kMinSliceBytes = 8192;
// Between two nodes, slices up to this go across in one exchange (recursive
// doubling) instead of two of half the slice (Rabenseifner, the ring: the
// same bytes, a second network latency, half the reduction).  Across two
// guests at hint 8K, forced by the knob: 4 KB vectors 0.78x han's time
// against 0.99-1.01 with the halves, 32 KB (16 KiB slices) 0.89 against
// 0.98-1.03 (docs/benchmarks-cluster.md, 2026-12-06); measured up to 16 KiB.
constexpr size_t kTwoNodesOneExchangeMax = 16384;
constexpr int kSplitMax = 1 << 20; // ranks in one group of the test knob

} // namespace

using namespace llrdma::ar;

extern "C" int llrdma_ar_layout(int size, const int *node_key, int rank, llrdma_ar_topo_t *topo,
                                llrdma_ar_hier_t *me, int *peers, int peers_max)
{
    if (size < 1 || !node_key || rank < 0 || rank >= size || !topo || !me || !peers)
        return LLRDMA_AR_ERR_INVALID;
    try {
        // Nodes in order of their lowest rank; local ranks in rank order.
        std::map<int, int> index; // key -> node
        std::vector<int> node_of(static_cast<size_t>(size)), local_of(static_cast<size_t>(size));
        std::vector<int> count;
        for (int r = 0; r < size; ++r) {
            auto it = index.find(node_key[r]);
            if (it == index.end()) {
                it = index.emplace(node_key[r], static_cast<int>(count.size())).first;
                count.push_back(0);
            }
            node_of[r] = it->second;
            local_of[r] = count[it->second]++;
        }
        const int nnodes = static_cast<int>(count.size());
        if (peers_max < nnodes)
            return LLRDMA_AR_ERR_INVALID;
        *topo = llrdma_ar_topo_t{};
        topo->nnodes = nnodes;
        topo->min_local = *std::min_element(count.begin(), count.end());
        topo->max_local = *std::max_element(count.begin(), count.end());
        *me = llrdma_ar_hier_t{};
        me->nnodes = nnodes;
        me->node = node_of[rank];
        me->local_rank = local_of[rank];
        me->local_size = count[node_of[rank]];
        me->peers = peers;
        std::fill(peers, peers + nnodes, -1);
        for (int r = 0; r < size; ++r)
            if (local_of[r] == me->local_rank)
                peers[node_of[r]] = r;
        return LLRDMA_AR_OK;
    } catch (...) {
        return LLRDMA_AR_ERR_NOMEM;
    }
}

extern "C" int llrdma_ar_mode(const llrdma_ar_topo_t *t, const char **why)
{
    const char *w;
    int mode;
    if (!t || t->nnodes < 1 || t->min_local < 1 || t->max_local < t->min_local)
        return LLRDMA_AR_ERR_INVALID;
    if (t->nnodes == 1) {
        mode = LLRDMA_AR_MODE_FLAT;
        w = "one node";
    } else if (t->max_local == 1) {
        mode = LLRDMA_AR_MODE_FLAT;
        w = "one rank per node: the flat algorithms are the inter-node step";
    } else if (t->arenas) {
        mode = LLRDMA_AR_MODE_HIER;
        w = "several nodes: arena reduce-scatter, inter-node Allreduce per slice, arena "
            "all-gather";
    } else if (t->below_hier) {
        mode = LLRDMA_AR_MODE_DECLINE;
        w = "several ranks per node but no arena: the module below is hierarchical";
    } else {
        mode = LLRDMA_AR_MODE_FLAT;
        w = "several ranks per node but no arena, and the module below is flat too";
    }
    if (why)
        *why = w;
    return mode;
}

extern "C" int llrdma_ar_plan_hier(size_t bytes, size_t dtype_size, const llrdma_ar_topo_t *topo,
                                   uint64_t hint, size_t eager_bytes, int forced_alg,
                                   size_t forced_segment, llrdma_ar_plan_t *out)
{
    if (!out || !topo || dtype_size == 0 || bytes % dtype_size != 0 || topo->nnodes < 1 ||
        topo->min_local < 1 || forced_alg < 0 || forced_alg >= LLRDMA_AR_NKNOB)
        return LLRDMA_AR_ERR_INVALID;
    const size_t count = bytes / dtype_size;
    size_t u = std::max<size_t>(1, bytes / kMinSliceBytes);
    u = std::min({u, static_cast<size_t>(topo->min_local), std::max<size_t>(count, 1)});
    const int slices = static_cast<int>(u);
    const size_t slice_bytes = block_len(count, u, 0) * dtype_size;
    // The arena algorithms are node-local; across nodes the knob may only
    // force a message algorithm.
    int inner_forced = forced_alg == LLRDMA_AR_SHM_DIRECT || forced_alg == LLRDMA_AR_SHM_SPLIT
                           ? LLRDMA_AR_AUTO
                           : forced_alg;
    llrdma_ar_plan_t inner{};
    int rc = llrdma_ar_plan_ex(slice_bytes, dtype_size, topo->nnodes, hint, eager_bytes,
                               inner_forced, forced_segment, &inner);
    if (rc != LLRDMA_AR_OK)
        return rc;
    if (topo->nnodes == 2 && inner_forced == LLRDMA_AR_AUTO &&
        slice_bytes <= kTwoNodesOneExchangeMax && inner.alg != LLRDMA_AR_RECURSIVE_DOUBLING) {
        inner.alg = LLRDMA_AR_RECURSIVE_DOUBLING;
        inner.why = "two nodes: the slice in one exchange (<= 16K)";
    }
    *out = inner;
    out->alg = LLRDMA_AR_HIER;
    out->why = slices > 1 ? "several nodes: one slice per local rank, each across nodes"
                          : "several nodes, one slice (small vector or a one-rank node)";
    out->inter_alg = inner.alg;
    out->inter_why = inner.why;
    out->slices = slices;
    out->nodes = topo->nnodes;
    return LLRDMA_AR_OK;
}

extern "C" size_t llrdma_ar_hier_msg_max(const llrdma_ar_plan_t *plan, size_t count, size_t esize)
{
    if (!plan || plan->alg != LLRDMA_AR_HIER || plan->nodes < 2 || plan->slices < 1 || esize == 0)
        return 0;
    const size_t p = static_cast<size_t>(plan->nodes);
    const size_t n = block_len(count, static_cast<size_t>(plan->slices), 0); // largest slice
    const bool pow2 = (p & (p - 1)) == 0;
    switch (plan->inter_alg) {
    case LLRDMA_AR_RABENSEIFNER:
        // p blocks; the first halving step sends the half it does not keep,
        // at most the lower half (blocks hold one element more first).
        return (pow2 ? block_start(n, p, p / 2) : n) * esize;
    case LLRDMA_AR_RING:
        return std::min(plan->segment_bytes / esize, block_len(n, p, 0)) * esize;
    default:
        return n * esize;
    }
}

extern "C" int llrdma_ar_node_split_parse(const char *text, int *sizes, int max, int *n,
                                          int *repeat, char *err, size_t errlen)
{
    if (!sizes || !n || !repeat || max < 1)
        return LLRDMA_AR_ERR_INVALID;
    *n = 0;
    *repeat = 0;
    if (!text || !*text)
        return LLRDMA_AR_OK; // off
    const char *p = text;
    while (true) {
        char *end = nullptr;
        errno = 0;
        long v = std::isdigit(static_cast<unsigned char>(*p)) ? std::strtol(p, &end, 10) : -1;
        if (v < 1 || v > kSplitMax || errno != 0 || (*end != ',' && *end != '\0')) {
            if (err && errlen)
                std::snprintf(err, errlen,
                              "'%s': expected ranks per node (1..%d) or a comma-separated list "
                              "of them; item %d is not",
                              text, kSplitMax, *n + 1);
            return LLRDMA_AR_ERR_INVALID;
        }
        if (*n == max) {
            if (err && errlen)
                std::snprintf(err, errlen, "'%s': more than %d groups", text, max);
            return LLRDMA_AR_ERR_INVALID;
        }
        sizes[(*n)++] = static_cast<int>(v);
        if (*end == '\0')
            break;
        p = end + 1;
    }
    *repeat = *n == 1 ? 1 : 0;
    return LLRDMA_AR_OK;
}

extern "C" int llrdma_ar_node_split_group(const int *sizes, int n, int repeat, int wrank, int wsize,
                                          char *err, size_t errlen)
{
    if (!sizes || n < 1 || wrank < 0 || wrank >= wsize)
        return -1;
    if (repeat)
        return sizes[0] > 0 ? wrank / sizes[0] : -1;
    long total = 0;
    int group = -1;
    for (int i = 0; i < n; ++i) {
        if (group < 0 && wrank < total + sizes[i])
            group = i;
        total += sizes[i];
    }
    if (total != wsize) {
        if (err && errlen)
            std::snprintf(err, errlen, "the groups cover %ld ranks, the job has %d", total, wsize);
        return -1;
    }
    return group;
}

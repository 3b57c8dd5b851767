// reach.cc -- fabric addressing of btl/llrdma (see llrdma_reach.h and docs/btl-design.md,
// "Discovery"): the GID a RoCE port binds to, and which peer port a local port talks to.
// Pure functions: discovery and add_procs call them, the unit tests check them without a
// device.
#include "llrdma_reach.h"

#include <algorithm>

namespace
{

constexpr int kMaxPorts = LLRDMA_REACH_MAX_PORTS;

bool type_allowed(int type, int roce_version)
{
    switch (roce_version) {
    case LLRDMA_ROCE_V1:
        return type == LLRDMA_GID_TYPE_ROCE_V1;
    case LLRDMA_ROCE_V2:
        return type == LLRDMA_GID_TYPE_ROCE_V2;
    default:
        return type == LLRDMA_GID_TYPE_ROCE_V1 || type == LLRDMA_GID_TYPE_ROCE_V2;
    }
}

int link_of(uint8_t ll)
{
    return ll == LLRDMA_LINK_UNSPECIFIED ? static_cast<int>(LLRDMA_LINK_IB) : static_cast<int>(ll);
}

uint32_t mask_of(int prefix)
{
    return prefix >= 32 ? 0xffffffffu : ~(0xffffffffu >> prefix);
}

} // namespace

extern "C" const char *llrdma_gid_type_name(int gid_type)
{
    switch (gid_type) {
    case LLRDMA_GID_TYPE_IB:
        return "ib";
    case LLRDMA_GID_TYPE_ROCE_V1:
        return "roce_v1";
    case LLRDMA_GID_TYPE_ROCE_V2:
        return "roce_v2";
    default:
        return "";
    }
}

extern "C" int llrdma_gid_choose(const llrdma_gid_entry_t *tbl, int n, int pinned, int roce_version)
{
    if (tbl == nullptr || n < 0)
        return LLRDMA_GID_NONE;
    if (pinned >= 0) {
        if (pinned >= n)
            return LLRDMA_GID_OUT_OF_RANGE;
        const llrdma_gid_entry_t &e = tbl[pinned];
        if (!e.readable)
            return LLRDMA_GID_UNREADABLE;
        if (!e.ipv4_mapped)
            return LLRDMA_GID_NOT_IPV4;
        return type_allowed(e.type, roce_version) ? pinned : LLRDMA_GID_WRONG_TYPE;
    }
    // auto: v2 routes across IP subnets and is what current NICs and switches are
    // configured for; v1 only when the port has no IPv4-mapped v2 GID.
    int best = LLRDMA_GID_NONE, best_rank = 0;
    for (int i = 0; i < n; ++i) {
        const llrdma_gid_entry_t &e = tbl[i];
        if (!e.readable || !e.ipv4_mapped || !type_allowed(e.type, roce_version))
            continue;
        int rank = e.type == LLRDMA_GID_TYPE_ROCE_V2 ? 2 : 1;
        if (rank > best_rank) {
            best = i;
            best_rank = rank;
        }
    }
    return best;
}

extern "C" int llrdma_reach_quality(const llrdma_reach_addr_t *a, const llrdma_reach_addr_t *b)
{
    if (a == nullptr || b == nullptr || a->ipv4 == 0 || b->ipv4 == 0 ||
        link_of(a->link_layer) != link_of(b->link_layer))
        return 0;
    if (a->prefix_len == 0 || b->prefix_len == 0 || a->prefix_len > 32 || b->prefix_len > 32)
        return 1;
    uint32_t m = mask_of(std::min(a->prefix_len, b->prefix_len));
    return (a->ipv4 & m) == (b->ipv4 & m) ? 2 : 1;
}

extern "C" int llrdma_reach_pick(const llrdma_reach_addr_t *local, int nlocal,
                                 const llrdma_reach_addr_t *peer, int npeer, int me,
                                 int local_first)
{
    if (local == nullptr || peer == nullptr || nlocal <= 0 || npeer <= 0 || nlocal > kMaxPorts ||
        npeer > kMaxPorts || me < 0 || me >= nlocal)
        return -1;
    // Both processes must pair the same ports, so the matching is computed in one
    // orientation: rows are the ports of the process with the smaller name.
    const llrdma_reach_addr_t *rows = local_first ? local : peer;
    const llrdma_reach_addr_t *cols = local_first ? peer : local;
    const int nrows = local_first ? nlocal : npeer;
    const int ncols = local_first ? npeer : nlocal;
    int row_mate[kMaxPorts], col_mate[kMaxPorts];
    std::fill(row_mate, row_mate + nrows, -1);
    std::fill(col_mate, col_mate + ncols, -1);
    // Same subnet first, then same link layer.  Link layers (and, with one prefix length
    // per subnet, subnets) split the ports into classes that are fully connected inside,
    // so this greedy pass pairs min(rows, cols) ports of every link layer: a maximum
    // matching, with as many same-subnet pairs as there can be.
    for (int want = 2; want >= 1; --want) {
        for (int r = 0; r < nrows; ++r) {
            for (int c = 0; c < ncols && row_mate[r] < 0; ++c) {
                if (col_mate[c] < 0 && llrdma_reach_quality(&rows[r], &cols[c]) == want) {
                    row_mate[r] = c;
                    col_mate[c] = r;
                }
            }
        }
    }
    return local_first ? row_mate[me] : col_mate[me];
}

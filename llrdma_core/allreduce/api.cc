// api.cc -- extern "C" entry points: names, scratch sizing and llrdma_ar_run.
//
// Nothing may throw across the C boundary: allocation failures inside the core
// are caught here and returned as LLRDMA_AR_ERR_NOMEM, after the Transport's
// destructor has cancelled and waited any request still outstanding.
#include "internal.h"

#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <new>

namespace
{

const char *const kAlgNames[LLRDMA_AR_NALGS] = {"auto",        "recursive_doubling", "rabenseifner",
                                                "ring",        "shm_direct",         "shm_split",
                                                "hierarchical"};

bool is_shm(int alg)
{
    return alg == LLRDMA_AR_SHM_DIRECT || alg == LLRDMA_AR_SHM_SPLIT;
}

const char *const kDtypeNames[LLRDMA_DT_COUNT] = {
    "int8",     "int16",  "int32",         "int64",         "uint8",     "uint16",    "uint32",
    "uint64",   "float",  "double",        "bool",          "byte",      "float_int", "double_int",
    "long_int", "2int",   "short_int",     "logical16",     "logical32", "logical64", "2float",
    "2double",  "2int64", "float_complex", "double_complex"};

const char *const kOpNames[LLRDMA_OP_COUNT] = {"sum",  "prod", "min", "max",  "land",   "lor",
                                               "lxor", "band", "bor", "bxor", "maxloc", "minloc"};

// Scratch the core allocated: released after the Transport (declared later,
// destroyed first) has completed every request that may point into it.
struct ScratchOnExit {
    const llrdma_ar_comm_t *c = nullptr;
    void *p = nullptr;
    ~ScratchOnExit()
    {
        if (p && c->free)
            c->free(c->ctx, p);
        else
            std::free(p);
    }
};

// A LLRDMA_AR_HIER run needs the layout, the node's arena when the node has
// several ranks, and an inter-node plan the layout can carry.  Hooks are
// allowed (device vectors, GPU-direct inter-node step): the arena must then
// be memory the hooks address and the transport must take device memory.
bool hier_args_ok(const llrdma_ar_plan_t *plan, const llrdma_ar_comm_t *comm)
{
    const llrdma_ar_hier_t *h = comm->hier;
    if (!h || h->nnodes < 1 || h->node < 0 || h->node >= h->nnodes || h->local_size < 1 ||
        h->local_rank < 0 || h->local_rank >= h->local_size || plan->slices < 1 ||
        plan->slices > h->local_size || plan->nodes != h->nnodes || plan->segment_bytes == 0 ||
        plan->nsegments_in_flight < 1 ||
        (plan->inter_alg != LLRDMA_AR_RECURSIVE_DOUBLING &&
         plan->inter_alg != LLRDMA_AR_RABENSEIFNER && plan->inter_alg != LLRDMA_AR_RING))
        return false;
    if (h->local_rank < plan->slices) {
        if (!h->peers || h->peers[h->node] != comm->rank)
            return false;
        for (int k = 0; k < h->nnodes; ++k)
            if (h->peers[k] < 0 || h->peers[k] >= comm->size)
                return false;
    }
    return h->local_size == 1 || (comm->shm && comm->shm->base &&
                                  llrdma_ar_shm_bytes(h->local_size, comm->shm->chunk_bytes) != 0);
}

} // namespace

using namespace llrdma::ar;

extern "C" const char *llrdma_ar_alg_name(int alg)
{
    return alg >= 0 && alg < LLRDMA_AR_NALGS ? kAlgNames[alg] : nullptr;
}

extern "C" int llrdma_ar_alg_from_name(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < LLRDMA_AR_NALGS; ++i) {
        if (std::strcmp(name, kAlgNames[i]) == 0)
            return i;
    }
    return -1;
}

extern "C" const char *llrdma_ar_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < LLRDMA_DT_COUNT ? kDtypeNames[dtype] : "?";
}

extern "C" const char *llrdma_ar_op_name(int op)
{
    return op >= 0 && op < LLRDMA_OP_COUNT ? kOpNames[op] : "?";
}

namespace
{
// Elements per piece of the message algorithms (llrdma_ar_plan_t.piece_bytes).
size_t piece_elems(const llrdma_ar_plan_t *plan, size_t es)
{
    if (plan->piece_bytes == 0)
        return static_cast<size_t>(-1);
    return std::max<size_t>(1, plan->piece_bytes / es);
}
} // namespace

extern "C" size_t llrdma_ar_scratch_bytes(const llrdma_ar_plan_t *plan, size_t count, int dtype,
                                          int comm_size)
{
    size_t es = dtype_size(dtype);
    if (!plan || es == 0 || comm_size <= 1 || count == 0)
        return 0;
    switch (plan->alg) {
    case LLRDMA_AR_RECURSIVE_DOUBLING:
        return scratch_recursive_doubling(std::min(count, piece_elems(plan, es)), es, comm_size);
    case LLRDMA_AR_RABENSEIFNER:
        return scratch_rabenseifner(std::min(count, piece_elems(plan, es)), es, comm_size);
    case LLRDMA_AR_RING:
        return scratch_ring(plan, count, es, comm_size);
    case LLRDMA_AR_SHM_SPLIT:
        return scratch_shm_split(plan, count, es, comm_size);
    case LLRDMA_AR_HIER:
        return scratch_hier(plan, count, es);
    default: // shm_direct: the arena is its scratch
        return 0;
    }
}

extern "C" int llrdma_ar_run(const llrdma_ar_plan_t *plan, const llrdma_ar_comm_t *comm,
                             const void *sendbuf, void *recvbuf, size_t count, int dtype, int op,
                             void *scratch, size_t scratch_bytes)
{
    if (!plan || !comm || !comm->isend || !comm->irecv || !comm->waitall || comm->size < 1 ||
        comm->rank < 0 || comm->rank >= comm->size || plan->alg <= LLRDMA_AR_AUTO ||
        plan->alg >= LLRDMA_AR_NALGS)
        return LLRDMA_AR_ERR_INVALID;
    // Hooks come in pairs: a core that memcpy'd what a hook reduces would be wrong.
    const bool hooked = comm->copy || comm->reduce;
    if (hooked != (comm->copy && comm->reduce) || !comm->alloc != !comm->free)
        return LLRDMA_AR_ERR_INVALID;
    const bool shm = is_shm(plan->alg);
    if (shm && comm->size > 1 &&
        (!comm->shm || !comm->shm->base ||
         llrdma_ar_shm_bytes(comm->size, comm->shm->chunk_bytes) == 0))
        return LLRDMA_AR_ERR_INVALID;
    const bool hier = plan->alg == LLRDMA_AR_HIER;
    if (hier && comm->size > 1 && !hier_args_ok(plan, comm))
        return LLRDMA_AR_ERR_INVALID;
    if (!llrdma_ar_supported(dtype, op))
        return LLRDMA_AR_ERR_UNSUPPORTED;
    if (count == 0)
        return LLRDMA_AR_OK;
    size_t es = dtype_size(dtype);
    if (!recvbuf || count > static_cast<size_t>(-1) / es)
        return LLRDMA_AR_ERR_INVALID;

    size_t need = llrdma_ar_scratch_bytes(plan, count, dtype, comm->size);
    ScratchOnExit owned;
    owned.c = comm;
    if (!scratch && need > 0) {
        if (comm->alloc)
            owned.p = comm->alloc(comm->ctx, need);
        else if (hooked)
            return LLRDMA_AR_ERR_INVALID; // host scratch for buffers the core may not touch
        else
            owned.p = std::malloc(need);
        if (!owned.p)
            return LLRDMA_AR_ERR_NOMEM;
        scratch = owned.p;
        scratch_bytes = need;
    } else if (scratch_bytes < need) {
        return LLRDMA_AR_ERR_INVALID;
    }

    try {
        Transport t(comm);
        int rc = LLRDMA_AR_OK;
        t.carry(plan->alg == LLRDMA_AR_RECURSIVE_DOUBLING || plan->alg == LLRDMA_AR_RABENSEIFNER ||
                plan->alg == LLRDMA_AR_RING);
        // The hierarchical schedule carries a failure before the call itself
        // (run_hier: the node's arena, then the inter-node step's messages).
        if (comm->failed && !(plan->alg == LLRDMA_AR_HIER && comm->size > 1)) {
            if (!t.carrying() || comm->size == 1)
                return LLRDMA_AR_ERR_MEMORY;
            t.failed_before(LLRDMA_AR_ERR_MEMORY);
        }
        const void *in = sendbuf == recvbuf ? nullptr : sendbuf;
        if (in && ((!shm && !hier) || comm->size == 1))
            rc = t.copy(recvbuf, in, count * es);
        if (rc == LLRDMA_AR_OK && comm->size > 1) {
            Args a{&t,      recvbuf,       count, dtype, op,        es,
                   scratch, scratch_bytes, plan,  in,    comm->shm, comm->hier};
            switch (plan->alg) {
            case LLRDMA_AR_RECURSIVE_DOUBLING:
            case LLRDMA_AR_RABENSEIFNER:
                // Piece by piece: each piece's messages all complete before
                // the next piece's start, so the shared tags cannot cross.
                for (size_t off = 0, n = piece_elems(plan, es); off < count && rc == LLRDMA_AR_OK;
                     off += n) {
                    Args p = a;
                    p.buf = static_cast<unsigned char *>(recvbuf) + off * es;
                    p.count = std::min(n, count - off);
                    rc = plan->alg == LLRDMA_AR_RECURSIVE_DOUBLING ? run_recursive_doubling(p)
                                                                   : run_rabenseifner(p);
                }
                break;
            case LLRDMA_AR_SHM_DIRECT:
                rc = run_shm_direct(a);
                break;
            case LLRDMA_AR_SHM_SPLIT:
                rc = run_shm_split(a);
                break;
            case LLRDMA_AR_HIER:
                rc = run_hier(a);
                break;
            default:
                rc = run_ring(a);
                break;
            }
        }
        int drc = t.drain();
        return rc != LLRDMA_AR_OK ? rc : drc;
    } catch (...) {
        return LLRDMA_AR_ERR_NOMEM; // the only exception the core can raise is bad_alloc
    }
}

// planner.cc -- choose algorithm and segmentation (pure; see docs/allreduce.md).
//
// Why these thresholds:
//  - Recursive doubling sends the whole vector log2(p) times in log2(p)
//    messages.  Up to 8 KiB every transport's small-message path carries that
//    cheaply; with a size hint H the low-latency path is known to cover up to H,
//    so full-vector messages stay cheap up to H.  Above 64 KiB the log2(p)
//    full copies cost more bandwidth than the halved message count saves,
//    whatever the hint (and the report shows hints that large misbehave).
//  - Rabenseifner moves ~2x the vector in 2*log2(p) messages: best from the
//    middle up for powers of two (measured on 2 ranks over shared memory, 1-8M:
//    as fast as a ring with 1M segments, 2.5x faster than one with 64K).  For
//    non-powers of two its fold adds two full-vector messages, so the ring
//    takes over above 256K there.
//  - The ring moves ~2x the vector in 2(p-1) segmented messages and pipelines
//    them: best for large vectors.  Its segment is the hint (so each message
//    takes the low-latency path; with a hint matched to bytes / p the whole
//    block is one such message), at least 4 KiB because smaller messages cannot
//    keep bandwidth, at most 1 MiB.  Without a usable hint it is 64 KiB, a
//    generic bandwidth-path size.  But a ring block is never cut into more than
//    8 segments: beyond that per-message cost dominates (a 64K-segment ring was
//    4-8x slower than a 1M-segment one at 1-8M over shared memory), so large
//    vectors get segments of block / 8 even above the hint.
//  - With a shared arena (every rank on one node) no message is needed:
//    shm_direct (one flag wait, each rank folds all p inputs) while the p
//    inputs together stay within 4 KiB, shm_split (two flag waits, each rank
//    folds one slice) above: on 2 ranks (2-core VM) direct won at 1-2 KiB,
//    split from 4 KiB (0.79 against 1.29 us; 180 against 100 us at 1 MiB).  The
//    arena's chunk bounds the round; the hint does not enter, it describes
//    the network path these algorithms do not use.
//  - In flight: enough segments to cover ~512 KiB (overlap wire and reduction),
//    at least 2 (double buffering), at most 8 so a burst does not overflow the
//    low-latency profile's shallow send queue (the report's failure case 1).
#include "internal.h"
#include "llrdma_core.h"

#include <algorithm>

namespace
{

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;
constexpr size_t kSmallMin = 8 * KiB;
constexpr size_t kSmallCap = 64 * KiB;
constexpr size_t kMediumOther = 256 * KiB;
constexpr size_t kMaxSegsPerBlock = 8;
constexpr size_t kInFlightBytes = 512 * KiB;
constexpr int kInFlightMin = 2;
constexpr int kInFlightMax = 8;
constexpr size_t kShmDirectTotal = 4 * KiB;

bool is_shm(int alg)
{
    return alg == LLRDMA_AR_SHM_DIRECT || alg == LLRDMA_AR_SHM_SPLIT;
}

bool is_pow2(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

} // namespace

extern "C" int llrdma_ar_plan(size_t bytes, size_t dtype_size, int comm_size, uint64_t hint,
                              int forced_alg, size_t forced_segment, llrdma_ar_plan_t *out)
{
    return llrdma_ar_plan_ex(bytes, dtype_size, comm_size, hint, 0, forced_alg, forced_segment,
                             out);
}

extern "C" int llrdma_ar_plan_ex(size_t bytes, size_t dtype_size, int comm_size, uint64_t hint,
                                 size_t eager_bytes, int forced_alg, size_t forced_segment,
                                 llrdma_ar_plan_t *out)
{
    return llrdma_ar_plan_shm(bytes, dtype_size, comm_size, hint, eager_bytes, 0, forced_alg,
                              forced_segment, out);
}

extern "C" int llrdma_ar_plan_shm(size_t bytes, size_t dtype_size, int comm_size, uint64_t hint,
                                  size_t eager_bytes, size_t shm_chunk, int forced_alg,
                                  size_t forced_segment, llrdma_ar_plan_t *out)
{
    if (!out || dtype_size == 0 || comm_size < 1 || bytes % dtype_size != 0 || forced_alg < 0 ||
        forced_alg >= LLRDMA_AR_NKNOB || (shm_chunk > 0 && shm_chunk < dtype_size))
        return LLRDMA_AR_ERR_INVALID;
    out->piece_bytes = LLRDMA_AR_PIECE_BYTES;

    const bool one_or_none = comm_size == 1 || bytes == 0;
    if (shm_chunk > 0 && !one_or_none && (forced_alg == LLRDMA_AR_AUTO || is_shm(forced_alg))) {
        size_t seg = forced_segment > 0 && forced_segment < shm_chunk ? forced_segment : shm_chunk;
        out->segment_bytes = std::max(dtype_size, seg / dtype_size * dtype_size);
        out->nsegments_in_flight = 1;
        if (forced_alg != LLRDMA_AR_AUTO) {
            out->alg = forced_alg;
            out->why = "forced by the algorithm knob";
        } else if (bytes <= kShmDirectTotal / static_cast<size_t>(comm_size)) {
            out->alg = LLRDMA_AR_SHM_DIRECT;
            out->why = "shared arena, small: bytes * ranks <= 4K";
        } else {
            out->alg = LLRDMA_AR_SHM_SPLIT;
            out->why = "shared arena: each rank reduces one slice";
        }
        return LLRDMA_AR_OK;
    }
    if (is_shm(forced_alg))
        forced_alg = LLRDMA_AR_AUTO; // documented: no arena, plan as auto

    // The default segment is the profile's (one rule, shown in every rank's dump).
    size_t seg = forced_segment;
    if (seg == 0) {
        seg = static_cast<size_t>(llrdma_coll_segment_for_hint(hint));
        size_t block = bytes / static_cast<size_t>(comm_size);
        seg = std::max(seg, (block + kMaxSegsPerBlock - 1) / kMaxSegsPerBlock);
    }
    seg = std::max(dtype_size, seg / dtype_size * dtype_size);
    size_t want = kInFlightBytes / seg;
    out->segment_bytes = seg;
    out->nsegments_in_flight =
        static_cast<int>(std::clamp<size_t>(want, kInFlightMin, kInFlightMax));

    if (forced_alg != LLRDMA_AR_AUTO) {
        out->alg = forced_alg;
        out->why = "forced by the algorithm knob";
        return LLRDMA_AR_OK;
    }

    size_t small_max = std::max<size_t>(kSmallMin, std::min<uint64_t>(hint, kSmallCap));
    // Recursive doubling sends the whole vector per step, Rabenseifner halves of
    // it.  Just past the transport's eager limit, the halves are still eager
    // while the whole vector needs a rendezvous per step: there Rabenseifner
    // wins (Open MPI shared memory, 2 ranks: 4K took 4.4 us by recursive
    // doubling, 1.3 us by Rabenseifner; at 8K, both rendezvous, 5.7 vs 6.2 us).
    bool halves_eager_only = eager_bytes > 0 && bytes > eager_bytes && bytes / 2 <= eager_bytes;
    size_t count = bytes / dtype_size;
    if (one_or_none) {
        out->alg = LLRDMA_AR_RECURSIVE_DOUBLING;
        out->why = "nothing to exchange (one rank or zero bytes)";
    } else if (bytes <= small_max && !halves_eager_only) {
        out->alg = LLRDMA_AR_RECURSIVE_DOUBLING;
        out->why = "small: bytes <= max(8K, min(hint, 64K))";
    } else if (bytes <= small_max) {
        out->alg = LLRDMA_AR_RABENSEIFNER;
        out->why = "small, but only halves of it fit the transport's eager limit";
    } else if (count < static_cast<size_t>(comm_size)) {
        out->alg = LLRDMA_AR_RECURSIVE_DOUBLING;
        out->why = "fewer elements than ranks";
    } else if (is_pow2(comm_size) || bytes <= kMediumOther) {
        out->alg = LLRDMA_AR_RABENSEIFNER;
        out->why = is_pow2(comm_size) ? "medium and large, power-of-two ranks"
                                      : "medium: bytes <= 256K, other rank counts";
    } else {
        out->alg = LLRDMA_AR_RING;
        out->why = "large: segmented pipelined ring";
    }
    return LLRDMA_AR_OK;
}

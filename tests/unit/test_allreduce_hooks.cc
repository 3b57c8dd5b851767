// The Allreduce core's memory hooks (llrdma_ar_comm_t copy/reduce/alloc/free),
// the contract the GPU path relies on: with hooks set, no algorithm may read or
// write a buffer except through the hooks and the transport.
//
// "Device memory" here is a PROT_NONE address range: the handles passed to
// llrdma_ar_run point into it, so any direct access by the core faults, and the
// hooks and the transport wrapper translate handles to a host backing store,
// checking that every range lies inside one live allocation.  Every algorithm
// run through the hooks must give the same bits as the host path on the same
// simulated communicator (same schedule, same reduction order), balance alloc
// and free, and copy only when not in place.  Hook failures end the call with
// LLRDMA_AR_ERR_MEMORY and leave no request behind.
#define BOOST_TEST_MODULE test_allreduce_hooks
#include <boost/test/unit_test.hpp>

#include "llrdma_allreduce.h"
#include "test_allreduce_devheap.h"
#include "test_allreduce_simcomm.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace
{

using Bytes = std::vector<unsigned char>;
using namespace devsim;

// Valid inputs for every datatype: bool 0/1, finite floats and complex numbers
// with many ties and signed zeros, pairs with tied values.
Bytes input(int dt, size_t count, uint64_t seed)
{
    size_t es = llrdma_ar_dtype_size(dt);
    Bytes b(count * es, 0);
    std::mt19937_64 g(seed);
    for (size_t i = 0; i < count; ++i) {
        unsigned char *d = &b[i * es];
        uint64_t h = g();
        float f = static_cast<float>(static_cast<int>(h % 41) - 20) / 8.0f;
        double x = static_cast<double>(static_cast<int>(h % 2001) - 1000) / 16.0;
        int k = static_cast<int>((h >> 20) % 50), v = static_cast<int>(h % 4) - 2;
        long lv = v;
        short sv = static_cast<short>(v);
        switch (dt) {
        case LLRDMA_DT_BOOL:
            d[0] = h & 1;
            break;
        case LLRDMA_DT_FLOAT:
            std::memcpy(d, &f, 4);
            break;
        case LLRDMA_DT_DOUBLE:
            std::memcpy(d, &x, 8);
            break;
        case LLRDMA_DT_FLOAT_INT:
            f = static_cast<float>(v);
            std::memcpy(d, &f, 4);
            std::memcpy(d + 4, &k, 4);
            break;
        case LLRDMA_DT_DOUBLE_INT:
            x = v;
            std::memcpy(d, &x, 8);
            std::memcpy(d + 8, &k, 4);
            break;
        case LLRDMA_DT_LONG_INT:
            std::memcpy(d, &lv, sizeof lv);
            std::memcpy(d + sizeof lv, &k, 4);
            break;
        case LLRDMA_DT_2INT:
            std::memcpy(d, &v, 4);
            std::memcpy(d + 4, &k, 4);
            break;
        case LLRDMA_DT_SHORT_INT:
            std::memcpy(d, &sv, 2);
            std::memcpy(d + 4, &k, 4);
            break;
        case LLRDMA_DT_2FLOAT: {
            float pv[2] = {static_cast<float>(v), static_cast<float>(k)};
            std::memcpy(d, pv, 8);
            break;
        }
        case LLRDMA_DT_2DOUBLE: {
            double pv[2] = {static_cast<double>(v), static_cast<double>(k)};
            std::memcpy(d, pv, 16);
            break;
        }
        case LLRDMA_DT_2INT64: {
            int64_t pv[2] = {v, k};
            std::memcpy(d, pv, 16);
            break;
        }
        case LLRDMA_DT_FLOAT_COMPLEX: {
            float z[2] = {f, static_cast<float>(static_cast<int>((h >> 32) % 41) - 20) / 8.0f};
            std::memcpy(d, z, 8);
            break;
        }
        case LLRDMA_DT_DOUBLE_COMPLEX: {
            double z[2] = {x,
                           static_cast<double>(static_cast<int>((h >> 32) % 2001) - 1000) / 16.0};
            std::memcpy(d, z, 16);
            break;
        }
        default:
            for (size_t j = 0; j < es; ++j)
                d[j] = static_cast<unsigned char>(h >> (8 * j));
        }
    }
    return b;
}

// Padding of the pair types is not part of the result.
void clear_padding(int dt, Bytes &b)
{
    size_t es = llrdma_ar_dtype_size(dt), vb = 0, koff = 0;
    switch (dt) {
    case LLRDMA_DT_DOUBLE_INT:
        vb = 8, koff = 8;
        break;
    case LLRDMA_DT_LONG_INT:
        vb = sizeof(long), koff = sizeof(long);
        break;
    case LLRDMA_DT_SHORT_INT:
        vb = 2, koff = 4;
        break;
    default:
        return;
    }
    for (size_t i = 0; i + es <= b.size(); i += es) {
        std::memset(&b[i + vb], 0, koff - vb);
        std::memset(&b[i + koff + 4], 0, es - koff - 4);
    }
}

struct Case {
    int alg, dt, op;
    size_t count;
    int inplace; // 0: separate sendbuf, 1: sendbuf NULL, 2: sendbuf == recvbuf
    size_t seg;
    int window;
    int scratch; // 0: alloc hook, 1: caller's device scratch
    uint64_t seed;
};

std::string describe(const Case &k, int p)
{
    std::ostringstream s;
    s << llrdma_ar_alg_name(k.alg) << " p=" << p << " count=" << k.count << " "
      << llrdma_ar_dtype_name(k.dt) << " " << llrdma_ar_op_name(k.op) << " inplace=" << k.inplace
      << " seg=" << k.seg << " window=" << k.window << " scratch=" << k.scratch;
    return s.str();
}

// Host path: the reference every hooked run must equal bit for bit.
// Rank r's call on host buffers (no hooks), in place: its input, then its
// result (padding cleared) in out; the call's status.
int host_call(sim::World &w, int r, const Case &k, Bytes &out)
{
    llrdma_ar_comm_t c = w.comm(r);
    llrdma_ar_plan_t plan{k.alg, k.seg, k.window, "test", 0, nullptr, 0, 0, 0};
    out = input(k.dt, k.count, k.seed + r);
    int rc = llrdma_ar_run(&plan, &c, nullptr, out.data(), k.count, k.dt, k.op, nullptr, 0);
    clear_padding(k.dt, out);
    return rc;
}

std::vector<Bytes> run_host(int p, const Case &k, sim::Options opt)
{
    sim::World w(p, opt);
    std::vector<Bytes> out(p);
    std::vector<std::thread> th;
    for (int r = 0; r < p; ++r)
        th.emplace_back([&, r] {
            if (host_call(w, r, k, out[r]) != LLRDMA_AR_OK)
                out[r].clear();
        });
    for (auto &t : th)
        t.join();
    return out;
}

struct RankResult {
    int rc = 0;
    Bytes out;
    Hooked h;
    int live = 0;
    uint64_t line_rounds = 0;  // rounds run in the arena's lines
    uint64_t share_rounds = 0; // rounds run with the fold shared
};

// What every check of a hooked rank starts with: the call's status, its
// bits against the host path's (ref), and what the hooks saw go wrong.
std::string call_problems(const RankResult &rr, const Bytes &ref)
{
    std::ostringstream e;
    if (rr.rc != LLRDMA_AR_OK)
        e << "rc " << rr.rc << "; ";
    if (rr.out != ref)
        e << "result differs from the host path; ";
    for (const std::string &s : rr.h.problems)
        e << s << "; ";
    return e.str();
}

std::vector<RankResult> run_hooked(int p, const Case &k, sim::Options opt, DeviceHeap &heap,
                                   int fail_rank = -1, int fail_kind = kNone, long fail_at = 0,
                                   int device_fold = 0, size_t device_fold_min = 0,
                                   bool odd_on_host = false)
{
    sim::World w(p, opt);
    std::vector<RankResult> res(p);
    std::vector<std::thread> th;
    for (int r = 0; r < p; ++r)
        th.emplace_back([&, r] {
            RankResult &rr = res[r];
            if (odd_on_host && r % 2 == 1) { // host buffers, no hooks, in the same call
                rr.rc = host_call(w, r, k, rr.out);
                rr.live = w.live(r);
                rr.share_rounds = w.shm(r).share_rounds;
                return;
            }
            rr.h.inner = w.comm(r);
            rr.h.heap = &heap;
            rr.h.host_lo = w.arena_begin();
            rr.h.host_hi = w.arena_end();
            if (r == fail_rank) {
                rr.h.fail_kind = fail_kind;
                rr.h.fail_at = fail_at;
            }
            llrdma_ar_comm_t c = rr.h.comm(k.scratch == 0);
            c.shm->device_fold = device_fold;
            c.shm->device_fold_min = device_fold_min;
            llrdma_ar_plan_t plan{k.alg, k.seg, k.window, "test", 0, nullptr, 0, 0, 0};
            size_t bytes = k.count * llrdma_ar_dtype_size(k.dt);
            Bytes in = input(k.dt, k.count, k.seed + r);
            void *recv = heap.alloc(bytes + 1, r % 4);
            void *send = k.inplace ? recv : heap.alloc(bytes + 1, (r + 1) % 4);
            std::memcpy(heap.real(k.inplace ? recv : send, bytes), in.data(), bytes);
            size_t sbytes = llrdma_ar_scratch_bytes(&plan, k.count, k.dt, p);
            void *scratch = k.scratch ? heap.alloc(sbytes + 1, 1) : nullptr;
            rr.rc = llrdma_ar_run(&plan, &c, k.inplace == 1 ? nullptr : send, recv, k.count, k.dt,
                                  k.op, scratch, k.scratch ? sbytes : 0);
            rr.live = w.live(r);
            rr.line_rounds = w.line_rounds(r);
            rr.share_rounds = c.shm->share_rounds;
            unsigned char *got = heap.real(recv, bytes);
            rr.out.assign(got, got + bytes);
            clear_padding(k.dt, rr.out);
            if (k.inplace == 0 && std::memcmp(heap.real(send, bytes), in.data(), bytes) != 0)
                rr.h.problems.push_back("sendbuf modified");
            heap.free(recv);
            if (!k.inplace)
                heap.free(send);
            if (scratch)
                heap.free(scratch);
        });
    for (auto &t : th)
        t.join();
    for (const std::string &s : w.problems())
        res[0].h.problems.push_back("sim: " + s);
    return res;
}

const int kAlgs[] = {LLRDMA_AR_RECURSIVE_DOUBLING, LLRDMA_AR_RABENSEIFNER, LLRDMA_AR_RING};

std::vector<std::pair<int, int>> all_combos()
{
    std::vector<std::pair<int, int>> v;
    for (int dt = 0; dt < LLRDMA_DT_COUNT; ++dt)
        for (int op = 0; op < LLRDMA_OP_COUNT; ++op)
            if (llrdma_ar_supported(dt, op))
                v.push_back({dt, op});
    return v;
}

// Runs one case both ways and checks the hook contract; returns failures.
std::vector<std::string> check_case(int p, const Case &k, sim::Options opt, DeviceHeap &heap)
{
    std::vector<std::string> errs;
    std::vector<Bytes> ref = run_host(p, k, opt);
    std::vector<RankResult> res = run_hooked(p, k, opt, heap);
    llrdma_ar_plan_t plan{k.alg, k.seg, k.window, "test", 0, nullptr, 0, 0, 0};
    bool needs_scratch = llrdma_ar_scratch_bytes(&plan, k.count, k.dt, p) > 0;
    long reduces = 0;
    for (int r = 0; r < p; ++r) {
        const RankResult &rr = res[r];
        std::ostringstream e;
        e << call_problems(rr, ref[r]);
        if (rr.live != 0)
            e << rr.live << " requests left; ";
        if (rr.h.nalloc != rr.h.nfree)
            e << rr.h.nalloc << " allocs, " << rr.h.nfree << " frees; ";
        if (rr.h.nalloc != (k.scratch == 0 && needs_scratch && k.count > 0 ? 1 : 0))
            e << "alloc called " << rr.h.nalloc << " times; ";
        if (rr.h.ncopy != (k.inplace == 0 && k.count > 0 ? 1 : 0))
            e << "copy called " << rr.h.ncopy << " times; ";
        reduces += rr.h.nreduce;
        if (!e.str().empty())
            errs.push_back(describe(k, p) + ": rank " + std::to_string(r) + ": " + e.str());
    }
    if (p > 1 && k.count > 0 && reduces == 0)
        errs.push_back(describe(k, p) + ": no reduce went through the hook");
    return errs;
}

void report(const std::vector<std::string> &errs)
{
    for (size_t i = 0; i < errs.size() && i < 10; ++i)
        BOOST_ERROR(errs[i]);
    BOOST_CHECK_MESSAGE(errs.empty(), errs.size() << " failures");
}

} // namespace

BOOST_AUTO_TEST_CASE(every_algorithm_through_hooks)
{
    // Sizes 1..9 and 16, awkward counts, rotating through every op x datatype,
    // in-place modes, segments, windows and both scratch sources.
    static const auto combos = all_combos();
    DeviceHeap heap;
    std::vector<std::string> errs;
    size_t rot = 0, runs = 0;
    for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16}) {
        sim::Options opt;
        opt.eager_limit = p % 2 ? 0 : 4096;
        opt.single_tag = p % 2 == 1;
        std::vector<size_t> counts = {0,    1,   3, size_t(p - 1 > 0 ? p - 1 : 2), size_t(p + 1),
                                      1000, 4097};
        for (int alg : kAlgs)
            for (size_t n : counts) {
                size_t i = rot++;
                auto [dt, op] = combos[i % combos.size()];
                size_t es = llrdma_ar_dtype_size(dt);
                size_t segs[] = {es, 3 * es, 4096 / es * es, 65536 / es * es};
                Case k{alg,        dt, op, n, static_cast<int>(i % 3), segs[i % 4], 1 + int(i % 8),
                       int(i % 2), i};
                auto e = check_case(p, k, opt, heap);
                errs.insert(errs.end(), e.begin(), e.end());
                ++runs;
            }
    }
    BOOST_TEST_MESSAGE(runs << " cases");
    BOOST_CHECK_EQUAL(heap.nlive(), 0u);
    report(errs);
}

BOOST_AUTO_TEST_CASE(every_op_and_dtype_through_hooks)
{
    DeviceHeap heap;
    std::vector<std::string> errs;
    size_t i = 0;
    for (int alg : kAlgs)
        for (auto [dt, op] : all_combos()) {
            int p = 3 + int(i % 3);
            Case k{alg,        dt,
                   op,         size_t(2 * p + 3),
                   int(i % 3), 2 * llrdma_ar_dtype_size(dt),
                   2,          int(i % 2),
                   500 + i};
            auto e = check_case(p, k, sim::Options{}, heap);
            errs.insert(errs.end(), e.begin(), e.end());
            ++i;
        }
    report(errs);
}

BOOST_AUTO_TEST_CASE(large_ring_through_hooks)
{
    // ~1 MB, many segments in flight: the schedule the GPU path pipelines.
    DeviceHeap heap;
    for (int p : {2, 5}) {
        Case k{LLRDMA_AR_RING, LLRDMA_DT_FLOAT, LLRDMA_OP_SUM, (1 << 18) + 5, 0, 8192, 8, 0, 7};
        report(check_case(p, k, sim::Options{}, heap));
    }
}

BOOST_AUTO_TEST_CASE(hook_arguments)
{
    sim::World w(2, sim::Options{});
    DeviceHeap heap;
    Hooked h;
    h.inner = w.comm(0);
    h.heap = &heap;
    llrdma_ar_plan_t plan{LLRDMA_AR_RING, 64, 2, "test", 0, nullptr, 0, 0, 0};
    void *buf = heap.alloc(32);
    // copy without reduce, alloc without free: rejected before anything runs
    llrdma_ar_comm_t c = h.comm(true);
    c.reduce = nullptr;
    BOOST_CHECK_EQUAL(
        llrdma_ar_run(&plan, &c, nullptr, buf, 4, LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM, nullptr, 0),
        LLRDMA_AR_ERR_INVALID);
    c = h.comm(true);
    c.free = nullptr;
    BOOST_CHECK_EQUAL(
        llrdma_ar_run(&plan, &c, nullptr, buf, 4, LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM, nullptr, 0),
        LLRDMA_AR_ERR_INVALID);
    // hooks without an alloc hook need the caller's scratch
    c = h.comm(false);
    BOOST_CHECK_EQUAL(
        llrdma_ar_run(&plan, &c, nullptr, buf, 4, LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM, nullptr, 0),
        LLRDMA_AR_ERR_INVALID);
    // count 0 touches nothing
    c = h.comm(true);
    BOOST_CHECK_EQUAL(
        llrdma_ar_run(&plan, &c, nullptr, nullptr, 0, LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM, nullptr, 0),
        LLRDMA_AR_OK);
    BOOST_CHECK_EQUAL(h.ncopy + h.nreduce + h.nalloc + h.nsend + h.nrecv, 0);
    BOOST_CHECK(w.quiescent());
    heap.free(buf);
}

BOOST_AUTO_TEST_CASE(hook_failures)
{
    // A failing hook ends that rank's call with LLRDMA_AR_ERR_MEMORY, its
    // requests cancelled and waited and its scratch freed.  Its peers wait for
    // messages that never come, as after any rank's failure in MPI: the sim's
    // short timeout breaks the world, so they return an error (or finish, when
    // the failure came late).
    DeviceHeap heap;
    int fired = 0, runs = 0;
    for (int alg : kAlgs)
        for (int p : {3, 4})
            for (int kind : {kCopy, kReduce, kAlloc})
                for (long at : {1L, 2L, 5L}) {
                    Case k{alg, LLRDMA_DT_INT32, LLRDMA_OP_SUM, 1000, 0, 256, 3, 0, 11};
                    sim::Options opt;
                    opt.timeout = std::chrono::milliseconds(300);
                    auto res = run_hooked(p, k, opt, heap, p - 1, kind, at);
                    std::string ctx = describe(k, p) + " hook " + std::to_string(kind) + " at " +
                                      std::to_string(at);
                    const RankResult &f = res[p - 1];
                    bool hit = (kind == kCopy     ? f.h.ncopy
                                : kind == kReduce ? f.h.nreduce
                                                  : f.h.nalloc) >= at;
                    ++runs;
                    if (hit) {
                        ++fired;
                        BOOST_CHECK_MESSAGE(
                            f.rc == (kind == kAlloc ? LLRDMA_AR_ERR_NOMEM : LLRDMA_AR_ERR_MEMORY),
                            ctx << ": rc " << f.rc);
                    } else {
                        BOOST_CHECK_MESSAGE(f.rc == LLRDMA_AR_OK, ctx << ": rc " << f.rc);
                    }
                    for (int r = 0; r < p; ++r) {
                        const RankResult &rr = res[r];
                        BOOST_CHECK_MESSAGE(rr.live == 0, ctx << ": rank " << r << " left "
                                                              << rr.live << " requests");
                        BOOST_CHECK_MESSAGE(rr.h.nalloc - (r == p - 1 && hit && kind == kAlloc) ==
                                                rr.h.nfree,
                                            ctx << ": rank " << r << " alloc/free unbalanced");
                        BOOST_CHECK_MESSAGE(rr.rc == LLRDMA_AR_OK ||
                                                rr.rc == LLRDMA_AR_ERR_TRANSPORT || r == p - 1,
                                            ctx << ": rank " << r << " rc " << rr.rc);
                    }
                }
    BOOST_TEST_MESSAGE(fired << " of " << runs << " runs failed a hook");
    BOOST_CHECK(fired > runs / 3);
    BOOST_CHECK_EQUAL(heap.nlive(), 0u);
}

BOOST_AUTO_TEST_CASE(shm_through_hooks)
{
    // The shared-arena algorithms with device buffers: data moves only through
    // the copy hook (device <-> arena), synced before every announcement.
    // device_fold 0: the CPU folds the arena, the reduce hook is never called;
    // 1: the reduce hook folds straight from the arena (as a GPU reads pinned
    // host memory); 2: the same for shm_split slices of 256 bytes and more,
    // the CPU below.  Every way the bits equal the host path's.
    static const auto combos = all_combos();
    DeviceHeap heap;
    std::vector<std::string> errs;
    size_t i = 0;
    for (int fold : {0, 1, 2})
        for (int alg : {LLRDMA_AR_SHM_DIRECT, LLRDMA_AR_SHM_SPLIT})
            for (int p : {1, 2, 3, 5, 8})
                for (size_t n : {size_t(0), size_t(1), size_t(p + 1), size_t(1000), size_t(4097)}) {
                    auto [dt, op] = combos[(i * 7) % combos.size()];
                    size_t es = llrdma_ar_dtype_size(dt);
                    Case k{alg, dt,         op,     n, int(i % 3), (i % 2 ? 3 : 512) * es,
                           1,   int(i % 2), 900 + i};
                    ++i;
                    sim::Options opt;
                    opt.shm_chunk = 1024;
                    opt.shm_lines_max = 0; // the slots (the lines: the next test)
                    std::vector<Bytes> ref = run_host(p, k, opt);
                    std::vector<RankResult> res =
                        run_hooked(p, k, opt, heap, -1, kNone, 0, fold > 0, fold == 2 ? 256 : 0);
                    size_t per = std::min<size_t>(k.seg, opt.shm_chunk) / es;
                    long rounds = p > 1 ? long((n + per - 1) / per) : 0;
                    long reduces = 0;
                    for (int r = 0; r < p; ++r) {
                        const RankResult &rr = res[r];
                        std::ostringstream e;
                        reduces += rr.h.nreduce;
                        e << call_problems(rr, ref[r]);
                        if (rr.h.nsend != 0 || rr.h.nrecv != 0)
                            e << "isend/irecv hooks used; ";
                        if (!fold && rr.h.nreduce != 0)
                            e << "reduce hook used without device_fold; ";
                        if (fold && alg == LLRDMA_AR_SHM_DIRECT && rr.h.nreduce != rounds * (p - 1))
                            e << "reduce called " << rr.h.nreduce << " times for " << rounds
                              << " rounds; ";
                        long copies = (fold && alg == LLRDMA_AR_SHM_DIRECT ? 1 : 2) * rounds;
                        if (p > 1 && (fold && alg == LLRDMA_AR_SHM_SPLIT ? rr.h.ncopy < copies
                                                                         : rr.h.ncopy != copies))
                            e << "copy called " << rr.h.ncopy << " times for " << rounds
                              << " rounds; ";
                        if (rr.h.nsync < rounds)
                            e << "sync called " << rr.h.nsync << " times for " << rounds
                              << " rounds; ";
                        if (rr.h.nalloc != rr.h.nfree)
                            e << rr.h.nalloc << " allocs, " << rr.h.nfree << " frees; ";
                        if (!e.str().empty())
                            errs.push_back(describe(k, p) + " fold=" + std::to_string(fold) +
                                           ": rank " + std::to_string(r) + ": " + e.str());
                    }
                    if (fold == 1 && p > 1 && n > 0 && reduces == 0)
                        errs.push_back(describe(k, p) + ": device fold never used the hook");
                }
    BOOST_CHECK_EQUAL(heap.nlive(), 0u);
    report(errs);
}

// shm_direct's lines with device buffers: the input and the result pass
// through the rank's private arena chunks (one copy each way, each synced),
// the CPU folds, and the bits equal the host path's; a rank takes the lines
// for exactly the calls a host rank does (up to lines_max and the chunk; from
// three ranks up to five lines, 280 B).
BOOST_AUTO_TEST_CASE(shm_direct_lines_through_hooks)
{
    static const auto combos = all_combos();
    DeviceHeap heap;
    std::vector<std::string> errs;
    size_t i = 0;
    for (int fold : {0, 1})
        for (int p : {2, 3, 5})
            for (size_t bytes : {size_t(8), size_t(64), size_t(120), size_t(280), size_t(1024)}) {
                const bool lines = p == 2 || bytes <= 5 * 56;
                auto [dt, op] = combos[(i * 5) % combos.size()];
                size_t es = llrdma_ar_dtype_size(dt);
                size_t n = bytes / es > 0 ? bytes / es : 1;
                Case k{LLRDMA_AR_SHM_DIRECT, dt,    op, n, int(i % 3), 512 * es, 1,
                       int(i % 2),           70 + i};
                ++i;
                sim::Options opt;
                opt.shm_chunk = 1024;
                std::vector<Bytes> ref = run_host(p, k, opt);
                std::vector<RankResult> res = run_hooked(p, k, opt, heap, -1, kNone, 0, fold, 0);
                for (int r = 0; r < p; ++r) {
                    const RankResult &rr = res[r];
                    std::ostringstream e;
                    e << call_problems(rr, ref[r]);
                    if (rr.line_rounds != (lines ? 1u : 0u))
                        e << rr.line_rounds << " rounds in lines, want " << lines << "; ";
                    if (lines && (rr.h.ncopy != 2 || rr.h.nsync < 2))
                        e << rr.h.ncopy << " copies, " << rr.h.nsync << " syncs, want 2, 2; ";
                    if (lines && rr.h.nreduce != 0)
                        e << "reduce hook used; ";
                    if (!e.str().empty())
                        errs.push_back(describe(k, p) + " fold=" + std::to_string(fold) +
                                       ": rank " + std::to_string(r) + ": " + e.str());
                }
            }
    BOOST_CHECK_EQUAL(heap.nlive(), 0u);
    report(errs);
}

// The shared fold (llrdma_ar_shm_t.share_min) with device buffers: a rank
// with copy hooks takes the same rounds as a host rank (one stream copy in
// and one out per round, the CPU folding its tiles from the arena), so one
// call may mix them; the bits equal the host path's, on every rank, with
// every rank hooked and with the odd ranks on host buffers.
BOOST_AUTO_TEST_CASE(shm_split_shared_fold_through_hooks)
{
    static const auto combos = all_combos();
    DeviceHeap heap;
    std::vector<std::string> errs;
    size_t i = 0;
    for (bool mixed : {false, true})
        for (int p : {2, 3, 4})
            for (size_t count : {size_t(5), size_t(3000), size_t(20000)}) {
                auto [dt, op] = combos[(i * 7) % combos.size()];
                Case k{LLRDMA_AR_SHM_SPLIT, dt, op, count, int(i % 3), 0, 1, int(i % 2), 90 + i};
                ++i;
                sim::Options opt;
                opt.shm_chunk = 32768;
                opt.shm_share_min = 1;
                std::vector<Bytes> ref = run_host(p, k, opt);
                std::vector<RankResult> res =
                    run_hooked(p, k, opt, heap, -1, kNone, 0, 1, 0, mixed);
                for (int r = 0; r < p; ++r) {
                    const RankResult &rr = res[r];
                    std::ostringstream e;
                    e << call_problems(rr, ref[r]);
                    if (rr.live != 0)
                        e << rr.live << " requests left; ";
                    if (rr.share_rounds == 0)
                        e << "no round shared; ";
                    if (!e.str().empty())
                        errs.push_back(describe(k, p) + (mixed ? " mixed" : " hooked") + ": rank " +
                                       std::to_string(r) + ": " + e.str());
                }
            }
    BOOST_CHECK_EQUAL(heap.nlive(), 0u);
    report(errs);
}

BOOST_AUTO_TEST_CASE(hook_failures_are_carried_in_messages)
{
    // With waitall_sizes a failing hook on one rank (the failed rank, first
    // or last) does not leave its peers waiting: it runs the rest of the
    // schedule with empty messages, every rank whose result needs its data
    // fails with LLRDMA_AR_ERR_PEER_FAILED, no wait reaches the sim's
    // timeout, no message is left anywhere, and the next call on the same
    // world is right on every rank (nothing of the failed call reaches it).
    DeviceHeap heap;
    int fired = 0, runs = 0, peers_failed = 0;
    for (int alg : kAlgs)
        for (int p : {2, 3, 5})
            for (int frank : {0, p - 1})
                for (int kind : {kCopy, kReduce})
                    for (long at : {1L, 2L, 5L}) {
                        Case k{alg, LLRDMA_DT_INT32, LLRDMA_OP_SUM, 1000, 1, 256, 3, 0, 11};
                        sim::Options opt;
                        opt.sizes = true;
                        opt.timeout = std::chrono::milliseconds(10000);
                        sim::World w(p, opt);
                        std::vector<int> rc1(p, 99), rc2(p, 99), live(p, -1);
                        long first = 0; // the failed rank's hook calls in the first call
                        std::vector<Bytes> out(p);
                        std::vector<Hooked> hk(p);
                        const size_t bytes = k.count * 4;
                        std::vector<std::thread> th;
                        for (int r = 0; r < p; ++r)
                            th.emplace_back([&, r] {
                                Hooked &h = hk[r];
                                h.inner = w.comm(r);
                                h.heap = &heap;
                                h.host_lo = w.arena_begin();
                                h.host_hi = w.arena_end();
                                if (r == frank) {
                                    h.fail_kind = kind;
                                    h.fail_at = at;
                                }
                                llrdma_ar_comm_t c = h.comm(true);
                                llrdma_ar_plan_t plan{k.alg,   k.seg, k.window, "test", 0,
                                                      nullptr, 0,     0,        0};
                                void *recv = heap.alloc(bytes + 1, r % 4);
                                for (int call = 0; call < 2; ++call) {
                                    Bytes in = input(k.dt, k.count, k.seed + 100 * call + r);
                                    std::memcpy(heap.real(recv, bytes), in.data(), bytes);
                                    int rc = llrdma_ar_run(&plan, &c, nullptr, recv, k.count, k.dt,
                                                           k.op, nullptr, 0);
                                    (call == 0 ? rc1 : rc2)[r] = rc;
                                    if (r == frank && call == 0)
                                        first = kind == kCopy ? h.ncopy : h.nreduce;
                                    h.fail_kind = kNone;
                                }
                                unsigned char *got = heap.real(recv, bytes);
                                out[r].assign(got, got + bytes);
                                live[r] = w.live(r);
                                heap.free(recv);
                            });
                        for (auto &t : th)
                            t.join();
                        std::string ctx = describe(k, p) + " rank " + std::to_string(frank) +
                                          " hook " + std::to_string(kind) + " at " +
                                          std::to_string(at);
                        ++runs;
                        for (const std::string &e : w.problems())
                            BOOST_ERROR(ctx << ": sim: " << e);
                        BOOST_CHECK_MESSAGE(w.quiescent(), ctx << ": a message was left over");
                        bool hit = first >= at; // the at-th hook call was in the first call
                        if (hit)
                            ++fired;
                        BOOST_CHECK_MESSAGE(rc1[frank] == (hit ? LLRDMA_AR_ERR_MEMORY : 0),
                                            ctx << ": failed rank rc " << rc1[frank]);
                        for (int r = 0; r < p; ++r) {
                            if (r != frank) {
                                BOOST_CHECK_MESSAGE(rc1[r] == LLRDMA_AR_OK ||
                                                        rc1[r] == LLRDMA_AR_ERR_PEER_FAILED,
                                                    ctx << ": rank " << r << " rc " << rc1[r]);
                                peers_failed += rc1[r] == LLRDMA_AR_ERR_PEER_FAILED;
                            }
                            BOOST_CHECK_MESSAGE(rc2[r] == LLRDMA_AR_OK, ctx << ": next call, rank "
                                                                            << r << " rc "
                                                                            << rc2[r]);
                            BOOST_CHECK_MESSAGE(live[r] == 0, ctx << ": rank " << r << " left "
                                                                  << live[r] << " requests");
                            BOOST_CHECK_MESSAGE(hk[r].nalloc == hk[r].nfree,
                                                ctx << ": rank " << r << " alloc/free unbalanced");
                        }
                        // The next call's result, computed here (int32 sum, wrapping).
                        std::vector<uint32_t> ref(k.count, 0);
                        for (int r = 0; r < p; ++r) {
                            Bytes in = input(k.dt, k.count, k.seed + 100 + r);
                            for (size_t i = 0; i < k.count; ++i) {
                                uint32_t v;
                                std::memcpy(&v, &in[i * 4], 4);
                                ref[i] += v;
                            }
                        }
                        for (int r = 0; r < p; ++r)
                            BOOST_CHECK_MESSAGE(
                                rc2[r] != 0 || std::memcmp(out[r].data(), ref.data(), bytes) == 0,
                                ctx << ": next call, rank " << r << " wrong result");
                    }
    BOOST_TEST_MESSAGE(fired << " of " << runs << " runs failed a hook, " << peers_failed
                             << " peer calls failed with it");
    BOOST_CHECK(fired >= runs / 4);
    BOOST_CHECK(peers_failed > fired); // the failure reached other ranks
    BOOST_CHECK_EQUAL(heap.nlive(), 0u);
}

BOOST_AUTO_TEST_CASE(a_failure_before_the_call_is_carried)
{
    // llrdma_ar_comm_t.failed: the rank could not stage its input.  It runs
    // the schedule carrying the failure (LLRDMA_AR_ERR_MEMORY), every other
    // rank fails the call (its result needs the failed rank's data), no
    // message is left, and the next call is right everywhere.  Without
    // waitall_sizes it returns at once (and its peers would wait: not run).
    DeviceHeap heap;
    for (int alg : kAlgs)
        for (int p : {2, 3, 4, 7})
            for (int frank : {0, p - 1}) {
                sim::Options opt;
                opt.sizes = true;
                opt.timeout = std::chrono::milliseconds(10000);
                sim::World w(p, opt);
                const size_t count = 777, bytes = count * 8;
                std::vector<int> rc1(p, 99), rc2(p, 99), live(p, -1);
                std::vector<Bytes> out(p);
                std::vector<std::thread> th;
                for (int r = 0; r < p; ++r)
                    th.emplace_back([&, r] {
                        llrdma_ar_comm_t c = w.comm(r);
                        llrdma_ar_plan_t plan{alg, 256, 3, "test", 0, nullptr, 0, 0, 0};
                        std::vector<double> v(count);
                        for (int call = 0; call < 2; ++call) {
                            for (size_t i = 0; i < count; ++i)
                                v[i] = static_cast<double>((r + 1) * (call + 1)) + 0.5 * i;
                            c.failed = call == 0 && r == frank;
                            int rc = llrdma_ar_run(&plan, &c, nullptr, v.data(), count,
                                                   LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM, nullptr, 0);
                            (call == 0 ? rc1 : rc2)[r] = rc;
                        }
                        out[r].assign(reinterpret_cast<unsigned char *>(v.data()),
                                      reinterpret_cast<unsigned char *>(v.data()) + bytes);
                        live[r] = w.live(r);
                    });
                for (auto &t : th)
                    t.join();
                std::string ctx = std::string(llrdma_ar_alg_name(alg)) + " p=" + std::to_string(p) +
                                  " failed rank " + std::to_string(frank);
                for (const std::string &e : w.problems())
                    BOOST_ERROR(ctx << ": sim: " << e);
                BOOST_CHECK_MESSAGE(w.quiescent(), ctx << ": a message was left over");
                BOOST_CHECK_MESSAGE(rc1[frank] == LLRDMA_AR_ERR_MEMORY, ctx << ": " << rc1[frank]);
                for (int r = 0; r < p; ++r) {
                    if (r != frank)
                        BOOST_CHECK_MESSAGE(rc1[r] == LLRDMA_AR_ERR_PEER_FAILED,
                                            ctx << ": rank " << r << " rc " << rc1[r]);
                    BOOST_CHECK_MESSAGE(rc2[r] == LLRDMA_AR_OK, ctx << ": next call rc " << rc2[r]);
                    BOOST_CHECK_EQUAL(live[r], 0);
                    // Integers and halves: the sum is exact in any order.
                    for (size_t i = 0; i < count && rc2[r] == 0; i += 97) {
                        double want = static_cast<double>(p * (p + 1)) + 0.5 * i * p, got;
                        std::memcpy(&got, &out[r][i * 8], 8);
                        BOOST_CHECK_MESSAGE(got == want, ctx << ": next call, rank " << r
                                                             << " element " << i << " " << got);
                    }
                }
            }
    // Without waitall_sizes: at once, no message.
    sim::World w1(2, sim::Options{});
    llrdma_ar_comm_t c = w1.comm(0);
    c.failed = 1;
    llrdma_ar_plan_t plan{LLRDMA_AR_RING, 256, 3, "test", 0, nullptr, 0, 0, 0};
    double x = 1;
    BOOST_CHECK_EQUAL(
        llrdma_ar_run(&plan, &c, nullptr, &x, 1, LLRDMA_DT_DOUBLE, LLRDMA_OP_SUM, nullptr, 0),
        LLRDMA_AR_ERR_MEMORY);
    BOOST_CHECK(w1.quiescent());
}

BOOST_AUTO_TEST_CASE(shm_hook_failures_break_the_arena)
{
    // A copy, sync or device-fold failure on one rank: that rank returns LLRDMA_AR_ERR_MEMORY,
    // the others LLRDMA_AR_ERR_TRANSPORT (or success when they had finished) --
    // none waits forever -- and every later shm call on the arena fails at once.
    DeviceHeap heap;
    int fired = 0, runs = 0;
    for (int alg : {LLRDMA_AR_SHM_DIRECT, LLRDMA_AR_SHM_SPLIT})
        for (int p : {2, 4})
            for (int kind : {kCopy, kSync, kReduce})
                for (long at : {1L, 2L, 3L, 7L, 1000L}) {
                    sim::Options opt;
                    opt.shm_chunk = 256;
                    sim::World w(p, opt);
                    std::vector<int> rc1(p), rc2(p);
                    std::vector<long> hit(p);
                    std::vector<std::thread> th;
                    for (int r = 0; r < p; ++r)
                        th.emplace_back([&, r] {
                            Hooked h;
                            h.inner = w.comm(r);
                            h.heap = &heap;
                            h.host_lo = w.arena_begin();
                            h.host_hi = w.arena_end();
                            if (r == p - 1) {
                                h.fail_kind = kind;
                                h.fail_at = at;
                            }
                            llrdma_ar_comm_t c = h.comm(true);
                            c.shm->device_fold = kind == kReduce; // the fold fails there
                            llrdma_ar_plan_t plan{alg, 64, 1, "test", 0, nullptr, 0, 0, 0};
                            void *buf = heap.alloc(1000 * 4);
                            rc1[r] = llrdma_ar_run(&plan, &c, nullptr, buf, 1000, LLRDMA_DT_INT32,
                                                   LLRDMA_OP_SUM, nullptr, 0);
                            rc2[r] = llrdma_ar_run(&plan, &c, nullptr, buf, 1000, LLRDMA_DT_INT32,
                                                   LLRDMA_OP_SUM, nullptr, 0);
                            hit[r] = (kind == kCopy   ? h.ncopy
                                      : kind == kSync ? h.nsync
                                                      : h.nreduce) >= at &&
                                     r == p - 1;
                            heap.free(buf);
                        });
                    for (auto &t : th)
                        t.join();
                    ++runs;
                    std::string ctx = std::string(llrdma_ar_alg_name(alg)) +
                                      " p=" + std::to_string(p) + " hook " + std::to_string(kind) +
                                      " at " + std::to_string(at);
                    if (hit[p - 1]) {
                        ++fired;
                        bool first = rc1[p - 1] == LLRDMA_AR_ERR_MEMORY;
                        BOOST_CHECK_MESSAGE(first || (rc1[p - 1] == LLRDMA_AR_OK &&
                                                      rc2[p - 1] == LLRDMA_AR_ERR_MEMORY),
                                            ctx << ": rc " << rc1[p - 1] << "/" << rc2[p - 1]);
                        for (int r = 0; r < p; ++r) {
                            BOOST_CHECK_MESSAGE(rc1[r] == LLRDMA_AR_OK ||
                                                    rc1[r] == LLRDMA_AR_ERR_TRANSPORT || r == p - 1,
                                                ctx << ": rank " << r << " rc " << rc1[r]);
                            if (first)
                                BOOST_CHECK_MESSAGE(rc2[r] == LLRDMA_AR_ERR_TRANSPORT,
                                                    ctx << ": rank " << r << " later rc "
                                                        << rc2[r]);
                        }
                        BOOST_CHECK(llrdma_ar_shm_broken(w.comm(0).shm, p) == 1);
                    } else {
                        for (int r = 0; r < p; ++r)
                            BOOST_CHECK_MESSAGE(rc1[r] == LLRDMA_AR_OK && rc2[r] == LLRDMA_AR_OK,
                                                ctx << ": rank " << r);
                        BOOST_CHECK(llrdma_ar_shm_broken(w.comm(0).shm, p) == 0);
                    }
                }
    BOOST_TEST_MESSAGE(fired << " of " << runs << " runs failed a hook");
    BOOST_CHECK(fired > runs / 2);
    BOOST_CHECK_EQUAL(heap.nlive(), 0u);
}

BOOST_AUTO_TEST_CASE(shm_check_tells_the_call_it_broke_in)
{
    // The abort line records the call of the first failure: that call fails,
    // the next one rebuilds, and a later mark cannot move it.
    const int p = 3;
    std::vector<uint64_t> arena(llrdma_ar_shm_bytes(p, 256) / 8, 0);
    llrdma_ar_shm_t shm{};
    shm.base = arena.data();
    shm.chunk_bytes = 256;
    int gone = 7;
    shm.call = 5;
    BOOST_CHECK_EQUAL(llrdma_ar_shm_check(&shm, p, &gone), LLRDMA_AR_SHM_USABLE);
    BOOST_CHECK_EQUAL(gone, -1);
    llrdma_ar_shm_fail(&shm, p);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_broken(&shm, p), 1);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_check(&shm, p, &gone), LLRDMA_AR_SHM_FAILED);
    shm.call = 6;
    llrdma_ar_shm_fail(&shm, p); // a later failure does not move the call
    BOOST_CHECK_EQUAL(llrdma_ar_shm_check(&shm, p, nullptr), LLRDMA_AR_SHM_REBUILD);
    shm.call = 5;
    BOOST_CHECK_EQUAL(llrdma_ar_shm_check(&shm, p, nullptr), LLRDMA_AR_SHM_FAILED);
    // Call 0 (callers that do not count) is recorded too.
    std::fill(arena.begin(), arena.end(), 0);
    shm.call = 0;
    llrdma_ar_shm_fail(&shm, p);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_check(&shm, p, nullptr), LLRDMA_AR_SHM_FAILED);
    shm.call = 1;
    BOOST_CHECK_EQUAL(llrdma_ar_shm_check(&shm, p, nullptr), LLRDMA_AR_SHM_REBUILD);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_check(nullptr, p, &gone), LLRDMA_AR_SHM_USABLE);
    llrdma_ar_shm_fail(nullptr, p); // no crash
}

BOOST_AUTO_TEST_CASE(shm_a_later_calls_failure_does_not_end_this_call)
{
    // A rank that finished call 5 and failed in call 6 recorded 6 while the
    // others were still in call 5 (one of them late, so the rest wait with
    // the record there): call 5 still ends right everywhere; 6 fails, 7
    // rebuilds.  Before, any record ended every wait: call 5 failed.
    for (int alg : {LLRDMA_AR_SHM_DIRECT, LLRDMA_AR_SHM_SPLIT})
        for (int p : {2, 3}) {
            sim::Options opt;
            opt.shm_chunk = 256;
            sim::World w(p, opt);
            llrdma_ar_shm_t later = *w.comm(0).shm;
            later.call = 6;
            llrdma_ar_shm_fail(&later, p);
            std::vector<int> rc(p, 99);
            std::vector<int32_t> last(p, 0);
            std::vector<std::thread> th;
            for (int r = 0; r < p; ++r)
                th.emplace_back([&, r] {
                    llrdma_ar_comm_t c = w.comm(r);
                    c.shm->call = 5;
                    if (r == p - 1)
                        std::this_thread::sleep_for(std::chrono::milliseconds(20));
                    std::vector<int32_t> v(1000, r + 1);
                    llrdma_ar_plan_t plan{alg, 1024, 1, "test", 0, nullptr, 0, 0, 0};
                    rc[r] = llrdma_ar_run(&plan, &c, nullptr, v.data(), v.size(), LLRDMA_DT_INT32,
                                          LLRDMA_OP_SUM, nullptr, 0);
                    last[r] = v[999];
                });
            for (auto &t : th)
                t.join();
            std::string ctx = std::string(llrdma_ar_alg_name(alg)) + " p=" + std::to_string(p);
            for (int r = 0; r < p; ++r)
                BOOST_CHECK_MESSAGE(rc[r] == LLRDMA_AR_OK && last[r] == p * (p + 1) / 2,
                                    ctx << ": rank " << r << " rc " << rc[r] << " sum " << last[r]);
            later.call = 6;
            BOOST_CHECK_EQUAL(llrdma_ar_shm_check(&later, p, nullptr), LLRDMA_AR_SHM_FAILED);
            later.call = 7;
            BOOST_CHECK_EQUAL(llrdma_ar_shm_check(&later, p, nullptr), LLRDMA_AR_SHM_REBUILD);
        }
}

namespace
{
struct Liveness {
    std::atomic<int> dead{-1};
    std::atomic<int> asked{0};
    static int alive(void *ctx, int rank)
    {
        auto *l = static_cast<Liveness *>(ctx);
        ++l->asked;
        return rank != l->dead.load();
    }
};
} // namespace

BOOST_AUTO_TEST_CASE(shm_dead_rank_ends_every_wait)
{
    // The last rank never arrives (its process died): every other rank's
    // wait ends with LLRDMA_AR_ERR_PEER_GONE within a few intervals, and the
    // arena names the rank.  A rank that is merely late is waited for.
    for (int alg : {LLRDMA_AR_SHM_DIRECT, LLRDMA_AR_SHM_SPLIT})
        for (int p : {2, 3, 5})
            for (bool dies : {true, false}) {
                sim::Options opt;
                opt.shm_chunk = 256;
                sim::World w(p, opt);
                Liveness live;
                if (dies)
                    live.dead = p - 1;
                std::vector<int> rc(p, 99);
                std::vector<double> secs(p);
                std::vector<int32_t> last(p, -1); // checked after the join: Boost is not
                                                  // thread-safe
                std::vector<std::thread> th;
                for (int r = 0; r < p; ++r)
                    th.emplace_back([&, r] {
                        llrdma_ar_comm_t c = w.comm(r);
                        c.shm->alive = &Liveness::alive;
                        c.shm->alive_ctx = &live;
                        c.shm->liveness_ns = 2000000; // 2 ms
                        c.shm->call = 1;
                        if (r == p - 1) {
                            if (dies)
                                return;
                            std::this_thread::sleep_for(std::chrono::milliseconds(100));
                        }
                        std::vector<int32_t> v(1000, r + 1);
                        llrdma_ar_plan_t plan{alg, 1024, 1, "test", 0, nullptr, 0, 0, 0};
                        auto t0 = std::chrono::steady_clock::now();
                        rc[r] = llrdma_ar_run(&plan, &c, nullptr, v.data(), v.size(),
                                              LLRDMA_DT_INT32, LLRDMA_OP_SUM, nullptr, 0);
                        secs[r] =
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                                .count();
                        last[r] = v[999];
                    });
                for (auto &t : th)
                    t.join();
                for (int r = 0; r < p; ++r)
                    if (rc[r] == LLRDMA_AR_OK)
                        BOOST_CHECK_EQUAL(last[r], p * (p + 1) / 2);
                std::string ctx = std::string(llrdma_ar_alg_name(alg)) + " p=" + std::to_string(p) +
                                  (dies ? " dead" : " late");
                int gone = -2;
                int st = llrdma_ar_shm_check(w.comm(0).shm, p, &gone);
                for (int r = 0; r < p - (dies ? 1 : 0); ++r) {
                    BOOST_CHECK_MESSAGE(rc[r] == (dies ? LLRDMA_AR_ERR_PEER_GONE : LLRDMA_AR_OK),
                                        ctx << ": rank " << r << " rc " << rc[r]);
                    BOOST_CHECK_MESSAGE(secs[r] < 5, ctx << ": rank " << r << " took " << secs[r]);
                }
                if (dies) {
                    BOOST_CHECK_MESSAGE(st == LLRDMA_AR_SHM_PEER_GONE && gone == p - 1,
                                        ctx << ": state " << st << " gone " << gone);
                } else {
                    BOOST_CHECK_MESSAGE(st == LLRDMA_AR_SHM_USABLE, ctx << ": state " << st);
                    BOOST_CHECK_MESSAGE(live.asked > 0, ctx << ": liveness never asked");
                }
            }
}

BOOST_AUTO_TEST_CASE(shm_rank_ranges_partition_the_chunks)
{
    // Every rank's own ranges: whole chunks past the header, inside the
    // arena, disjoint from every other rank's; 4p of the 4p + 2 chunks.
    for (int p : {1, 2, 3, 7, 16})
        for (size_t chunk : {size_t(64), size_t(4096)}) {
            size_t total = llrdma_ar_shm_bytes(p, chunk), header = total - (4 * p + 2) * chunk;
            std::vector<int> owner(4 * p + 2, -1);
            for (int r = 0; r < p; ++r) {
                size_t off[4], len[4];
                BOOST_REQUIRE_EQUAL(llrdma_ar_shm_rank_ranges(p, chunk, r, off, len, 4), 4);
                for (int i = 0; i < 4; ++i) {
                    BOOST_CHECK_EQUAL(len[i], chunk);
                    BOOST_CHECK_EQUAL((off[i] - header) % chunk, 0u);
                    BOOST_REQUIRE(off[i] >= header && off[i] + len[i] <= total);
                    int &o = owner[(off[i] - header) / chunk];
                    BOOST_CHECK_EQUAL(o, -1);
                    o = r;
                }
            }
            BOOST_CHECK_EQUAL(std::count(owner.begin(), owner.end(), -1), 2);
            // Rank r's input slot of generation 0 is chunk r.
            for (int r = 0; r < p; ++r)
                BOOST_CHECK_EQUAL(owner[r], r);
        }
    size_t off[4], len[4];
    BOOST_CHECK_EQUAL(llrdma_ar_shm_rank_ranges(3, 64, 3, off, len, 4), 0);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_rank_ranges(3, 64, 0, off, len, 3), 0);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_rank_ranges(3, 100, 0, off, len, 4), 0);
}

BOOST_AUTO_TEST_CASE(shm_rank_pages_are_the_whole_pages_of_the_own_ranges)
{
    // 4 ranks, 64K chunks, 4K pages: the slots start 832 bytes past base, so
    // each 64K range holds 15 whole pages (its first and last are shared).
    const size_t chunk = 64 << 10, page = 4096;
    std::vector<size_t> all;
    for (int r = 0; r < 4; ++r) {
        size_t off[4], len[4], pages[64];
        BOOST_REQUIRE_EQUAL(llrdma_ar_shm_rank_ranges(4, chunk, r, off, len, 4), 4);
        size_t n = llrdma_ar_shm_rank_pages(4, chunk, r, page, pages, 64);
        BOOST_REQUIRE_EQUAL(n, 4u * 15u);
        for (size_t k = 0; k < n; ++k) {
            BOOST_CHECK_EQUAL(pages[k] % page, 0u);
            bool inside = false;
            for (int i = 0; i < 4; ++i)
                inside = inside || (pages[k] >= off[i] && pages[k] + page <= off[i] + len[i]);
            BOOST_CHECK(inside);
            all.push_back(pages[k]);
        }
    }
    std::sort(all.begin(), all.end());
    BOOST_CHECK(std::adjacent_find(all.begin(), all.end()) == all.end()); // no page twice
    // A page-sized chunk never holds a whole page at this offset; max caps the writes.
    size_t one[1] = {7};
    BOOST_CHECK_EQUAL(llrdma_ar_shm_rank_pages(4, 4096, 0, page, one, 1), 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_rank_pages(4, chunk, 1, page, one, 1), 60u);
    BOOST_CHECK_EQUAL(one[0] % page, 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_rank_pages(4, chunk, 1, page, nullptr, 0), 60u);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_rank_pages(4, chunk, 1, 3000, one, 1), 0u);
    BOOST_CHECK_EQUAL(llrdma_ar_shm_rank_pages(4, chunk, 4, page, one, 1), 0u);
}

BOOST_AUTO_TEST_CASE(numa_census_counts_local_remote_and_unknown)
{
    const int status[] = {1, 1, 0, -2 /* ENOENT */, 1, 3, 0, 0, -14 /* EFAULT */};
    llrdma_ar_numa_census_t c;
    llrdma_ar_numa_census(status, 9, 1, &c);
    BOOST_CHECK_EQUAL(c.pages, 9u);
    BOOST_CHECK_EQUAL(c.local, 3u);
    BOOST_CHECK_EQUAL(c.remote, 4u);
    BOOST_CHECK_EQUAL(c.unknown, 2u);
    BOOST_CHECK_EQUAL(c.remote_node, 0);
    BOOST_CHECK_EQUAL(c.remote_most, 3u);
    llrdma_ar_numa_census(status, 3, 1, &c);
    BOOST_CHECK_EQUAL(c.local, 2u);
    BOOST_CHECK_EQUAL(c.remote_node, 0);
    llrdma_ar_numa_census(status, 2, 1, &c);
    BOOST_CHECK_EQUAL(c.remote, 0u);
    BOOST_CHECK_EQUAL(c.remote_node, -1);
    llrdma_ar_numa_census(nullptr, 5, 0, &c);
    BOOST_CHECK_EQUAL(c.pages, 0u);
}

// staging.cu -- sessions, pinned bounce buffers and device scratch of
// libllrdma_cuda.so, and its C entry point (see llrdma_core/llrdma_cuda.h).
//
// Bounce reuse without extra waits: every stage_in copy reading a bounce gets a
// sequence number; every stage_out waits on an event recorded after its copy,
// which (one in-order stream) also proves every earlier copy finished, so the
// session knows which bounces are free again without querying events.  Only
// when no free bounce fits and one that fits is still being read does it wait
// for the stream instead of pinning more memory.
#include "cuda_internal.h"
#include "llrdma_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

using llrdma::cuda::launch_reduce;

namespace
{

struct Bounce {
    void *p = nullptr;
    size_t cap = 0;
};

// A bounce held by a session: lent to the caller (busy) or idle; an idle one
// is free once the copy numbered `seq` has run.
struct Held {
    Bounce b;
    unsigned long long seq = 0;
    bool busy = false;
};

} // namespace

struct llrdma_cuda_session {
    int device = 0;
    int saved = -1; // device to restore at end, -1: unchanged
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr;
    int max_blocks = 0;
    cudaMemPool_t pool = nullptr;        // nullptr: cudaMalloc, freed at end
    unsigned long long enq = 0, ran = 0; // stage_in copies enqueued / known to have run
    std::vector<Held> held;
    std::vector<void *> deferred_free;
    std::string err;
};

namespace
{

// Process-wide caches.  Never destroyed: at exit CUDA may be gone already, so
// finalize() (component close) is the only place that frees.
struct Global {
    std::mutex m;
    std::vector<Bounce> cache;
    size_t cached = 0;
    std::vector<llrdma_cuda_session *> idle;
    std::vector<std::pair<int, cudaMemPool_t>> pools; // nullptr: no pool support
};

Global &global()
{
    static Global *g = new Global;
    return *g;
}

void put_err(char *err, size_t len, const std::string &s)
{
    if (err && len > 0)
        std::snprintf(err, len, "%s", s.c_str());
}

std::string describe(const char *what, cudaError_t e)
{
    return std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}

// Records the session's first error; always returns -1.
int fail(llrdma_cuda_session *s, const char *what, cudaError_t e)
{
    if (s->err.empty())
        s->err = describe(what, e);
    return -1;
}

// 64 KiB at least, powers of two up to 16 MiB (messages of one call have a
// few sizes, so buffers get reused), 2 MiB steps above.
size_t bounce_cap(size_t bytes)
{
    const size_t kMin = 64 << 10, kPow2Max = 16 << 20, kStep = 2 << 20;
    if (bytes <= kMin)
        return kMin;
    if (bytes > kPow2Max)
        return (bytes + kStep - 1) / kStep * kStep;
    size_t c = kMin;
    while (c < bytes)
        c *= 2;
    return c;
}

// Caller holds global().m.
cudaMemPool_t pool_for(int dev)
{
    Global &g = global();
    for (auto &kv : g.pools)
        if (kv.first == dev)
            return kv.second;
    cudaMemPool_t pool = nullptr;
    int ok = 0;
    if (cudaDeviceGetAttribute(&ok, cudaDevAttrMemoryPoolsSupported, dev) == cudaSuccess && ok) {
        cudaMemPoolProps props;
        std::memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = dev;
        if (cudaMemPoolCreate(&pool, &props) == cudaSuccess) {
            unsigned long long keep = LLRDMA_CUDA_CACHE_BYTES;
            cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
        } else {
            pool = nullptr;
        }
    }
    g.pools.push_back({dev, pool}); // remembered either way: ask once per device
    return pool;
}

void destroy_session(llrdma_cuda_session *s)
{
    if (s->done)
        cudaEventDestroy(s->done);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    delete s;
}

// Marks every copy enqueued so far as run (waits for the stream).
int sync_stream(llrdma_cuda_session *s, const char *why)
{
    cudaError_t e = cudaEventRecord(s->done, s->stream);
    if (e != cudaSuccess)
        return fail(s, "cudaEventRecord", e);
    if ((e = cudaEventSynchronize(s->done)) != cudaSuccess)
        return fail(s, why, e);
    s->ran = s->enq;
    return 0;
}

Held *find_held(llrdma_cuda_session *s, const void *p)
{
    for (Held &h : s->held)
        if (h.b.p == p)
            return &h;
    return nullptr;
}

Held *free_fit(llrdma_cuda_session *s, size_t bytes)
{
    Held *best = nullptr;
    for (Held &h : s->held)
        if (!h.busy && h.seq <= s->ran && h.b.cap >= bytes && (!best || h.b.cap < best->b.cap))
            best = &h;
    return best;
}

int get_bounce(llrdma_cuda_session *s, size_t bytes, void **out)
{
    *out = nullptr;
    if (!s->err.empty())
        return -1;
    Held *h = free_fit(s, bytes);
    if (!h && std::any_of(s->held.begin(), s->held.end(),
                          [&](const Held &x) { return !x.busy && x.b.cap >= bytes; })) {
        if (sync_stream(s, "cudaEventSynchronize (waiting for a staging buffer)") != 0)
            return -1;
        h = free_fit(s, bytes);
    }
    if (!h) {
        Bounce b;
        {
            Global &g = global();
            std::lock_guard<std::mutex> lk(g.m);
            auto best = g.cache.end();
            for (auto it = g.cache.begin(); it != g.cache.end(); ++it)
                if (it->cap >= bytes && (best == g.cache.end() || it->cap < best->cap))
                    best = it;
            if (best != g.cache.end()) {
                b = *best;
                g.cached -= b.cap;
                g.cache.erase(best);
            }
        }
        if (!b.p) {
            b.cap = bounce_cap(bytes);
            cudaError_t e = cudaHostAlloc(&b.p, b.cap, cudaHostAllocPortable);
            if (e != cudaSuccess)
                return fail(s, "cudaHostAlloc (staging buffer)", e);
        }
        try {
            s->held.push_back(Held{b, 0, false});
        } catch (const std::bad_alloc &) {
            cudaFreeHost(b.p);
            return fail(s, "staging bookkeeping", cudaErrorMemoryAllocation);
        }
        h = &s->held.back();
    }
    h->busy = true;
    *out = h->b.p;
    return 0;
}

// ------------------------------------------------------------- entry points

int api_begin(int device, llrdma_cuda_session_t **out, char *err, size_t errlen)
{
    *out = nullptr;
    int cur = 0, dev, nsm = 0;
    cudaError_t e = cudaGetDevice(&cur);
    if (e != cudaSuccess) {
        put_err(err, errlen, describe("cudaGetDevice", e));
        return -1;
    }
    dev = device < 0 ? cur : device;
    if (dev != cur && (e = cudaSetDevice(dev)) != cudaSuccess) {
        put_err(err, errlen, describe("cudaSetDevice", e));
        return -1;
    }
    llrdma_cuda_session *s = nullptr;
    {
        Global &g = global();
        std::lock_guard<std::mutex> lk(g.m);
        for (auto it = g.idle.begin(); it != g.idle.end(); ++it)
            if ((*it)->device == dev) {
                s = *it;
                g.idle.erase(it);
                break;
            }
        if (!s) {
            s = new (std::nothrow) llrdma_cuda_session;
            if (s) {
                s->device = dev;
                s->pool = pool_for(dev);
            }
        }
    }
    const char *what = "session allocation";
    e = cudaErrorMemoryAllocation;
    if (!s)
        goto restore_device;
    if (!s->stream) {
        // A blocking stream: it also waits for work the application left on
        // the legacy default stream before calling MPI.
        if ((e = cudaStreamCreate(&s->stream)) != cudaSuccess) {
            what = "cudaStreamCreate";
            goto destroy;
        }
        if ((e = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming)) != cudaSuccess) {
            what = "cudaEventCreateWithFlags";
            goto destroy;
        }
        if ((e = cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev)) !=
            cudaSuccess) {
            what = "cudaDeviceGetAttribute";
            goto destroy;
        }
        s->max_blocks = 8 * std::max(nsm, 1);
    }
    s->saved = dev != cur ? cur : -1;
    s->err.clear();
    *out = s;
    return 0;

destroy:
    destroy_session(s);
restore_device:
    put_err(err, errlen, describe(what, e));
    if (dev != cur)
        cudaSetDevice(cur);
    return -1;
}

int api_end(llrdma_cuda_session_t *s, char *err, size_t errlen)
{
    cudaError_t e = cudaStreamSynchronize(s->stream);
    if (e != cudaSuccess)
        fail(s, "cudaStreamSynchronize (end of the Allreduce)", e);
    for (void *p : s->deferred_free)
        if ((e = cudaFree(p)) != cudaSuccess)
            fail(s, "cudaFree (scratch)", e);
    s->deferred_free.clear();
    bool ok = s->err.empty();
    {
        Global &g = global();
        std::lock_guard<std::mutex> lk(g.m);
        for (Held &h : s->held) {
            // After an error the context may be unusable: do not keep its memory.
            if (ok && g.cached + h.b.cap <= LLRDMA_CUDA_CACHE_BYTES) {
                g.cache.push_back(h.b);
                g.cached += h.b.cap;
            } else {
                cudaFreeHost(h.b.p);
            }
        }
        s->held.clear();
        s->enq = s->ran = 0;
        if (ok)
            g.idle.push_back(s);
    }
    if (s->saved >= 0)
        cudaSetDevice(s->saved);
    if (ok)
        return 0;
    put_err(err, errlen, s->err);
    destroy_session(s);
    return -1;
}

int api_copy(llrdma_cuda_session_t *s, void *dst, const void *src, size_t bytes)
{
    if (!s->err.empty())
        return -1;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s->stream);
    return e == cudaSuccess ? 0 : fail(s, "cudaMemcpyAsync (device buffer copy)", e);
}

int api_reduce(llrdma_cuda_session_t *s, int op, int dtype, const void *a, const void *b, void *out,
               size_t count)
{
    if (!s->err.empty())
        return -1;
    cudaError_t e = launch_reduce(op, dtype, a, b, out, count, s->stream, s->max_blocks);
    return e == cudaSuccess ? 0 : fail(s, "cudaLaunchKernel (reduction)", e);
}

void *api_alloc(llrdma_cuda_session_t *s, size_t bytes)
{
    if (!s->err.empty())
        return nullptr;
    void *p = nullptr;
    cudaError_t e;
    if (s->pool) {
        if ((e = cudaMallocFromPoolAsync(&p, bytes, s->pool, s->stream)) != cudaSuccess)
            fail(s, "cudaMallocFromPoolAsync (scratch)", e);
    } else {
        if ((e = cudaMalloc(&p, bytes)) != cudaSuccess)
            fail(s, "cudaMalloc (scratch)", e);
    }
    return e == cudaSuccess ? p : nullptr;
}

void api_free(llrdma_cuda_session_t *s, void *p)
{
    if (!p)
        return;
    if (!s->pool) {
        s->deferred_free.push_back(p); // cudaFree waits for the device: at end
        return;
    }
    cudaError_t e = cudaFreeAsync(p, s->stream);
    if (e != cudaSuccess)
        fail(s, "cudaFreeAsync (scratch)", e);
}

// Test hook (tests/gpu): LLRDMA_CUDA_FAIL_AT=N fails the process's N-th
// device-to-host staging copy as the CUDA call would, to check the error path
// end to end on a GPU without corrupting the context.
bool injected_failure()
{
    static const long at = [] {
        const char *v = std::getenv("LLRDMA_CUDA_FAIL_AT");
        return v ? std::atol(v) : 0L;
    }();
    static std::atomic<long> n{0};
    return at > 0 && ++n == at;
}

int api_stage_out(llrdma_cuda_session_t *s, const void *src, size_t bytes, void **bounce)
{
    if (get_bounce(s, bytes, bounce) != 0)
        return -1;
    if (injected_failure())
        fail(s, "cudaMemcpyAsync (device to host staging; injected by LLRDMA_CUDA_FAIL_AT)",
             cudaErrorInvalidValue);
    cudaError_t e = !s->err.empty()
                        ? cudaErrorInvalidValue
                        : cudaMemcpyAsync(*bounce, src, bytes, cudaMemcpyDefault, s->stream);
    if (e != cudaSuccess)
        fail(s, "cudaMemcpyAsync (device to host staging)", e);
    else
        sync_stream(s, "cudaEventSynchronize (device to host staging)");
    if (!s->err.empty()) {
        find_held(s, *bounce)->busy = false;
        *bounce = nullptr;
        return -1;
    }
    return 0;
}

int api_bounce_get(llrdma_cuda_session_t *s, size_t bytes, void **bounce)
{
    return get_bounce(s, bytes, bounce);
}

int api_stage_in(llrdma_cuda_session_t *s, void *dst, void *bounce, size_t bytes)
{
    Held *h = find_held(s, bounce);
    if (!h)
        return fail(s, "stage_in of an unknown staging buffer", cudaErrorInvalidValue);
    h->busy = false;
    if (!s->err.empty())
        return -1;
    cudaError_t e = cudaMemcpyAsync(dst, bounce, bytes, cudaMemcpyDefault, s->stream);
    if (e != cudaSuccess)
        return fail(s, "cudaMemcpyAsync (host to device staging)", e);
    h->seq = ++s->enq;
    return 0;
}

void api_bounce_put(llrdma_cuda_session_t *s, void *bounce)
{
    if (Held *h = find_held(s, bounce))
        h->busy = false;
}

const char *api_error(const llrdma_cuda_session_t *s)
{
    return s->err.c_str();
}

int api_copy_sync(void *dst, const void *src, size_t bytes, char *err, size_t errlen)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (e == cudaSuccess)
        return 0;
    put_err(err, errlen, describe("cudaMemcpy (device send buffer to host receive buffer)", e));
    return -1;
}

int api_sync(llrdma_cuda_session_t *s)
{
    if (!s->err.empty())
        return -1;
    return sync_stream(s, "cudaEventSynchronize (arena copy)");
}

int api_host_register(void *p, size_t bytes, char *err, size_t errlen)
{
    // Mapped: kernels may read and write it over the bus, at the same address
    // (unified addressing) -- what the arena's device fold needs.
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (e != cudaSuccess) {
        put_err(err, errlen, describe("cudaHostRegister (shared-memory arena)", e));
        return -1;
    }
    void *d = nullptr;
    if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess || d != p) {
        put_err(err, errlen, "the pinned arena has another address on the device");
        return 1; // pinned for copies, not for kernels
    }
    return 0;
}

void api_host_unregister(void *p)
{
    (void)cudaHostUnregister(p);
}

int api_device_key(int device, unsigned long long *key, char *err, size_t errlen)
{
    char bus[64] = "";
    cudaError_t e = device < 0 ? cudaGetDevice(&device) : cudaSuccess;
    if (e == cudaSuccess)
        e = cudaDeviceGetPCIBusId(bus, sizeof bus, device);
    if (e != cudaSuccess) {
        put_err(err, errlen, describe("cudaDeviceGetPCIBusId", e));
        return -1;
    }
    unsigned long long h = 1469598103934665603ull; // FNV-1a
    for (const char *c = bus; *c; ++c)
        h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
    *key = h ? h : 1;
    return 0;
}

int api_peer_reduce(llrdma_cuda_session_t *s, int op, int dtype, const void *const *in,
                    void *const *out, int n, size_t count)
{
    if (!s->err.empty())
        return -1;
    cudaError_t e =
        llrdma::cuda::launch_peer_reduce(op, dtype, in, out, n, count, s->stream, s->max_blocks);
    return e == cudaSuccess ? 0 : fail(s, "cudaLaunchKernel (peer reduction)", e);
}

int api_event_record(llrdma_cuda_session_t *s, void *ev)
{
    if (!s->err.empty())
        return -1;
    cudaError_t e = cudaEventRecord(static_cast<cudaEvent_t>(ev), s->stream);
    return e == cudaSuccess ? 0 : fail(s, "cudaEventRecord (interprocess event)", e);
}

int api_stream_wait(llrdma_cuda_session_t *s, void *ev)
{
    if (!s->err.empty())
        return -1;
    cudaError_t e = cudaStreamWaitEvent(s->stream, static_cast<cudaEvent_t>(ev), 0);
    return e == cudaSuccess ? 0 : fail(s, "cudaStreamWaitEvent (a peer's event)", e);
}

void api_finalize()
{
    Global &g = global();
    std::lock_guard<std::mutex> lk(g.m);
    for (llrdma_cuda_session *s : g.idle)
        destroy_session(s);
    g.idle.clear();
    for (Bounce &b : g.cache)
        cudaFreeHost(b.p);
    g.cache.clear();
    g.cached = 0;
    for (auto &kv : g.pools)
        if (kv.second)
            cudaMemPoolDestroy(kv.second);
    g.pools.clear();
}

void *api_dev_alloc(int device, size_t bytes, char *err, size_t errlen)
{
    int cur = 0;
    cudaError_t e = cudaGetDevice(&cur);
    if (e != cudaSuccess) {
        put_err(err, errlen, describe("cudaGetDevice", e));
        return nullptr;
    }
    int dev = device < 0 ? cur : device;
    if (dev != cur && (e = cudaSetDevice(dev)) != cudaSuccess) {
        put_err(err, errlen, describe("cudaSetDevice", e));
        return nullptr;
    }
    void *p = nullptr;
    if ((e = cudaMalloc(&p, bytes)) != cudaSuccess) {
        put_err(err, errlen, describe("cudaMalloc (GPU-direct scratch)", e));
        p = nullptr;
    }
    if (dev != cur)
        cudaSetDevice(cur);
    return p;
}

void api_dev_free(void *p)
{
    if (p)
        cudaFree(p); // errors ignored: CUDA may be shutting down
}

const llrdma_cuda_api_t kApi = {
    LLRDMA_CUDA_API_VERSION,
    api_begin,
    api_end,
    api_copy,
    api_reduce,
    api_alloc,
    api_free,
    api_stage_out,
    api_bounce_get,
    api_stage_in,
    api_bounce_put,
    api_error,
    api_copy_sync,
    api_finalize,
    api_sync,
    api_host_register,
    api_host_unregister,
    api_device_key,
    llrdma::cuda::peer_device_info,
    llrdma::cuda::peer_access,
    llrdma::cuda::peer_mem_range,
    llrdma::cuda::peer_ipc_export,
    llrdma::cuda::peer_ipc_open,
    llrdma::cuda::peer_ipc_close,
    llrdma::cuda::peer_event_create,
    llrdma::cuda::peer_event_open,
    llrdma::cuda::peer_event_destroy,
    api_peer_reduce,
    api_event_record,
    api_stream_wait,
    api_dev_alloc,
    api_dev_free,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const llrdma_cuda_api_t *
llrdma_cuda_api(int version)
{
    return version == LLRDMA_CUDA_API_VERSION ? &kApi : nullptr;
}

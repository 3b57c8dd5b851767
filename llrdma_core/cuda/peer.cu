// peer.cu -- the GPU peer path of libllrdma_cuda.so: the kernel that folds a
// block of every rank's input (other GPUs' memory through CUDA IPC) and
// writes the result into every rank's output, and the IPC plumbing (handles,
// interprocess events, peer access, allocation identity).
//
// The fold is the host's left fold in rank order with the host's functors
// (allreduce/reduce_table.hpp), one IEEE operation per step, so the bits
// equal the host path's.  Each thread reads an element (or a 16-byte vector)
// of every input and then writes every output: an output that is also an
// input (in place) is read before it is written by the same thread.
#include "allreduce/reduce_table.hpp"
#include "cuda_internal.h"
#include "llrdma_cuda.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>

namespace llrdma
{
namespace cuda
{
namespace
{

constexpr int kThreads = 512;

struct Ptrs {
    const void *in[kPeerMax];
    void *out[kPeerMax];
};

__device__ inline size_t first_index()
{
    return blockIdx.x * size_t(blockDim.x) + threadIdx.x;
}
__device__ inline size_t stride()
{
    return size_t(gridDim.x) * blockDim.x;
}

template <typename Op, typename T> __device__ inline T fold(const Ptrs &p, int n, size_t i)
{
    T v = static_cast<const T *>(p.in[0])[i];
    for (int q = 1; q < n; ++q)
        v = Op::apply(v, static_cast<const T *>(p.in[q])[i]);
    return v;
}

// 16 bytes per thread and step, every pointer 16-byte aligned.
template <typename Op, typename T> __global__ void k_peer_vec(Ptrs p, int n, size_t count)
{
    constexpr int V = 16 / sizeof(T);
    union U {
        uint4 u;
        T t[V];
    };
    const size_t nvec = count / V;
    for (size_t i = first_index(); i < nvec; i += stride()) {
        U acc, x;
        acc.u = static_cast<const uint4 *>(p.in[0])[i];
        for (int q = 1; q < n; ++q) {
            x.u = static_cast<const uint4 *>(p.in[q])[i];
#pragma unroll
            for (int j = 0; j < V; ++j)
                acc.t[j] = Op::apply(acc.t[j], x.t[j]);
        }
        for (int q = 0; q < n; ++q)
            static_cast<uint4 *>(p.out[q])[i] = acc.u;
    }
    size_t t = nvec * V + first_index();
    if (t < count) {
        T v = fold<Op, T>(p, n, t);
        for (int q = 0; q < n; ++q)
            static_cast<T *>(p.out[q])[t] = v;
    }
}

template <typename Op, typename T> __global__ void k_peer_typed(Ptrs p, int n, size_t count)
{
    for (size_t i = first_index(); i < count; i += stride()) {
        T v = fold<Op, T>(p, n, i);
        for (int q = 0; q < n; ++q)
            static_cast<T *>(p.out[q])[i] = v;
    }
}

// Unaligned buffers (the core promises no alignment): byte copies.
template <typename Op, typename T> __global__ void k_peer_bytes(Ptrs p, int n, size_t count)
{
    for (size_t i = first_index(); i < count; i += stride()) {
        T v, x;
        memcpy(&v, static_cast<const unsigned char *>(p.in[0]) + i * sizeof(T), sizeof(T));
        for (int q = 1; q < n; ++q) {
            memcpy(&x, static_cast<const unsigned char *>(p.in[q]) + i * sizeof(T), sizeof(T));
            v = Op::apply(v, x);
        }
        for (int q = 0; q < n; ++q)
            memcpy(static_cast<unsigned char *>(p.out[q]) + i * sizeof(T), &v, sizeof(T));
    }
}

int blocks_for(size_t work, int max_blocks)
{
    size_t b = (work + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    return static_cast<int>(b < static_cast<size_t>(max_blocks) ? b : max_blocks);
}

template <typename Op, typename T>
cudaError_t launch(const Ptrs &p, int n, size_t count, cudaStream_t st, int maxb)
{
    uintptr_t bits = 0;
    for (int q = 0; q < n; ++q)
        bits |= reinterpret_cast<uintptr_t>(p.in[q]) | reinterpret_cast<uintptr_t>(p.out[q]);
    Ptrs pp = p;
    void *args[] = {&pp, &n, &count};
    const void *fn;
    size_t work = count;
    if constexpr (std::is_arithmetic_v<T> && 16 % sizeof(T) == 0) {
        if (bits % 16 == 0) {
            fn = reinterpret_cast<const void *>(&k_peer_vec<Op, T>);
            work = count / (16 / sizeof(T)) + 1;
            return cudaLaunchKernel(fn, dim3(blocks_for(work, maxb)), dim3(kThreads), args, 0, st);
        }
    }
    if (bits % alignof(T) == 0)
        fn = reinterpret_cast<const void *>(&k_peer_typed<Op, T>);
    else
        fn = reinterpret_cast<const void *>(&k_peer_bytes<Op, T>);
    return cudaLaunchKernel(fn, dim3(blocks_for(work, maxb)), dim3(kThreads), args, 0, st);
}

struct Launchers {
    using Fn = cudaError_t (*)(const Ptrs &, int, size_t, cudaStream_t, int);
    template <typename Op, typename T> static Fn make() { return launch<Op, T>; }
};

void put_err(char *err, size_t len, const std::string &s)
{
    if (err && len > 0)
        std::snprintf(err, len, "%s", s.c_str());
}

int cuda_fail(char *err, size_t len, const char *what, cudaError_t e)
{
    put_err(err, len,
            std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
    return -1;
}

} // namespace

cudaError_t launch_peer_reduce(int op, int dtype, const void *const *in, void *const *out, int n,
                               size_t count, cudaStream_t stream, int max_blocks)
{
    Launchers::Fn fn = ops::lookup<Launchers>(op, dtype);
    if (!fn || n < 1 || n > kPeerMax)
        return cudaErrorInvalidValue;
    if (count == 0)
        return cudaSuccess;
    Ptrs p{};
    for (int q = 0; q < n; ++q) {
        p.in[q] = in[q];
        p.out[q] = out[q];
    }
    return fn(p, n, count, stream, max_blocks > 0 ? max_blocks : 1024);
}

int peer_device_info(int device, char *bus_id, size_t bus_len, unsigned char *uuid, char *err,
                     size_t errlen)
{
    cudaError_t e = device < 0 ? cudaGetDevice(&device) : cudaSuccess;
    if (e == cudaSuccess)
        e = cudaDeviceGetPCIBusId(bus_id, static_cast<int>(bus_len), device);
    if (e != cudaSuccess)
        return cuda_fail(err, errlen, "cudaDeviceGetPCIBusId", e);
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess)
        return cuda_fail(err, errlen, "cudaGetDeviceProperties", e);
    std::memcpy(uuid, prop.uuid.bytes, 16);
    return 0;
}

int peer_access(int device, const char *bus_id, char *err, size_t errlen)
{
    int other = -1, ok = 0;
    if (cudaDeviceGetByPCIBusId(&other, bus_id) != cudaSuccess) {
        (void)cudaGetLastError(); // not visible here: not an error of ours
        return 2;
    }
    if (other == device)
        return 1;
    cudaError_t e = cudaDeviceCanAccessPeer(&ok, device, other);
    if (e != cudaSuccess)
        return cuda_fail(err, errlen, "cudaDeviceCanAccessPeer", e);
    return ok ? 1 : 0;
}

int peer_mem_range(const void *p, unsigned long long *id, void **base, size_t *size, char *err,
                   size_t errlen)
{
    // The buffer id is a driver attribute; the runtime hands out the entry
    // point, so the library needs no link to libcuda.
    using GetAttrs = int (*)(unsigned, int *, void **, unsigned long long);
    static GetAttrs fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &f, 12000, cudaEnableDefault,
                                             &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = nullptr;
        return reinterpret_cast<GetAttrs>(f);
    }();
    if (!fn) {
        put_err(err, errlen, "cuPointerGetAttributes: not found in the CUDA driver");
        return -1;
    }
    int attrs[3] = {7 /* BUFFER_ID */, 11 /* RANGE_START_ADDR */, 12 /* RANGE_SIZE */};
    unsigned long long vid = 0, vbase = 0, vsize = 0;
    void *data[3] = {&vid, &vbase, &vsize};
    int r = fn(3, attrs, data, reinterpret_cast<unsigned long long>(p));
    if (r != 0) {
        put_err(err, errlen,
                "cuPointerGetAttributes (buffer id and range): CUresult " + std::to_string(r));
        return -1;
    }
    *id = vid;
    *base = reinterpret_cast<void *>(vbase);
    *size = static_cast<size_t>(vsize);
    return 0;
}

int peer_ipc_export(void *base, void *handle, char *err, size_t errlen)
{
    static_assert(sizeof(cudaIpcMemHandle_t) == LLRDMA_CUDA_IPC_BYTES, "64-byte handles");
    cudaIpcMemHandle_t h;
    cudaError_t e = cudaIpcGetMemHandle(&h, base);
    if (e != cudaSuccess)
        return cuda_fail(err, errlen, "cudaIpcGetMemHandle", e);
    std::memcpy(handle, &h, sizeof h);
    return 0;
}

int peer_ipc_open(const void *handle, void **mapped, char *err, size_t errlen)
{
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle, sizeof h);
    cudaError_t e = cudaIpcOpenMemHandle(mapped, h, cudaIpcMemLazyEnablePeerAccess);
    return e == cudaSuccess ? 0 : cuda_fail(err, errlen, "cudaIpcOpenMemHandle", e);
}

void peer_ipc_close(void *mapped)
{
    (void)cudaIpcCloseMemHandle(mapped);
}

int peer_event_create(void **ev, void *handle, char *err, size_t errlen)
{
    static_assert(sizeof(cudaIpcEventHandle_t) == LLRDMA_CUDA_IPC_BYTES, "64-byte handles");
    cudaEvent_t e0 = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&e0, cudaEventInterprocess | cudaEventDisableTiming);
    if (e != cudaSuccess)
        return cuda_fail(err, errlen, "cudaEventCreateWithFlags (interprocess)", e);
    cudaIpcEventHandle_t h;
    if ((e = cudaIpcGetEventHandle(&h, e0)) != cudaSuccess) {
        cudaEventDestroy(e0);
        return cuda_fail(err, errlen, "cudaIpcGetEventHandle", e);
    }
    std::memcpy(handle, &h, sizeof h);
    *ev = e0;
    return 0;
}

int peer_event_open(const void *handle, void **ev, char *err, size_t errlen)
{
    cudaIpcEventHandle_t h;
    std::memcpy(&h, handle, sizeof h);
    cudaEvent_t e0 = nullptr;
    cudaError_t e = cudaIpcOpenEventHandle(&e0, h);
    if (e != cudaSuccess)
        return cuda_fail(err, errlen, "cudaIpcOpenEventHandle", e);
    *ev = e0;
    return 0;
}

void peer_event_destroy(void *ev)
{
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(ev));
}

} // namespace cuda
} // namespace llrdma

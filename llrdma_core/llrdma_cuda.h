/*
 * llrdma_cuda.h -- C API of libllrdma_cuda.so, the GPU half of coll/llrdma's
 * Allreduce (llrdma_core/cuda/).  No CUDA type appears here: the coll component is
 * built without CUDA headers and dlopen()s this library the first time it sees
 * a device buffer, then takes every entry point from llrdma_cuda_api().
 *
 * One Allreduce on device buffers is one session: begin() makes the buffers'
 * device current and takes a stream; every copy, reduction kernel and
 * host<->device staging copy of the call is enqueued on that stream, so stream
 * order alone orders them (a staged-in segment is on the device before the
 * kernel that reduces it, with no host wait); end() waits for the stream.
 * Only stage_out() waits, and only for its own copy (an event), because the
 * PML reads the bounce buffer as soon as the send starts.
 *
 * Bounce buffers are pinned host memory (cudaHostAlloc, portable) from a
 * process-wide cache that keeps up to LLRDMA_CUDA_CACHE_BYTES between calls;
 * a bounce used for a receive goes back to the cache only once the
 * host-to-device copy that reads it has run.  Device scratch comes from a
 * stream-ordered memory pool per device.
 *
 * Errors: entry points return 0 or -1 (alloc: NULL).  The first error of a
 * session is sticky (later calls fail at once) and is described by error(),
 * naming the CUDA call, e.g. "cudaMemcpyAsync (device to host, 65536 bytes):
 * an illegal memory access was encountered".  end() and bounce_put() always
 * release what they are given.  Sessions of several threads may run at once.
 */
#ifndef LLRDMA_CUDA_H
#define LLRDMA_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLRDMA_CUDA_API_VERSION 4
#define LLRDMA_CUDA_LIB_NAME "libllrdma_cuda.so"
#define LLRDMA_CUDA_CACHE_BYTES ((size_t)64 << 20)
#define LLRDMA_CUDA_IPC_BYTES 64 /* IPC memory and event handles */
#define LLRDMA_CUDA_PEER_MAX 16  /* ranks of one peer_reduce */

typedef struct llrdma_cuda_session llrdma_cuda_session_t;

typedef struct llrdma_cuda_api {
    int version; /* LLRDMA_CUDA_API_VERSION */

    /* device < 0: the calling thread's current device.  On failure *out is
     * NULL and err holds the reason. */
    int (*begin)(int device, llrdma_cuda_session_t **out, char *err, size_t errlen);
    /* Waits for the stream, releases everything the session holds, restores
     * the caller's device.  Returns the session's first error (in err) or the
     * stream's. */
    int (*end)(llrdma_cuda_session_t *s, char *err, size_t errlen);

    /* Enqueued on the session's stream (any memory CUDA can address). */
    int (*copy)(llrdma_cuda_session_t *s, void *dst, const void *src, size_t bytes);
    /* out[i] = a[i] OP b[i], llrdma_reduce_local's semantics and bits; out may
     * alias a or b; no alignment needed. */
    int (*reduce)(llrdma_cuda_session_t *s, int op, int dtype, const void *a, const void *b,
                  void *out, size_t count);
    void *(*alloc)(llrdma_cuda_session_t *s, size_t bytes);
    void (*free)(llrdma_cuda_session_t *s, void *p);

    /* Send side: copies src (device) into a bounce buffer and waits for that
     * copy; the caller sends *bounce, then gives it back with bounce_put. */
    int (*stage_out)(llrdma_cuda_session_t *s, const void *src, size_t bytes, void **bounce);
    /* Receive side: a bounce buffer to receive into; once the data is there,
     * stage_in enqueues its copy to dst and takes the bounce back (also on
     * failure); a receive that did not complete returns it with bounce_put. */
    int (*bounce_get)(llrdma_cuda_session_t *s, size_t bytes, void **bounce);
    int (*stage_in)(llrdma_cuda_session_t *s, void *dst, void *bounce, size_t bytes);
    void (*bounce_put)(llrdma_cuda_session_t *s, void *bounce);

    const char *(*error)(const llrdma_cuda_session_t *s); /* "" when none */

    /* Blocking copy outside a session (device send buffer, host receive
     * buffer: the host path then runs in place). */
    int (*copy_sync)(void *dst, const void *src, size_t bytes, char *err, size_t errlen);

    /* Frees the caches, pools and idle streams; sessions must be ended.  Errors
     * are ignored (CUDA may already be shutting down). */
    void (*finalize)(void);

    /* Version 2: the shared-memory arena.  sync waits until everything
     * enqueued on the session's stream has run (0, or -1 with the session's
     * error).  host_register pins host memory (the arena) so copies to and
     * from it are asynchronous DMA, and maps it for kernels: 0 when kernels
     * can use the host address as is, 1 when it is pinned for copies only
     * (err says why), -1 when not pinned (err).  host_unregister undoes it. */
    int (*sync)(llrdma_cuda_session_t *s);
    int (*host_register)(void *p, size_t bytes, char *err, size_t errlen);
    void (*host_unregister)(void *p);
    /* A nonzero key naming the physical GPU `device` (an ordinal of this
     * process; < 0: the current device), equal in every process that uses it
     * whatever its CUDA_VISIBLE_DEVICES: a hash of the PCI bus id.  0 or -1
     * with err. */
    int (*device_key)(int device, unsigned long long *key, char *err, size_t errlen);

    /* Version 3: the GPU peer path (CUDA IPC, llrdma_core/llrdma_peer.h).
     * device_info: the PCI bus id (cudaDeviceGetPCIBusId) and the 16-byte
     * UUID of `device` (< 0: current).  peer_access: 1 when `device` can
     * access the GPU with PCI bus id `bus_id` (the same GPU counts), 0 when
     * cudaDeviceCanAccessPeer says no, 2 when that GPU is not visible in
     * this process (IPC may still work), -1 on error. */
    int (*device_info)(int device, char *bus_id, size_t bus_len, unsigned char *uuid, char *err,
                       size_t errlen);
    int (*peer_access)(int device, const char *bus_id, char *err, size_t errlen);
    /* The allocation holding device pointer p: its identity (the driver's
     * buffer id, never reused in this process), start and length. */
    int (*mem_range)(const void *p, unsigned long long *id, void **base, size_t *size, char *err,
                     size_t errlen);
    /* cudaIpcGetMemHandle of an allocation's start, into 64 bytes at handle;
     * ipc_open maps another process's handle on the current device
     * (cudaIpcOpenMemHandle), ipc_close unmaps it. */
    int (*ipc_export)(void *base, void *handle, char *err, size_t errlen);
    int (*ipc_open)(const void *handle, void **mapped, char *err, size_t errlen);
    void (*ipc_close)(void *mapped);
    /* An interprocess event (no timing) on the current device and its
     * 64-byte handle; event_open opens another process's; event_destroy
     * releases either. */
    int (*event_create)(void **ev, void *handle, char *err, size_t errlen);
    int (*event_open)(const void *handle, void **ev, char *err, size_t errlen);
    void (*event_destroy)(void *ev);
    /* Enqueued on the session's stream: for i < count, v = in[0][i] OP
     * in[1][i] ... OP in[n-1][i] (the left fold, llrdma_reduce_local's
     * semantics and bits) and out[q][i] = v for every q < n (n <= 16; any
     * pointer another GPU's, through IPC; out[q] may be in[q]). */
    int (*peer_reduce)(llrdma_cuda_session_t *s, int op, int dtype, const void *const *in,
                       void *const *out, int n, size_t count);
    /* Record `ev` on the session's stream; make the stream wait for the
     * last record of `ev` (another process's, through event_open). */
    int (*event_record)(llrdma_cuda_session_t *s, void *ev);
    int (*stream_wait)(llrdma_cuda_session_t *s, void *ev);

    /* Version 4: device memory that outlives sessions (cudaMalloc on
     * `device`, < 0: current; the caller's device is kept): the GPU-direct
     * inter-node step's scratch, registered with the NIC once and reused. */
    void *(*dev_alloc)(int device, size_t bytes, char *err, size_t errlen);
    void (*dev_free)(void *p);
} llrdma_cuda_api_t;

/* NULL when the library does not implement `version`. */
const llrdma_cuda_api_t *llrdma_cuda_api(int version);

#ifdef __cplusplus
}
#endif
#endif

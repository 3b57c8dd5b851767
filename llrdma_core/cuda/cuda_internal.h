// cuda_internal.h -- shared pieces of libllrdma_cuda.so (not installed).
#ifndef LLRDMA_CUDA_INTERNAL_H
#define LLRDMA_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>

#include <cstddef>

namespace llrdma
{
namespace cuda
{

// Enqueues out[i] = a[i] OP b[i] for i < count on `stream` (op/dtype: the
// LLRDMA_OP_* / LLRDMA_DT_* values of llrdma_allreduce.h), with at most
// max_blocks blocks.  Returns the launch's own status; cudaErrorInvalidValue
// for a pair the host core does not support.
cudaError_t launch_reduce(int op, int dtype, const void *a, const void *b, void *out, size_t count,
                          cudaStream_t stream, int max_blocks);

// Bytes of one element (the C struct for pair types); 0 if unknown.
size_t dtype_size(int dtype);

// The peer path (peer.cu; llrdma_cuda.h, version 3).
constexpr int kPeerMax = 16;
cudaError_t launch_peer_reduce(int op, int dtype, const void *const *in, void *const *out, int n,
                               size_t count, cudaStream_t stream, int max_blocks);
int peer_device_info(int device, char *bus_id, size_t bus_len, unsigned char *uuid, char *err,
                     size_t errlen);
int peer_access(int device, const char *bus_id, char *err, size_t errlen);
int peer_mem_range(const void *p, unsigned long long *id, void **base, size_t *size, char *err,
                   size_t errlen);
int peer_ipc_export(void *base, void *handle, char *err, size_t errlen);
int peer_ipc_open(const void *handle, void **mapped, char *err, size_t errlen);
void peer_ipc_close(void *mapped);
int peer_event_create(void **ev, void *handle, char *err, size_t errlen);
int peer_event_open(const void *handle, void **ev, char *err, size_t errlen);
void peer_event_destroy(void *ev);

} // namespace cuda
} // namespace llrdma

#endif

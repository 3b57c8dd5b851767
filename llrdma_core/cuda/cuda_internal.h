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

} // namespace cuda
} // namespace llrdma

#endif

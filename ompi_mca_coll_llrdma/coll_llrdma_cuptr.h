/*
 * Where a buffer lives, asked per call of the CUDA driver through a lazily
 * dlopen()ed libcuda.so.1 (no CUDA header, no link dependency, no cuInit):
 * in a process that never initialised CUDA the driver answers "not
 * initialised" and every buffer is host memory; without libcuda it is host
 * memory too.  Nothing is cached per pointer: buffers come and go.  No Open MPI
 * header either, so the unit tests link this file alone.
 */
#ifndef COLL_LLRDMA_CUPTR_H
#define COLL_LLRDMA_CUPTR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    LLRDMA_MEM_HOST = 0,    /* pageable, cudaHostRegister'ed or cudaMallocHost'ed */
    LLRDMA_MEM_DEVICE = 1,  /* cudaMalloc (device ordinal known) */
    LLRDMA_MEM_MANAGED = 2, /* cudaMallocManaged / unified */
} llrdma_mem_kind_t;

/* cuPointerGetAttributes(numAttributes, attributes, data, ptr) as the driver
 * exports it (CUresult and the enums are ints, CUdeviceptr 64 bits). */
typedef int (*llrdma_cuptr_getattrs_fn)(unsigned int n, int *attrs, void **data,
                                        unsigned long long ptr);

typedef struct {
    void *lib;
    llrdma_cuptr_getattrs_fn getattrs; /* NULL: no driver, all host */
} llrdma_cuptr_t;

/* libname NULL: "libcuda.so.1".  Absent library or symbol: all host. */
void llrdma_cuptr_open(llrdma_cuptr_t *d, const char *libname);
/* Tests: classify with this function instead of the driver's. */
void llrdma_cuptr_use(llrdma_cuptr_t *d, llrdma_cuptr_getattrs_fn fn);
void llrdma_cuptr_close(llrdma_cuptr_t *d);

/* Kind of the memory at p; *device: the ordinal for LLRDMA_MEM_DEVICE, -1
 * otherwise (managed memory is used from the caller's current device). */
llrdma_mem_kind_t llrdma_cuptr_kind(const llrdma_cuptr_t *d, const void *p, int *device);

#ifdef __cplusplus
}
#endif
#endif

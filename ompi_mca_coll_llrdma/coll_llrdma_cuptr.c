/*
 * Buffer classification through the CUDA driver (see coll_llrdma_cuptr.h).
 */
#include "coll_llrdma_cuptr.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

/* From cuda.h (CUDA 4 onwards; values are ABI). */
enum {
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEMORYTYPE_UNIFIED = 4,
};

void llrdma_cuptr_open(llrdma_cuptr_t *d, const char *libname)
{
    d->lib = dlopen(NULL != libname ? libname : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    d->getattrs = NULL;
    if (NULL != d->lib) {
        *(void **)&d->getattrs = dlsym(d->lib, "cuPointerGetAttributes");
    }
}

void llrdma_cuptr_use(llrdma_cuptr_t *d, llrdma_cuptr_getattrs_fn fn)
{
    d->lib = NULL;
    d->getattrs = fn;
}

void llrdma_cuptr_close(llrdma_cuptr_t *d)
{
    if (NULL != d->lib) {
        dlclose(d->lib);
    }
    d->lib = NULL;
    d->getattrs = NULL;
}

llrdma_mem_kind_t llrdma_cuptr_kind(const llrdma_cuptr_t *d, const void *p, int *device)
{
    int attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    /* 8 zeroed bytes each: the driver writes 4 (enum, int) or fewer (bool). */
    uint64_t v[3] = {0, 0, 0};
    void *data[3] = {&v[0], &v[1], &v[2]};
    uint32_t type, managed;
    int32_t ordinal;

    *device = -1;
    if (NULL == d->getattrs || NULL == p) {
        return LLRDMA_MEM_HOST;
    }
    /* Any error (CUDA_ERROR_NOT_INITIALIZED in a process that never used the
     * GPU, CUDA_ERROR_DEINITIALIZED at exit) means the GPU cannot hold it. */
    if (0 != d->getattrs(3, attrs, data, (unsigned long long)(uintptr_t)p)) {
        return LLRDMA_MEM_HOST;
    }
    type = (uint32_t)v[0];
    managed = (uint32_t)v[1];
    ordinal = (int32_t)(uint32_t)v[2];
    if (0 != managed || CU_MEMORYTYPE_UNIFIED == type) {
        return LLRDMA_MEM_MANAGED;
    }
    if (CU_MEMORYTYPE_DEVICE == type) {
        *device = ordinal >= 0 ? ordinal : -1;
        return LLRDMA_MEM_DEVICE;
    }
    return LLRDMA_MEM_HOST; /* host-registered, cudaMallocHost, or unknown to CUDA */
}

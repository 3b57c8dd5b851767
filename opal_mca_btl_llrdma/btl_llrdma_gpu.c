/*
 * btl/llrdma GPU memory registration (btl_llrdma_gpu_rdma; docs/btl-design.md
 * "GPU memory"): the per-device probe at module creation, and registering
 * device memory by dma-buf or peermem.
 *
 * libcuda is loaded (dlopen) only when a module has a GPU mode and only at
 * the first registration, and CUDA is never initialised here: a process
 * that never used the GPU gets CUDA_ERROR_NOT_INITIALIZED from
 * cuPointerGetAttributes, which classifies every buffer as host memory.
 */
#include "opal_config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal/util/output.h"

#include "btl_llrdma.h"
#include "btl_llrdma_gpu.h"
#include "btl_llrdma_rdma.h"

/* From cuda.h (values are ABI). */
enum {
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
    CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1,
};

mca_btl_llrdma_cuda_t mca_btl_llrdma_cuda;
static void *cuda_lib;

/* dlopen libcuda once; without it (or its symbols) every buffer is host memory. */
static int cuda_load(void)
{
    mca_btl_llrdma_cuda_t *d = &mca_btl_llrdma_cuda;
    if (d->loaded) {
        return NULL != d->pointer_attrs;
    }
    d->loaded = 1;
    cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (NULL == cuda_lib) {
        return 0;
    }
    *(void **)&d->pointer_attrs = dlsym(cuda_lib, "cuPointerGetAttributes");
    *(void **)&d->range_handle = dlsym(cuda_lib, "cuMemGetHandleForAddressRange");
    return NULL != d->pointer_attrs;
}

int mca_btl_llrdma_gpu_bus_id(char *buf, size_t len)
{
    /* RTLD_NOLOAD: a process that has not loaded libcuda has no context, and
     * MPI_Init must not load (let alone initialise) CUDA for it. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    int (*get_ctx)(void **), (*get_dev)(int *), (*bus_id)(char *, int, int);
    void *ctx = NULL;
    int dev = -1, rc = -1;

    if (NULL == lib) {
        return -1;
    }
    *(void **)&get_ctx = dlsym(lib, "cuCtxGetCurrent");
    *(void **)&get_dev = dlsym(lib, "cuCtxGetDevice");
    *(void **)&bus_id = dlsym(lib, "cuDeviceGetPCIBusId");
    if (NULL != get_ctx && NULL != get_dev && NULL != bus_id && 0 == get_ctx(&ctx) && NULL != ctx &&
        0 == get_dev(&dev) && 0 == bus_id(buf, (int)len, dev)) {
        rc = 0;
    }
    dlclose(lib);
    return rc;
}

void mca_btl_llrdma_cuda_unload(void)
{
    if (NULL != cuda_lib) {
        dlclose(cuda_lib);
        cuda_lib = NULL;
    }
    memset(&mca_btl_llrdma_cuda, 0, sizeof(mca_btl_llrdma_cuda));
}

int mca_btl_llrdma_gpu_classify(const void *p, uint64_t *buffer_id)
{
    int attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_BUFFER_ID};
    uint64_t v[2] = {0, 0};
    void *data[2] = {&v[0], &v[1]};

    *buffer_id = 0;
    if (!cuda_load() || NULL == p) {
        return 0;
    }
    /* Any error (not initialised, not a CUDA pointer) means host memory. */
    if (0 != mca_btl_llrdma_cuda.pointer_attrs(2, attrs, data, (unsigned long long)(uintptr_t)p) ||
        CU_MEMORYTYPE_DEVICE != (uint32_t)v[0]) {
        return 0;
    }
    *buffer_id = v[1];
    return 1;
}

/* --------------------------------------------------------------- probe */

static int peermem_loaded_sysfs(void)
{
    /* The files NCCL and UCX look at. */
    return 0 == access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) ||
           0 == access("/sys/module/nvidia_peermem/version", F_OK) ||
           0 == access("/sys/module/nv_peer_mem/version", F_OK);
}

int mca_btl_llrdma_gpu_probe(mca_btl_llrdma_module_t *m)
{
    const char *text = mca_btl_llrdma_component.gpu_rdma;
    llrdma_gpu_knob_t knob;
    llrdma_gpu_probe_t p = {.have_device = 1, .dmabuf_errno = -1, .peermem = 0};
    int rc;

    m->gpu_mode = LLRDMA_GPU_NONE;
    m->gpu_error = 0;
    if (LLRDMA_OK != llrdma_gpu_knob_parse(text, &knob)) {
        knob = LLRDMA_GPU_KNOB_OFF; /* the component stops MPI_Init with the value */
    }
    if (LLRDMA_GPU_KNOB_OFF != knob) {
        /* fd -1, as NCCL and UCX probe: EBADF means the provider has dma-buf MRs. */
        struct ibv_mr *mr;
        errno = 0;
        mr = mca_btl_llrdma_verbs.reg_dmabuf_mr(m->pd, 0, 0, 0, -1, 0);
        if (NULL != mr) {
            (void)mca_btl_llrdma_verbs.dereg_mr(mr);
            p.dmabuf_errno = 0;
        } else {
            p.dmabuf_errno = ENOSYS == errno ? -1 : errno;
        }
        p.peermem = mca_btl_llrdma_verbs.peermem_loaded();
    }
    rc = llrdma_gpu_rdma_choose(knob, &p, &m->gpu_mode, m->gpu_report, sizeof(m->gpu_report));
    if (LLRDMA_ERR_NOT_FOUND == rc) {
        m->gpu_error = 1; /* forced and unavailable: MPI_Init stops (component) */
    }
    opal_output_verbose(10, mca_btl_llrdma_component.output, "btl:llrdma: %s:%d gpu_rdma: %s%s",
                        m->port.dev, m->port.port, m->gpu_error ? "unavailable: " : "",
                        m->gpu_report);
    return rc;
}

int mca_btl_llrdma_peermem_loaded_real(void)
{
    /* Tests only (tests/softroce/test-hier-gpu.sh): Soft-RoCE with the fake
     * GPU, whose "device memory" a plain ibv_reg_mr can pin, as peermem's. */
    const char *t = getenv("LLRDMA_TEST_PEERMEM");
    if (NULL != t && 0 == strcmp(t, "1")) {
        return 1;
    }
    return peermem_loaded_sysfs();
}

/* -------------------------------------------------------- registration */

struct ibv_mr *mca_btl_llrdma_gpu_reg(mca_btl_llrdma_module_t *m, void *base, size_t size,
                                      int access)
{
    struct ibv_mr *mr = NULL;
    int fd = -1;

    if (LLRDMA_GPU_PEERMEM == m->gpu_mode) {
        /* nvidia_peermem pins the pages behind the device address. */
        return mca_btl_llrdma_verbs.reg_mr(m->pd, base, size, access);
    }
    if (LLRDMA_GPU_DMABUF != m->gpu_mode || !cuda_load() ||
        NULL == mca_btl_llrdma_cuda.range_handle) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    /* grdma hands page-aligned ranges: export exactly that range, register
     * it from offset 0 with the device address as iova. */
    if (0 != mca_btl_llrdma_cuda.range_handle(&fd, (unsigned long long)(uintptr_t)base, size,
                                              CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ||
        fd < 0) {
        opal_output_verbose(10, mca_btl_llrdma_component.output,
                            "btl:llrdma: cuMemGetHandleForAddressRange(%p, %zu) failed", base,
                            size);
        errno = EINVAL;
        return NULL;
    }
    mr = mca_btl_llrdma_verbs.reg_dmabuf_mr(m->pd, 0, size, (uint64_t)(uintptr_t)base, fd, access);
    /* The MR holds its own reference to the dma-buf. */
    (void)close(fd);
    return mr;
}

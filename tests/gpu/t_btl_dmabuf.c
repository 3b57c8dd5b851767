/*
 * btl/llrdma's GPU memory registration against the real CUDA driver: the
 * CUDA half of the RDMA issue, run on the GPU machine.  No NIC here can read
 * GPU memory, so the fake device (tests/unit/fake_verbs.c) stands in for it;
 * it checks every dma-buf MR against the size of the fd the driver exported
 * (as the kernel does) and refuses a device address in ibv_reg_mr (as a NIC
 * without nvidia_peermem does).  Everything else is real: libcuda loaded by
 * the BTL, cuPointerGetAttributes, cuMemGetHandleForAddressRange and the
 * dma-buf fds it returns, Open MPI's grdma cache.
 *
 * Checked: the driver's export contract the BTL relies on (page-aligned
 * ranges export, the fd's size is the range); registration through
 * btl_register_mem at page-aligned and unaligned offsets and at the end of
 * an allocation; cache hits; a freed and reallocated buffer at the same
 * address (new buffer id) gets a new registration; small neighbouring
 * allocations in one page; host memory next to it takes the ordinary path;
 * mode none refuses a device address cleanly (callers stage); the GPU-direct
 * inter-node step's registrations of a reused vector and scratch, made once.
 *
 * Exit 77 without libcuda or a GPU, 1 on a failed check.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "fake_btl.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btl_llrdma_gpu.h"
#include "btl_llrdma_rdma.h"

#define RD MCA_BTL_REG_FLAG_REMOTE_READ
#define MIB (1024ull * 1024ull)

typedef unsigned long long dptr_t;

/* The driver entry points this test calls itself (allocations, the
 * attribute, direct exports); the BTL loads its own. */
static struct {
    int (*init)(unsigned int);
    int (*count)(int *);
    int (*attr)(int *, int, int);
    int (*retain)(void **, int);
    int (*release)(int);
    int (*set)(void *);
    int (*alloc)(dptr_t *, size_t);
    int (*free)(dptr_t);
    int (*export)(void *, dptr_t, size_t, int, unsigned long long);
} cu;

static int load_cuda(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (NULL == h) {
        return 0;
    }
    *(void **)&cu.init = dlsym(h, "cuInit");
    *(void **)&cu.count = dlsym(h, "cuDeviceGetCount");
    *(void **)&cu.attr = dlsym(h, "cuDeviceGetAttribute");
    *(void **)&cu.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&cu.release = dlsym(h, "cuDevicePrimaryCtxRelease_v2");
    *(void **)&cu.set = dlsym(h, "cuCtxSetCurrent");
    *(void **)&cu.alloc = dlsym(h, "cuMemAlloc_v2");
    *(void **)&cu.free = dlsym(h, "cuMemFree_v2");
    *(void **)&cu.export = dlsym(h, "cuMemGetHandleForAddressRange");
    return cu.init && cu.count && cu.attr && cu.retain && cu.release && cu.set && cu.alloc &&
           cu.free;
}

static mca_btl_base_module_t *B(int i)
{
    return &fw[i].m->super;
}

static mca_btl_base_registration_handle_t *reg(dptr_t p, size_t n)
{
    fw_as(0);
    return B(0)->btl_register_mem(B(0), fw[0].ep[1], (void *)(uintptr_t)p, n, RD);
}

static void dereg(mca_btl_base_registration_handle_t *h)
{
    if (NULL != h) {
        fw_as(0);
        CHECK(OPAL_SUCCESS == B(0)->btl_deregister_mem(B(0), h));
    }
}

/* The driver's export of [p, p + n): the fd's size, or -(CUresult). */
static long long export_size(dptr_t p, size_t n)
{
    int fd = -1, rc;
    off_t end;
    if (NULL == cu.export) {
        return -1000;
    }
    rc = cu.export(&fd, p, n, 1 /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */, 0);
    if (0 != rc || fd < 0) {
        return -(long long)(rc ? rc : 999);
    }
    end = lseek(fd, 0, SEEK_END);
    close(fd);
    return (long long)end;
}

static void world(const char *knob, int dmabuf)
{
    fw_begin();
    /* fw_begin pretends there is no libcuda: load the real one. */
    mca_btl_llrdma_cuda_unload();
    mca_btl_llrdma_component.gpu_rdma = (char *)knob;
    fake.dmabuf = dmabuf;
    fake.peermem = 0;
    CHECK(0 == fw_add(8192, 0, 0) && 1 == fw_add(8192, 0, 0));
    fw_mesh();
}

int main(int argc, char **argv)
{
    const long page = sysconf(_SC_PAGESIZE);
    int ndev = 0, dmabuf_ok = 0, mrs;
    void *ctx = NULL;
    dptr_t big = 0, small_a = 0, small_b = 0, again = 0;
    uint64_t id = 0, id2 = 0;
    mca_btl_base_registration_handle_t *h, *h2, *ha, *hb;
    char hostbuf[256];
    long long sz;

    if (!load_cuda()) {
        printf("SKIP: no libcuda.so.1\n");
        return 77;
    }
    if (0 != fw_init(&argc, &argv)) {
        return 2;
    }
    /* Before anyone initialised CUDA, the BTL's classification says host
     * memory (it never calls cuInit itself). */
    CHECK(0 == mca_btl_llrdma_gpu_classify(hostbuf, &id));
    mca_btl_llrdma_cuda_unload();
    if (0 != cu.init(0) || 0 != cu.count(&ndev) || ndev < 1) {
        printf("SKIP: no GPU (cuInit or cuDeviceGetCount)\n");
        fw_fini();
        return 77;
    }
    CHECK(0 == cu.retain(&ctx, 0) && 0 == cu.set(ctx));
    CHECK(0 == cu.attr(&dmabuf_ok, 124 /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */, 0));
    printf("# GPU 0: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = %d, page size %ld\n", dmabuf_ok, page);

    /* The driver's contract the BTL relies on. */
    CHECK(0 == cu.alloc(&big, 64 * MIB));
    printf("# cudaMalloc(64 MB) at %#llx\n", big);
    sz = export_size(big, 64 * MIB);
    printf("# export whole allocation: %lld\n", sz);
    CHECK(dmabuf_ok ? sz == (long long)(64 * MIB) : sz < 0);
    sz = export_size(big + (dptr_t)page, 2 * (size_t)page);
    printf("# export 2 pages at offset 1 page: %lld\n", sz);
    CHECK(dmabuf_ok ? sz == 2 * page : sz < 0);
    sz = export_size(big + 100, (size_t)page);
    printf("# export at an unaligned offset (the BTL never asks): %lld\n", sz);
    CHECK(sz < 0);

    /* Through btl_register_mem, in dma-buf mode. */
    world("dmabuf", 1);
    CHECK(1 == mca_btl_llrdma_gpu_classify((void *)(uintptr_t)(big + 100), &id) && 0 != id);
    h = reg(big + 100, 5000);
    printf("# register [big+100, +5000): %s, dma-buf of %llu bytes (%s), iova %#llx\n",
           h ? "ok" : "refused", (unsigned long long)fake.last_dmabuf_size, fake.last_dmabuf_link,
           (unsigned long long)fake.last_iova);
    if (dmabuf_ok) {
        /* grdma hands the page-aligned range: exported exactly, device
         * address as iova, and the fd is a real dma-buf. */
        CHECK(NULL != h && 1 == fake.ndmabuf_mrs);
        CHECK(fake.last_iova == big && fake.last_dmabuf_size == 2 * (uint64_t)page);
        CHECK(NULL != strstr(fake.last_dmabuf_link, "dmabuf"));
        /* Cached: a hit, no new export. */
        h2 = reg(big + 200, 100);
        CHECK(h2 == h && 1 == fake.ndmabuf_mrs);
        dereg(h2);
        /* The allocation's last bytes (the range ends at its end). */
        h2 = reg(big + 64 * MIB - 100, 100);
        CHECK(NULL != h2 && 2 == fake.ndmabuf_mrs &&
              fake.last_iova == big + 64 * MIB - (dptr_t)page);
        dereg(h2);
        /* All of it. */
        h2 = reg(big, 64 * MIB);
        CHECK(NULL != h2 && fake.last_dmabuf_size >= 64 * MIB);
        dereg(h2);
    } else {
        CHECK(NULL == h); /* the driver cannot export: refused cleanly */
    }
    dereg(h);

    /* Freed and allocated again: the same address comes back with a new
     * buffer id; the cached registration is stale and replaced. */
    mrs = fake.ndmabuf_mrs;
    CHECK(0 == cu.free(big));
    CHECK(0 == cu.alloc(&again, 64 * MIB));
    if (again == big) {
        CHECK(1 == mca_btl_llrdma_gpu_classify((void *)(uintptr_t)(big + 100), &id2));
        CHECK(id2 != id);
        h = reg(big + 100, 5000);
        CHECK(dmabuf_ok ? NULL != h && fake.ndmabuf_mrs == mrs + 1 : NULL == h);
        dereg(h);
        printf("# reallocated at the same address: buffer id %llu -> %llu, registered again\n",
               (unsigned long long)id, (unsigned long long)id2);
    } else {
        printf("# NOTE: reallocation moved (%#llx -> %#llx): stale-handle case not exercised\n",
               big, again);
    }
    big = again;

    /* Two small neighbouring allocations: grdma's page-aligned range runs
     * past each one's end (the edge case of page rounding). */
    CHECK(0 == cu.alloc(&small_a, 1000) && 0 == cu.alloc(&small_b, 1000));
    printf("# small allocations at %#llx and %#llx\n", small_a, small_b);
    ha = reg(small_a, 1000);
    printf("# register small A: %s (dma-buf %llu bytes at %#llx)\n", ha ? "ok" : "refused",
           (unsigned long long)fake.last_dmabuf_size, (unsigned long long)fake.last_iova);
    hb = reg(small_b, 1000);
    printf("# register small B: %s (dma-buf %llu bytes at %#llx)\n", hb ? "ok" : "refused",
           (unsigned long long)fake.last_dmabuf_size, (unsigned long long)fake.last_iova);
    if (dmabuf_ok) {
        CHECK(NULL != ha && NULL != hb);
    }
    dereg(ha);
    dereg(hb);

    /* The GPU-direct inter-node step's registrations (coll_llrdma_btlnet.c
     * over the step's buffers, docs/allreduce.md): per call a slice of the
     * receive vector and halves of the step's scratch (cudaMalloc'd once, as
     * libllrdma_cuda's dev_alloc does), with local and remote write, each
     * deregistered when its message is done.  The first call exports and
     * registers; later calls find every range in the cache. */
    {
        dptr_t vec = 0, scr = 0;
        const size_t n = 8 * MIB;
        const int w = MCA_BTL_REG_FLAG_LOCAL_WRITE | MCA_BTL_REG_FLAG_REMOTE_WRITE;
        int first = 0;
        CHECK(0 == cu.alloc(&vec, n) && 0 == cu.alloc(&scr, n / 2));
        for (int call = 0; call < 3 && dmabuf_ok; ++call) {
            mca_btl_base_registration_handle_t *hs[3];
            int before = fake.ndmabuf_mrs;
            dptr_t at[3] = {vec + n / 2 + 8, scr, scr + n / 4};
            size_t len[3] = {n / 2 - 8, n / 4, n / 4};
            fw_as(0);
            for (int k = 0; k < 3; ++k) {
                hs[k] =
                    B(0)->btl_register_mem(B(0), fw[0].ep[1], (void *)(uintptr_t)at[k], len[k], w);
                CHECK(NULL != hs[k]);
            }
            if (0 == call) {
                first = fake.ndmabuf_mrs - before;
                CHECK(first >= 2);
            } else {
                CHECK(fake.ndmabuf_mrs == before); /* registered once, reused */
            }
            for (int k = 0; k < 3; ++k) {
                dereg(hs[k]);
            }
        }
        printf("# the GPU-direct step's buffers: %d dma-buf registrations on the first call, "
               "none after\n",
               first);
        CHECK(0 == cu.free(vec) && 0 == cu.free(scr));
    }

    /* Host memory in the same job: the ordinary path, no export. */
    mrs = fake.ndmabuf_mrs;
    h = reg((dptr_t)(uintptr_t)hostbuf, sizeof(hostbuf));
    CHECK(NULL != h && fake.ndmabuf_mrs == mrs);
    dereg(h);
    fw_end(0);

    /* Mode none (no dma-buf MRs, no peermem): a device address is refused
     * by the device, cleanly; coll/llrdma stages through host memory. */
    world("auto", 0);
    CHECK(NULL == reg(big, 4096));
    fw_end(0);

    CHECK(0 == cu.free(big) && 0 == cu.free(small_a) && 0 == cu.free(small_b));
    (void)cu.release(0);
    mca_btl_llrdma_cuda_unload();
    fw_fini();
    printf("%s: t_btl_dmabuf: %d checks, %d failed\n", fw_failures ? "FAIL" : "PASS", fw_checks,
           fw_failures);
    return fw_failures ? 1 : 0;
}

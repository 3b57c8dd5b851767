/*
 * btl/llrdma GPU memory registration (btl_llrdma_gpu.c): the probe per
 * device, the CUDA driver entry points it needs (loaded lazily, replaceable
 * by tests) and the registration of device memory.
 */
#ifndef MCA_BTL_LLRDMA_GPU_H
#define MCA_BTL_LLRDMA_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "btl_llrdma_verbs.h"

struct mca_btl_llrdma_module_t;

/* The few CUDA driver calls, as libcuda exports them (CUresult and the enums
 * are ints, CUdeviceptr 64 bits).  Filled by dlopen at the first use; a test
 * sets `loaded` and its own functions. */
typedef struct {
    int loaded;
    int (*pointer_attrs)(unsigned int n, int *attrs, void **data, unsigned long long ptr);
    int (*range_handle)(int *handle, unsigned long long dptr, size_t size, int type,
                        unsigned long long flags);
} mca_btl_llrdma_cuda_t;
extern mca_btl_llrdma_cuda_t mca_btl_llrdma_cuda;
void mca_btl_llrdma_cuda_unload(void);

/* 1 when p is device memory (its allocation's buffer id in *buffer_id: a
 * freed and reallocated buffer at the same address gets a new one); 0 for
 * host memory, no libcuda, or CUDA not initialised. */
int mca_btl_llrdma_gpu_classify(const void *p, uint64_t *buffer_id);

/* The PCI bus id ("0000:1B:00.0") of the GPU of the CUDA context current on
 * this thread, for the device policy (docs/btl-design.md "Devices by
 * locality"); -1 when libcuda is not loaded yet or no context is current. */
int mca_btl_llrdma_gpu_bus_id(char *buf, size_t len);

/* Probe the module's device (dma-buf MRs, peermem) and choose its mode from
 * btl_llrdma_gpu_rdma: fills m->gpu_mode, m->gpu_report, m->gpu_error (a
 * forced mode the device lacks).  Returns llrdma_gpu_rdma_choose's code. */
int mca_btl_llrdma_gpu_probe(struct mca_btl_llrdma_module_t *m);

/* Register [base, base + size) of device memory the module's way; NULL
 * (errno set) when it cannot. */
struct ibv_mr *mca_btl_llrdma_gpu_reg(struct mca_btl_llrdma_module_t *m, void *base, size_t size,
                                      int access);

/* The seam's peermem_loaded entry for real systems (sysfs). */
int mca_btl_llrdma_peermem_loaded_real(void);

#endif

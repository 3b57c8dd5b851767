/*
 * The names that differ between the Open MPI series llrdma builds against
 * (4.1.x and 5.0.x), in one place.  Include it after opal_config.h (or
 * ompi_config.h), which says the series (OMPI_MAJOR_VERSION).  One source
 * tree, one build per series: the component ABIs differ (BTL 3.1.0 vs 3.3.0,
 * coll 2.0.0 vs 2.4.0), and so do the libopen-pal sonames.
 *
 * Only names and thin wrappers over each series' public-to-components API
 * live here; nothing of Open MPI's is copied.  docs/design.md ("Open MPI 5")
 * lists the behaviour differences.
 */
#ifndef LLRDMA_OMPI_COMPAT_H
#define LLRDMA_OMPI_COMPAT_H

#include "opal_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opal/mca/btl/btl.h"
#include "opal/util/info.h"
#include "opal/util/proc.h"

#if !defined(OMPI_MAJOR_VERSION) || (OMPI_MAJOR_VERSION != 4 && OMPI_MAJOR_VERSION != 5)
#error "llrdma builds against Open MPI 4.1.x or 5.0.x"
#endif

#define LLRDMA_OMPI5 (OMPI_MAJOR_VERSION >= 5)

#if LLRDMA_OMPI5
/* 5.0: the opal/mca/pmix framework is gone; components call PMIx directly. */
#include "opal/mca/pmix/pmix-internal.h"
#include "opal/mca/threads/mutex.h"
#else
#include "opal/mca/pmix/pmix.h"
#include "opal/threads/mutex.h"
#endif

/* The exported component structs.  5.0 dropped OPAL_MODULE_DECLSPEC and
 * OMPI_MODULE_DECLSPEC; the components are built with -fvisibility=hidden. */
#if LLRDMA_OMPI5
#define LLRDMA_MODULE_DECLSPEC __attribute__((visibility("default")))
#else
#define LLRDMA_MODULE_DECLSPEC OPAL_MODULE_DECLSPEC
#endif

/* Scope of what a component publishes for every process of the job. */
#if LLRDMA_OMPI5
#define LLRDMA_PMIX_GLOBAL PMIX_GLOBAL
#else
#define LLRDMA_PMIX_GLOBAL OPAL_PMIX_GLOBAL
#endif

/* ------------------------------------------------------------- coll */
/* Only a component of exactly the running series' coll version is
 * selected in 5.0 (coll_base_comm_select checks it). */
#if LLRDMA_OMPI5
#define LLRDMA_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_4_0
#define llrdma_coll_base_component_t mca_coll_base_component_2_4_0_t
/* The communicator's id on this process (5.0 also has a global one). */
#define LLRDMA_COMM_CID(comm) ompi_comm_get_local_cid(comm)
#else
#define LLRDMA_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_0_0
#define llrdma_coll_base_component_t mca_coll_base_component_2_0_0_t
#define LLRDMA_COMM_CID(comm) ompi_comm_get_cid(comm)
#endif

/* The value of info key `key` into buf (NUL-terminated, truncated to fit);
 * *flag says whether the key is set.  5.0 hands out a counted string. */
static inline int llrdma_info_get(opal_info_t *info, const char *key, char *buf, size_t len,
                                  int *flag)
{
#if LLRDMA_OMPI5
    opal_cstring_t *v = NULL;
    int rc = opal_info_get(info, key, &v, flag);
    if (OPAL_SUCCESS == rc && *flag && NULL != v) {
        snprintf(buf, len, "%s", v->string);
    }
    if (NULL != v) {
        OBJ_RELEASE(v);
    }
    return rc;
#else
    return opal_info_get(info, key, (int)len - 1, buf, flag);
#endif
}

/* ------------------------------------------------------------- btl */

#if LLRDMA_OMPI5
#define LLRDMA_BTL_BASE_VERSION MCA_BTL_BASE_VERSION_3_3_0
/* How btl/llrdma marks a GPU buffer's registration in grdma, for its own
 * registration callback.  Not 5.0's MCA_RCACHE_FLAGS_ACCELERATOR_MEM: with
 * it grdma asks the accelerator framework for the allocation's bounds and
 * aborts when that cannot answer, as the null component (every Open MPI
 * built without CUDA) never can.  llrdma classifies memory itself (its own
 * libcuda), so it uses the flag bit rcache reserves for the caller.  4.1's
 * CUDA_GPU_MEM is only read by CUDA-enabled builds. */
#define LLRDMA_RCACHE_FLAGS_GPU_MEM MCA_RCACHE_FLAGS_RESV0
#else
#define LLRDMA_BTL_BASE_VERSION MCA_BTL_BASE_VERSION_3_1_0
#define LLRDMA_RCACHE_FLAGS_GPU_MEM MCA_RCACHE_FLAGS_CUDA_GPU_MEM
#endif

/* Receive upcalls (ob1's active-message callbacks).  4.1 passes the tag,
 * the whole descriptor and the callback data; 5.0 one read-only receive
 * descriptor holding endpoint, segments, tag and callback data. */

/* Call the callback registered for `tag` with one received segment list. */
static inline void llrdma_btl_upcall(struct mca_btl_base_module_t *btl,
                                     const mca_btl_active_message_callback_t *reg,
                                     mca_btl_base_tag_t tag, struct mca_btl_base_endpoint_t *ep,
                                     mca_btl_base_descriptor_t *des)
{
#if LLRDMA_OMPI5
    const mca_btl_base_receive_descriptor_t rd = {.endpoint = ep,
                                                  .des_segments = des->des_segments,
                                                  .des_segment_count = des->des_segment_count,
                                                  .tag = tag,
                                                  .cbdata = reg->cbdata};
    reg->cbfunc(btl, &rd);
#else
    (void)ep;
    reg->cbfunc(btl, tag, des, reg->cbdata);
#endif
}

/* LLRDMA_BTL_RECV_ADAPTER(name, fn) defines `name`, a receive callback of
 * this series' signature, which calls
 *     fn(btl, tag, const mca_btl_base_segment_t *segs, size_t nsegs, cbdata). */
#if LLRDMA_OMPI5
#define LLRDMA_BTL_RECV_ADAPTER(name, fn)                                                          \
    static void name(struct mca_btl_base_module_t *btl,                                            \
                     const mca_btl_base_receive_descriptor_t *rd)                                  \
    {                                                                                              \
        fn(btl, rd->tag, rd->des_segments, rd->des_segment_count, rd->cbdata);                     \
    }
#else
#define LLRDMA_BTL_RECV_ADAPTER(name, fn)                                                          \
    static void name(struct mca_btl_base_module_t *btl, mca_btl_base_tag_t tag,                    \
                     mca_btl_base_descriptor_t *des, void *cbdata)                                 \
    {                                                                                              \
        fn(btl, tag, des->des_segments, des->des_segment_count, cbdata);                           \
    }
#endif

/* The host name of a peer process for a message, "?" when not known.  4.1
 * keeps it in the proc; 5.0 hands out a copy (possibly looked up through
 * PMIx), copied into buf here. */
static inline const char *llrdma_proc_hostname(const opal_proc_t *proc, char *buf, size_t len)
{
#if LLRDMA_OMPI5
    char *h = NULL != opal_get_proc_hostname ? opal_get_proc_hostname(proc) : NULL;
    snprintf(buf, len, "%s", NULL != h ? h : "?");
    free(h);
    return buf;
#else
    (void)buf;
    (void)len;
    return NULL != proc->proc_hostname ? proc->proc_hostname : "?";
#endif
}

/* ------------------------------------------------------------- modex */
/* The modex outside the BTL's own component record (OPAL_MODEX_SEND/RECV,
 * same in both series): 4.1 goes through the opal_pmix module, whose
 * functions are NULL without a runtime (ompi_info); 5.0 calls PMIx, which
 * says whether it was initialised. */

static inline int llrdma_pmix_ready(void)
{
#if LLRDMA_OMPI5
    return PMIx_Initialized() ? 1 : 0;
#else
    return NULL != opal_pmix.put && NULL != opal_pmix.get;
#endif
}

/* Publish an int64 (globally). */
static inline int llrdma_modex_put_int64(const char *key, int64_t v)
{
    int rc;
    if (!llrdma_pmix_ready()) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
#if LLRDMA_OMPI5
    OPAL_MODEX_SEND_VALUE(rc, PMIX_GLOBAL, key, &v, PMIX_INT64);
    return PMIX_SUCCESS == rc ? OPAL_SUCCESS : OPAL_ERROR;
#else
    /* 4.1's macro stores the key in a non-const field; it is not written. */
    OPAL_MODEX_SEND_VALUE(rc, OPAL_PMIX_GLOBAL, (char *)key, &v, OPAL_INT64);
    return rc;
#endif
}

/* Read an int64 another process may have published; OPAL_SUCCESS if found. */
static inline int llrdma_modex_get_int64(const opal_process_name_t *who, const char *key,
                                         int64_t *v)
{
    int64_t *where = v; /* scalars are unloaded into the caller's storage */
    int rc;
    if (!llrdma_pmix_ready()) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
#if LLRDMA_OMPI5
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, key, who, &where, PMIX_INT64);
    return PMIX_SUCCESS == rc ? OPAL_SUCCESS : OPAL_ERR_NOT_FOUND;
#else
    opal_process_name_t name = *who; /* 4.1's macro takes a non-const name */
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, key, &name, &where, OPAL_INT64);
    return rc;
#endif
}

/* Read a byte object another process may have published (without asking
 * the server for it).  On OPAL_SUCCESS *data (malloc'ed, the caller frees
 * it) holds *size bytes. */
static inline int llrdma_modex_get_bytes(const opal_process_name_t *who, const char *key,
                                         void **data, size_t *size)
{
    int rc;
    *data = NULL;
    *size = 0;
#if LLRDMA_OMPI5
    pmix_proc_t proc;
    pmix_info_t info;
    pmix_value_t *kv = NULL;
    if (!llrdma_pmix_ready()) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    OPAL_PMIX_CONVERT_NAME(&proc, who);
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, NULL, PMIX_BOOL);
    rc = PMIx_Get(&proc, key, &info, 1, &kv);
    PMIX_INFO_DESTRUCT(&info);
    if (PMIX_SUCCESS == rc && NULL != kv && PMIX_BYTE_OBJECT == kv->type &&
        NULL != kv->data.bo.bytes) {
        *data = kv->data.bo.bytes;
        *size = kv->data.bo.size;
        kv->data.bo.bytes = NULL; /* ours now */
        kv->data.bo.size = 0;
    }
    if (NULL != kv) {
        PMIX_VALUE_RELEASE(kv);
    }
    return NULL != *data ? OPAL_SUCCESS : OPAL_ERR_NOT_FOUND;
#else
    opal_byte_object_t *bo = NULL;
    if (!llrdma_pmix_ready()) {
        return OPAL_ERR_NOT_AVAILABLE;
    }
    opal_process_name_t name = *who; /* 4.1's macro takes a non-const name */
    OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, key, &name, &bo, OPAL_BYTE_OBJECT);
    if (OPAL_SUCCESS != rc || NULL == bo) {
        return OPAL_SUCCESS == rc ? OPAL_ERR_NOT_FOUND : rc;
    }
    *data = bo->bytes;
    *size = (size_t)bo->size;
    free(bo);
    return NULL != *data ? OPAL_SUCCESS : OPAL_ERR_NOT_FOUND;
#endif
}

/* Ask the launcher to end the whole job; returns only without a launcher. */
static inline void llrdma_job_abort(const char *detail)
{
#if LLRDMA_OMPI5
    if (PMIx_Initialized()) {
        (void)PMIx_Abort(1, detail, NULL, 0);
    }
#else
    if (NULL != opal_pmix.abort) {
        opal_pmix.abort(1, detail, NULL);
    }
#endif
}

#endif

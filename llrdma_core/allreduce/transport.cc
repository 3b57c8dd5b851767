// transport.cc -- request bookkeeping over the glue's llrdma_ar_comm_t vtable.
//
// The algorithms never hold a request the Transport does not know about, so a
// failure anywhere can cancel and wait everything before the call returns and
// its buffers (user or scratch) go away.
#include "internal.h"

#include <cstring>

namespace llrdma
{
namespace ar
{

void Transport::track(void *req)
{
    live_[nlive_++] = req;
}

void Transport::untrack(void *req)
{
    for (int i = 0; i < nlive_; ++i) {
        if (live_[i] == req) {
            live_[i] = live_[--nlive_];
            return;
        }
    }
}

int Transport::drain()
{
    if (nlive_ > 0) {
        if (c_->cancel) {
            for (int i = 0; i < nlive_; ++i)
                c_->cancel(c_->ctx, live_[i]);
        }
        // Completes and releases them all; its error is already accounted for.
        c_->waitall(c_->ctx, nlive_, live_);
        nlive_ = 0;
    }
    return err_;
}

int Transport::fail(int rc)
{
    if (err_ == LLRDMA_AR_OK)
        err_ = rc;
    drain();
    return err_;
}

int Transport::isend(const void *buf, size_t bytes, int peer, int tag, void **req)
{
    *req = nullptr;
    if (err_ != LLRDMA_AR_OK)
        return err_;
    if (bytes == 0)
        return LLRDMA_AR_OK;
    if (nlive_ == kMaxLive)
        return fail(LLRDMA_AR_ERR_INVALID); // an algorithm bug, not the user's
    void *r = nullptr;
    if (c_->isend(c_->ctx, buf, bytes, peer, tag, &r) != 0)
        return fail(LLRDMA_AR_ERR_TRANSPORT);
    track(r);
    *req = r;
    return LLRDMA_AR_OK;
}

int Transport::irecv(void *buf, size_t bytes, int peer, int tag, void **req)
{
    *req = nullptr;
    if (err_ != LLRDMA_AR_OK)
        return err_;
    if (bytes == 0)
        return LLRDMA_AR_OK;
    if (nlive_ == kMaxLive)
        return fail(LLRDMA_AR_ERR_INVALID);
    void *r = nullptr;
    if (c_->irecv(c_->ctx, buf, bytes, peer, tag, &r) != 0)
        return fail(LLRDMA_AR_ERR_TRANSPORT);
    track(r);
    *req = r;
    return LLRDMA_AR_OK;
}

int Transport::wait(int n, void **reqs)
{
    if (err_ != LLRDMA_AR_OK)
        return err_; // drain() already released them
    void *batch[kMaxLive];
    int m = 0;
    for (int i = 0; i < n; ++i) {
        if (reqs[i] && m < kMaxLive) {
            batch[m++] = reqs[i];
            untrack(reqs[i]);
        }
        reqs[i] = nullptr;
    }
    if (m == 0)
        return LLRDMA_AR_OK;
    if (c_->waitall(c_->ctx, m, batch) != 0)
        return fail(LLRDMA_AR_ERR_TRANSPORT);
    return LLRDMA_AR_OK;
}

int Transport::copy(void *dst, const void *src, size_t bytes)
{
    if (err_ != LLRDMA_AR_OK)
        return err_;
    if (bytes == 0)
        return LLRDMA_AR_OK;
    if (!c_->copy) {
        std::memcpy(dst, src, bytes);
        return LLRDMA_AR_OK;
    }
    if (c_->copy(c_->ctx, dst, src, bytes) != 0)
        return fail(LLRDMA_AR_ERR_MEMORY);
    return LLRDMA_AR_OK;
}

int Transport::reduce(int op, int dtype, const void *a, const void *b, void *out, size_t count)
{
    if (err_ != LLRDMA_AR_OK)
        return err_;
    if (count == 0)
        return LLRDMA_AR_OK;
    if (!c_->reduce) // the pair was checked by llrdma_ar_run
        return reduce3(op, dtype, a, b, out, count) ? LLRDMA_AR_OK : fail(LLRDMA_AR_ERR_INVALID);
    if (c_->reduce(c_->ctx, op, dtype, a, b, out, count) != 0)
        return fail(LLRDMA_AR_ERR_MEMORY);
    return LLRDMA_AR_OK;
}

int Transport::sync()
{
    if (err_ != LLRDMA_AR_OK)
        return err_;
    if (c_->sync && c_->sync(c_->ctx) != 0)
        return fail(LLRDMA_AR_ERR_MEMORY);
    return LLRDMA_AR_OK;
}

int Transport::sendrecv(const void *sbuf, size_t sbytes, void *rbuf, size_t rbytes, int peer,
                        int tag)
{
    void *reqs[2] = {nullptr, nullptr};
    int rc = irecv(rbuf, rbytes, peer, tag, &reqs[0]);
    if (rc == LLRDMA_AR_OK)
        rc = isend(sbuf, sbytes, peer, tag, &reqs[1]);
    if (rc != LLRDMA_AR_OK)
        return rc;
    return wait(2, reqs);
}

} // namespace ar
} // namespace llrdma

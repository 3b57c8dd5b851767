// transport.cc -- request bookkeeping over the glue's llrdma_ar_comm_t vtable.
//
// The algorithms never hold a request the Transport does not know about, so a
// failure anywhere can cancel and wait everything before the call returns and
// its buffers (user or scratch) go away.
#include "internal.h"

#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace llrdma
{
namespace ar
{

void Transport::track(void *req, size_t expect)
{
    expect_[nlive_] = expect;
    live_[nlive_++] = req;
}

size_t Transport::untrack(void *req)
{
    for (int i = 0; i < nlive_; ++i) {
        if (live_[i] == req) {
            size_t e = expect_[i];
            --nlive_;
            live_[i] = live_[nlive_];
            expect_[i] = expect_[nlive_];
            return e;
        }
    }
    return kSend;
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
    fatal_ = true;
    drain();
    return err_;
}

int Transport::local(int rc)
{
    if (!carry_)
        return fail(rc);
    if (err_ == LLRDMA_AR_OK)
        err_ = rc;
    poisoned_ = true;
    return LLRDMA_AR_OK;
}

int Transport::isend(const void *buf, size_t bytes, int peer, int tag, void **req)
{
    *req = nullptr;
    if (fatal_)
        return err_;
    if (bytes == 0)
        return LLRDMA_AR_OK;
    if (nlive_ == kMaxLive)
        return fail(LLRDMA_AR_ERR_INVALID); // an algorithm bug, not the user's
    void *r = nullptr;
    // Carrying a failure: the message still goes (the peer's receive is
    // matched), empty, and the buffer is not read.
    if (c_->isend(c_->ctx, buf, poisoned_ ? 0 : bytes, peer, tag, &r) != 0)
        return fail(LLRDMA_AR_ERR_TRANSPORT);
    track(r, kSend);
    *req = r;
    return LLRDMA_AR_OK;
}

int Transport::irecv(void *buf, size_t bytes, int peer, int tag, void **req)
{
    *req = nullptr;
    if (fatal_)
        return err_;
    if (bytes == 0)
        return LLRDMA_AR_OK;
    if (nlive_ == kMaxLive)
        return fail(LLRDMA_AR_ERR_INVALID);
    void *r = nullptr;
    if (c_->irecv(c_->ctx, buf, bytes, peer, tag, &r) != 0)
        return fail(LLRDMA_AR_ERR_TRANSPORT);
    track(r, bytes);
    *req = r;
    return LLRDMA_AR_OK;
}

int Transport::wait(int n, void **reqs)
{
    if (fatal_)
        return err_; // drain() already released them
    void *batch[kMaxLive];
    size_t expect[kMaxLive];
    int m = 0;
    for (int i = 0; i < n; ++i) {
        if (reqs[i] && m < kMaxLive) {
            batch[m] = reqs[i];
            expect[m++] = untrack(reqs[i]);
        }
        reqs[i] = nullptr;
    }
    if (m == 0)
        return LLRDMA_AR_OK;
    if (!carry_)
        return c_->waitall(c_->ctx, m, batch) != 0 ? fail(LLRDMA_AR_ERR_TRANSPORT) : LLRDMA_AR_OK;
    size_t got[kMaxLive];
    if (c_->waitall_sizes(c_->ctx, m, batch, got) != 0)
        return fail(LLRDMA_AR_ERR_TRANSPORT);
    for (int i = 0; i < m; ++i)
        if (expect[i] != kSend && got[i] < expect[i]) {
            // The sender failed (an empty message) or sent less than the
            // schedule says (a bug): either way this call fails here too.
            if (err_ == LLRDMA_AR_OK)
                err_ = got[i] == 0 ? LLRDMA_AR_ERR_PEER_FAILED : LLRDMA_AR_ERR_TRANSPORT;
            poisoned_ = true;
        }
    return LLRDMA_AR_OK;
}

namespace
{
// k copies (k <= 4) that advance together, step(d, s) moving 256 bytes of
// each in turn, so k streams of another cache's lines are in flight
// instead of one; rest(d, s, n) moves what is left of each.
template <class Step, class Rest>
void interleave(int k, unsigned char *const *d, const unsigned char *const *s, const size_t *n,
                Step step, Rest rest)
{
    size_t common = n[0];
    for (int j = 1; j < k; ++j)
        common = n[j] < common ? n[j] : common;
    common &= ~size_t(255);
    for (size_t off = 0; off < common; off += 256)
        for (int j = 0; j < k; ++j)
            step(d[j] + off, s[j] + off);
    for (int j = 0; j < k; ++j)
        rest(d[j] + common, s[j] + common, n[j] - common);
}

#if defined(__SSE2__)
// 256 bytes by non-temporal stores; d 64-byte aligned.
inline void stream256(unsigned char *d, const unsigned char *s)
{
    for (int i = 0; i < 256; i += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i + 32));
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i + 48));
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i *>(d + i + 48), e);
    }
}
#endif
} // namespace

int Transport::copy_n(int k, void *const *dst, const void *const *src, const size_t *bytes,
                      bool stream)
{
    if (c_->copy || fatal_ || poisoned_ || k < 1 || k > 4 || (k < 2 && !stream)) {
        for (int j = 0; j < k; ++j) {
            int rc = copy(dst[j], src[j], bytes[j]);
            if (rc != LLRDMA_AR_OK)
                return rc;
        }
        return LLRDMA_AR_OK;
    }
    unsigned char *d[4];
    const unsigned char *s[4];
    size_t n[4];
    for (int j = 0; j < k; ++j) {
        d[j] = static_cast<unsigned char *>(dst[j]);
        s[j] = static_cast<const unsigned char *>(src[j]);
        n[j] = bytes[j];
    }
#if defined(__SSE2__)
    if (stream) {
        // Non-temporal stores: the destination's lines are written without
        // being read first (no read for ownership) and go to memory, not to
        // this core's cache.  Each copy's head up to a line boundary first.
        for (int j = 0; j < k; ++j) {
            size_t head = (64 - reinterpret_cast<uintptr_t>(d[j]) % 64) % 64;
            head = head < n[j] ? head : n[j];
            std::memcpy(d[j], s[j], head);
            d[j] += head;
            s[j] += head;
            n[j] -= head;
        }
        interleave(k, d, s, n, stream256,
                   [](unsigned char *to, const unsigned char *from, size_t len) {
                       size_t at = 0;
                       for (; len - at >= 256; at += 256)
                           stream256(to + at, from + at);
                       std::memcpy(to + at, from + at, len - at);
                   });
        // Streamed stores are weakly ordered: done before anything later
        // (a flag, the caller's return) can be seen.
        _mm_sfence();
        return LLRDMA_AR_OK;
    }
#endif
    interleave(
        k, d, s, n,
        [](unsigned char *to, const unsigned char *from) { std::memcpy(to, from, 256); },
        [](unsigned char *to, const unsigned char *from, size_t len) {
            std::memcpy(to, from, len);
        });
    return LLRDMA_AR_OK;
}

int Transport::copy(void *dst, const void *src, size_t bytes)
{
    if (fatal_)
        return err_;
    if (bytes == 0 || poisoned_)
        return LLRDMA_AR_OK;
    if (!c_->copy) {
        std::memcpy(dst, src, bytes);
        return LLRDMA_AR_OK;
    }
    if (c_->copy(c_->ctx, dst, src, bytes) != 0)
        return local(LLRDMA_AR_ERR_MEMORY);
    return LLRDMA_AR_OK;
}

int Transport::reduce(int op, int dtype, const void *a, const void *b, void *out, size_t count)
{
    if (fatal_)
        return err_;
    if (count == 0 || poisoned_)
        return LLRDMA_AR_OK;
    if (!c_->reduce) // the pair was checked by llrdma_ar_run
        return reduce3(op, dtype, a, b, out, count) ? LLRDMA_AR_OK : fail(LLRDMA_AR_ERR_INVALID);
    if (c_->reduce(c_->ctx, op, dtype, a, b, out, count) != 0)
        return local(LLRDMA_AR_ERR_MEMORY);
    return LLRDMA_AR_OK;
}

int Transport::sync()
{
    if (fatal_)
        return err_;
    if (poisoned_)
        return LLRDMA_AR_OK;
    if (c_->sync && c_->sync(c_->ctx) != 0)
        return local(LLRDMA_AR_ERR_MEMORY);
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

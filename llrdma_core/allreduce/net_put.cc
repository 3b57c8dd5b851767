// net_put.cc -- one message of coll/llrdma's BTL put transport
// (ompi_mca_coll_llrdma/coll_llrdma_btlnet.c; docs/allreduce.md, "Transport
// seam"), as a pure state machine: the glue does the registrations, puts and
// control messages and reports each event here; this decides what comes next
// and when the memory may be given back.
//
// The receiver registers its buffer and sends READY (address, size, handle, or
// the error that kept it from registering); the sender puts the bytes in
// pieces of at most the BTL's put limit and, once every put's callback ran,
// sends DONE carrying its status; the receiver's request completes on DONE.
// Every READY that carries a registration is answered by exactly one DONE,
// whatever happens on the sender (a failed registration or put, a cancel, a
// size mismatch), so no receiver waits for a DONE that never comes and the
// control-message streams of both ranks stay matched.  Nothing is released
// while a put may still write: a send is done with its source once its last
// put callback ran, a receive with its buffer only on DONE.
#include "llrdma_allreduce.h"

extern "C" {

void llrdma_np_send_init(llrdma_np_msg_t *m, size_t bytes)
{
    *m = llrdma_np_msg_t{};
    m->send = 1;
    m->bytes = bytes;
    m->state = LLRDMA_NP_WAIT_READY;
}

void llrdma_np_recv_init(llrdma_np_msg_t *m, size_t bytes, int ready_status)
{
    *m = llrdma_np_msg_t{};
    m->bytes = bytes;
    // A READY without a registration is not answered: nothing to wait for.
    // A sunk receive is complete, not failed: no byte came (the Transport
    // reads 0 received bytes as the failure it carries).
    m->status = LLRDMA_NP_SUNK == ready_status ? LLRDMA_NP_OK : ready_status;
    m->state = LLRDMA_NP_OK == ready_status ? LLRDMA_NP_WAIT_DONE : LLRDMA_NP_COMPLETE;
}

// PUTTING with nothing more to start and nothing in flight: DONE is due.
static void settle(llrdma_np_msg_t *m)
{
    if (LLRDMA_NP_PUTTING == m->state && 0 == m->puts_out &&
        (m->next >= m->bytes || LLRDMA_NP_OK != m->status))
        m->state = LLRDMA_NP_SEND_DONE;
}

void llrdma_np_on_ready(llrdma_np_msg_t *m, size_t peer_bytes, int peer_status)
{
    if (!m->send || LLRDMA_NP_WAIT_READY != m->state)
        return;
    if (LLRDMA_NP_SUNK == peer_status) {
        m->state = LLRDMA_NP_COMPLETE; // nothing to put, no DONE expected
        return;
    }
    if (LLRDMA_NP_OK != peer_status) {
        m->status = LLRDMA_NP_ERR_PEER; // the receiver expects no DONE
        m->state = LLRDMA_NP_COMPLETE;
        return;
    }
    m->state = LLRDMA_NP_PUTTING;
    if (m->cancelled)
        m->status = LLRDMA_NP_CANCELLED;
    else if (peer_bytes != m->bytes && m->bytes != 0)
        m->status = LLRDMA_NP_ERR_SIZE;
    // An empty send is a failure carried in the schedule's messages
    // (llrdma_ar_comm_t.waitall_sizes): no put, DONE says 0 bytes.
    settle(m);
}

int llrdma_np_next_piece(const llrdma_np_msg_t *m, size_t limit, size_t align, size_t *off,
                         size_t *len)
{
    if (!m->send || LLRDMA_NP_PUTTING != m->state || LLRDMA_NP_OK != m->status ||
        m->next >= m->bytes)
        return 0;
    size_t left = m->bytes - m->next, most = left;
    if (limit > 0 && limit < most) {
        most = limit;
        if (align > 1 && most >= align)
            most -= most % align; // every piece but the last a multiple of align
    }
    *off = m->next;
    *len = most;
    return 1;
}

void llrdma_np_put_started(llrdma_np_msg_t *m, size_t len)
{
    m->next += len;
    ++m->puts_out;
}

void llrdma_np_put_done(llrdma_np_msg_t *m, int ok)
{
    if (m->puts_out > 0)
        --m->puts_out;
    if (!ok && LLRDMA_NP_OK == m->status)
        m->status = LLRDMA_NP_ERR_LOCAL;
    settle(m);
}

void llrdma_np_fail(llrdma_np_msg_t *m, int status)
{
    if (LLRDMA_NP_OK == m->status)
        m->status = status;
    settle(m);
}

void llrdma_np_done_sent(llrdma_np_msg_t *m)
{
    if (LLRDMA_NP_SEND_DONE == m->state)
        m->state = LLRDMA_NP_COMPLETE;
}

void llrdma_np_on_done(llrdma_np_msg_t *m, int peer_status)
{
    if (m->send || LLRDMA_NP_WAIT_DONE != m->state)
        return;
    // A receive asked to cancel completes normally when the data came: its
    // buffer was written (MPI's rule for a cancel that came too late).
    m->status = LLRDMA_NP_OK == peer_status ? LLRDMA_NP_OK : LLRDMA_NP_ERR_PEER;
    m->state = LLRDMA_NP_COMPLETE;
}

void llrdma_np_cancel(llrdma_np_msg_t *m)
{
    if (LLRDMA_NP_COMPLETE == m->state)
        return;
    m->cancelled = 1;
    // A send stops starting puts and answers READY with a cancelled DONE.  A
    // receive whose READY went out cannot stop the sender: it waits for DONE.
    if (m->send && LLRDMA_NP_PUTTING == m->state && LLRDMA_NP_OK == m->status)
        m->status = LLRDMA_NP_CANCELLED;
    settle(m);
}

int llrdma_np_may_release(const llrdma_np_msg_t *m)
{
    if (m->send)
        return 0 == m->puts_out && LLRDMA_NP_PUTTING != m->state;
    return LLRDMA_NP_WAIT_DONE != m->state;
}

int llrdma_np_expects_ctl(const llrdma_np_msg_t *m)
{
    return (m->send && LLRDMA_NP_WAIT_READY == m->state) ||
           (!m->send && LLRDMA_NP_WAIT_DONE == m->state);
}

} // extern "C"

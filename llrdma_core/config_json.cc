// config_json.cc -- the per-rank effective configuration as one line of JSON, and back.
//
// Each rank dumps what actually took effect (hint, source, derived profile, what the device
// granted) so that llrdma-check can compare ranks offline; the report's second and third
// failures (a setting that never reached the device, ranks silently disagreeing) are only
// visible this way.  The reader is deliberately small: objects, arrays, strings, numbers,
// null and booleans; unknown keys are skipped so older tools read newer dumps.
#include "json_reader.hpp"
#include "llrdma_internal.hpp"

#include <climits>
#include <cstdio>
#include <vector>

namespace llrdma
{
namespace
{

// ------------------------------------------------------------------------------ writing

void put_string(std::string &o, const std::string &s)
{
    put_json_string(o, s);
}

void put_key(std::string &o, const char *key, bool first = false)
{
    if (!first)
        o += ',';
    o += '"';
    o += key;
    o += "\":";
}

void put_u64(std::string &o, const char *key, uint64_t v)
{
    put_key(o, key);
    o += std::to_string(v);
}

void put_i64(std::string &o, const char *key, long long v, bool first = false)
{
    put_key(o, key, first);
    o += std::to_string(v);
}

void put_str(std::string &o, const char *key, const std::string &v)
{
    put_key(o, key);
    put_string(o, v);
}

// max_bytes == UINT64_MAX ("unbounded") is written as null: tools that read JSON numbers as
// doubles (jq, JavaScript) would otherwise print 18446744073709551616, a different number.
void put_path(std::string &o, const char *key, const llrdma_path_profile_t &p)
{
    put_key(o, key);
    o += '{';
    put_key(o, "min_bytes", true);
    o += std::to_string(p.min_bytes);
    put_key(o, "max_bytes");
    o += p.max_bytes == UINT64_MAX ? std::string("null") : std::to_string(p.max_bytes);
    put_u64(o, "sq_depth", p.sq_depth);
    put_u64(o, "rq_depth", p.rq_depth);
    put_u64(o, "recv_buf_bytes", p.recv_buf_bytes);
    put_u64(o, "inline_bytes", p.inline_bytes);
    put_u64(o, "signal_interval", p.signal_interval);
    put_u64(o, "cq_mod_count", p.cq_mod_count);
    put_u64(o, "cq_mod_usec", p.cq_mod_usec);
    put_str(o, "poll", p.poll == LLRDMA_POLL_BUSY ? "busy" : "event");
    put_u64(o, "eager_limit", p.eager_limit);
    put_u64(o, "max_send_size", p.max_send_size);
    put_u64(o, "rdma_pipeline_bytes", p.rdma_pipeline_bytes);
    put_u64(o, "rdma_rd_atomic", p.rdma_rd_atomic);
    put_u64(o, "rdma_frag_bytes", p.rdma_frag_bytes);
    o += '}';
}

std::string to_json(const llrdma_rank_config_t &c)
{
    std::string o;
    o.reserve(2048);
    o += '{';
    put_i64(o, "rank", c.rank, true);
    put_i64(o, "size", c.size);
    put_str(o, "host", from_fixed(c.host, sizeof c.host));
    put_i64(o, "pid", c.pid);
    put_u64(o, "size_hint", c.hint.bytes);
    put_str(o, "size_hint_text", from_fixed(c.hint.text, sizeof c.hint.text));
    put_str(o, "source", llrdma_source_name(c.hint.source));
    put_str(o, "origin", from_fixed(c.hint.origin, sizeof c.hint.origin));
    put_key(o, "generic");
    o += c.profile.generic ? "true" : "false";
    put_path(o, "ll", c.profile.ll);
    put_path(o, "bw", c.profile.bw);
    put_u64(o, "coll_segment_bytes", c.profile.coll_segment_bytes);
    put_u64(o, "coll_hint", c.coll_hint);
    put_i64(o, "coll_algorithm", c.coll_algorithm);
    put_u64(o, "coll_segment_knob", c.coll_segment_knob);
    put_i64(o, "coll_shm", c.coll_shm);
    put_u64(o, "coll_shm_chunk_knob", c.coll_shm_chunk_knob);
    put_i64(o, "coll_gpu_peer", c.coll_gpu_peer);
    put_u64(o, "coll_gpu_peer_min", c.coll_gpu_peer_min);
    put_i64(o, "coll_gpu_stage_auto", c.coll_gpu_stage_auto);
    put_u64(o, "coll_gpu_stage_max", c.coll_gpu_stage_max);
    put_u64(o, "coll_wait_spin_ns", c.coll_wait_spin_ns);
    put_u64(o, "coll_wait_sleep_ns", c.coll_wait_sleep_ns);
    put_i64(o, "coll_wait_oversubscribed", c.coll_wait_oversubscribed);
    put_str(o, "coll_wait_why", from_fixed(c.coll_wait_why, sizeof c.coll_wait_why));
    put_str(o, "fork_safe", from_fixed(c.fork_safe, sizeof c.fork_safe));
    put_str(o, "btl_status", from_fixed(c.btl_status, sizeof c.btl_status));
    put_i64(o, "devices", c.ndevices);
    put_key(o, "device");
    const llrdma_device_info_t &d = c.device;
    o += '{';
    put_key(o, "name", true);
    put_string(o, from_fixed(d.name, sizeof d.name));
    put_i64(o, "port", d.port);
    put_u64(o, "max_inline_granted_ll", d.max_inline_granted_ll);
    put_u64(o, "max_inline_granted_bw", d.max_inline_granted_bw);
    put_u64(o, "sq_depth_granted_ll", d.sq_depth_granted_ll);
    put_u64(o, "sq_depth_granted_bw", d.sq_depth_granted_bw);
    put_i64(o, "cq_moderation_supported", d.cq_moderation_supported);
    put_i64(o, "gid_index", d.gid_index);
    put_u64(o, "rq_depth_granted_ll", d.rq_depth_granted_ll);
    put_u64(o, "rq_depth_granted_bw", d.rq_depth_granted_bw);
    put_str(o, "gid_type", from_fixed(d.gid_type, sizeof d.gid_type));
    put_u64(o, "min_rnr_timer", d.min_rnr_timer);
    put_u64(o, "rnr_retry", d.rnr_retry);
    put_u64(o, "retry_count", d.retry_count);
    put_u64(o, "ack_timeout", d.ack_timeout);
    put_i64(o, "completion_timeout_ms", d.completion_timeout_ms);
    put_u64(o, "rd_atomic_granted", d.rd_atomic_granted);
    put_u64(o, "dest_rd_atomic_granted", d.dest_rd_atomic_granted);
    put_u64(o, "rdma_limit_granted", d.rdma_limit_granted);
    put_str(o, "gpu_rdma", from_fixed(d.gpu_rdma, sizeof d.gpu_rdma));
    put_str(o, "progress_ll", from_fixed(d.progress_ll, sizeof d.progress_ll));
    put_str(o, "progress_bw", from_fixed(d.progress_bw, sizeof d.progress_bw));
    put_u64(o, "cq_mod_count_granted", d.cq_mod_count_granted);
    put_u64(o, "cq_mod_usec_granted", d.cq_mod_usec_granted);
    put_str(o, "progress_note", from_fixed(d.progress_note, sizeof d.progress_note));
    o += '}';
    // Every device btl/llrdma saw, chosen or not, and why (docs/btl-design.md "Devices by
    // locality").
    put_str(o, "nic_policy", from_fixed(c.nic_policy, sizeof c.nic_policy));
    put_str(o, "nic_near", from_fixed(c.nic_near, sizeof c.nic_near));
    put_key(o, "nics");
    o += '[';
    for (int i = 0; i < c.nnics && i < LLRDMA_NIC_DUMP_MAX; ++i) {
        const llrdma_nic_report_t &n = c.nics[i];
        o += i ? ",{" : "{";
        put_key(o, "name", true);
        put_string(o, from_fixed(n.name, sizeof n.name));
        put_str(o, "ports", from_fixed(n.ports, sizeof n.ports));
        put_str(o, "class", from_fixed(n.cls, sizeof n.cls));
        put_key(o, "chosen");
        o += n.chosen ? "true" : "false";
        put_str(o, "reason", from_fixed(n.reason, sizeof n.reason));
        o += '}';
    }
    o += "]}";
    return o;
}

// ------------------------------------------------------------------------------ reading

using json::JValue;
using json::Parser;

// Typed field readers: a missing key leaves the field alone, a present key of the wrong
// type or out of range makes the whole document invalid.

bool to_i64(const JValue &v, long long lo, long long hi, long long &out)
{
    if (v.type != JValue::Number)
        return false;
    bool neg = !v.s.empty() && v.s[0] == '-';
    JValue mag;
    mag.type = JValue::Number;
    mag.s = neg ? v.s.substr(1) : v.s;
    uint64_t m;
    const uint64_t lim = static_cast<uint64_t>(LLONG_MAX) + (neg ? 1 : 0);
    if (!json::to_u64(mag, m) || m > lim)
        return false;
    // -(m - 1) - 1 reaches LLONG_MIN without overflowing.
    long long r =
        neg ? (m == 0 ? 0 : -static_cast<long long>(m - 1) - 1) : static_cast<long long>(m);
    if (r < lo || r > hi)
        return false;
    out = r;
    return true;
}

class Reader
{
  public:
    explicit Reader(const JValue &obj) : o_(obj) {}
    bool ok = true;

    template <typename T> void integer(const char *key, T &field, long long lo, long long hi)
    {
        const JValue *v = o_.get(key);
        long long r;
        if (v == nullptr)
            return;
        if (to_i64(*v, lo, hi, r))
            field = static_cast<T>(r);
        else
            ok = false;
    }

    template <typename T> void unsig(const char *key, T &field, uint64_t hi)
    {
        const JValue *v = o_.get(key);
        uint64_t r;
        if (v == nullptr)
            return;
        if (json::to_u64(*v, r) && r <= hi)
            field = static_cast<T>(r);
        else
            ok = false;
    }

    // Fills a fixed char array; text that would not fit is an error, not a silent cut.
    void str(const char *key, char *field, size_t cap)
    {
        const JValue *v = o_.get(key);
        if (v == nullptr)
            return;
        if (v->type != JValue::String || v->s.size() >= cap)
            ok = false;
        else
            (void)copy_out(v->s, field, cap);
    }

    const JValue *obj(const char *key)
    {
        const JValue *v = o_.get(key);
        if (v != nullptr && v->type != JValue::Object) {
            ok = false;
            return nullptr;
        }
        return v;
    }

    const JValue *raw(const char *key) { return o_.get(key); }

  private:
    const JValue &o_;
};

bool read_path(const JValue &o, llrdma_path_profile_t &p)
{
    Reader r(o);
    r.unsig("min_bytes", p.min_bytes, UINT64_MAX);
    if (const JValue *v = r.raw("max_bytes")) {
        if (v->type == JValue::Null)
            p.max_bytes = UINT64_MAX;
        else
            r.unsig("max_bytes", p.max_bytes, UINT64_MAX);
    }
    r.unsig("sq_depth", p.sq_depth, UINT32_MAX);
    r.unsig("rq_depth", p.rq_depth, UINT32_MAX);
    r.unsig("recv_buf_bytes", p.recv_buf_bytes, UINT32_MAX);
    r.unsig("inline_bytes", p.inline_bytes, UINT32_MAX);
    r.unsig("signal_interval", p.signal_interval, UINT32_MAX);
    r.unsig("cq_mod_count", p.cq_mod_count, UINT32_MAX);
    r.unsig("cq_mod_usec", p.cq_mod_usec, UINT32_MAX);
    if (const JValue *v = r.raw("poll")) {
        if (v->type == JValue::String && v->s == "busy")
            p.poll = LLRDMA_POLL_BUSY;
        else if (v->type == JValue::String && v->s == "event")
            p.poll = LLRDMA_POLL_EVENT;
        else
            return false;
    }
    r.unsig("eager_limit", p.eager_limit, UINT64_MAX);
    r.unsig("max_send_size", p.max_send_size, UINT64_MAX);
    r.unsig("rdma_pipeline_bytes", p.rdma_pipeline_bytes, UINT64_MAX);
    r.unsig("rdma_rd_atomic", p.rdma_rd_atomic, UINT32_MAX);
    r.unsig("rdma_frag_bytes", p.rdma_frag_bytes, UINT64_MAX);
    return r.ok;
}

bool from_json(const char *json, llrdma_rank_config_t &c)
{
    JValue root;
    if (!Parser(json).document(root) || root.type != JValue::Object)
        return false;
    Reader r(root);
    r.integer("rank", c.rank, INT32_MIN, INT32_MAX);
    r.integer("size", c.size, INT32_MIN, INT32_MAX);
    r.str("host", c.host, sizeof c.host);
    r.integer("pid", c.pid, LONG_MIN, LONG_MAX);
    r.unsig("size_hint", c.hint.bytes, UINT64_MAX);
    c.profile.hint = c.hint.bytes; // the profile is always derived from the effective hint
    r.str("size_hint_text", c.hint.text, sizeof c.hint.text);
    if (const JValue *v = r.raw("source")) {
        if (v->type != JValue::String || !source_from_name(v->s, c.hint.source))
            return false;
    }
    r.str("origin", c.hint.origin, sizeof c.hint.origin);
    if (const JValue *v = r.raw("generic")) {
        if (v->type == JValue::Bool)
            c.profile.generic = v->b ? 1 : 0;
        else
            r.integer("generic", c.profile.generic, 0, 1);
    }
    if (const JValue *v = r.obj("ll"); v != nullptr && !read_path(*v, c.profile.ll))
        return false;
    if (const JValue *v = r.obj("bw"); v != nullptr && !read_path(*v, c.profile.bw))
        return false;
    r.unsig("coll_segment_bytes", c.profile.coll_segment_bytes, UINT64_MAX);
    r.unsig("coll_hint", c.coll_hint, UINT64_MAX);
    r.integer("coll_algorithm", c.coll_algorithm, 0, 64);
    r.unsig("coll_segment_knob", c.coll_segment_knob, UINT64_MAX);
    r.integer("coll_shm", c.coll_shm, 0, 1);
    r.unsig("coll_shm_chunk_knob", c.coll_shm_chunk_knob, UINT64_MAX);
    r.integer("coll_gpu_peer", c.coll_gpu_peer, 0, 2);
    r.unsig("coll_gpu_peer_min", c.coll_gpu_peer_min, UINT64_MAX);
    r.integer("coll_gpu_stage_auto", c.coll_gpu_stage_auto, 0, 1);
    r.unsig("coll_gpu_stage_max", c.coll_gpu_stage_max, UINT64_MAX);
    r.unsig("coll_wait_spin_ns", c.coll_wait_spin_ns, UINT64_MAX);
    r.unsig("coll_wait_sleep_ns", c.coll_wait_sleep_ns, UINT64_MAX);
    r.integer("coll_wait_oversubscribed", c.coll_wait_oversubscribed, 0, 1);
    r.str("coll_wait_why", c.coll_wait_why, sizeof c.coll_wait_why);
    r.str("btl_status", c.btl_status, sizeof c.btl_status);
    r.str("fork_safe", c.fork_safe, sizeof c.fork_safe);
    r.integer("devices", c.ndevices, INT32_MIN, INT32_MAX);
    if (const JValue *v = r.obj("device")) {
        llrdma_device_info_t &d = c.device;
        Reader dr(*v);
        dr.str("name", d.name, sizeof d.name);
        dr.integer("port", d.port, INT32_MIN, INT32_MAX);
        dr.unsig("max_inline_granted_ll", d.max_inline_granted_ll, UINT32_MAX);
        dr.unsig("max_inline_granted_bw", d.max_inline_granted_bw, UINT32_MAX);
        dr.unsig("sq_depth_granted_ll", d.sq_depth_granted_ll, UINT32_MAX);
        dr.unsig("sq_depth_granted_bw", d.sq_depth_granted_bw, UINT32_MAX);
        dr.integer("cq_moderation_supported", d.cq_moderation_supported, INT32_MIN, INT32_MAX);
        dr.integer("gid_index", d.gid_index, INT32_MIN, INT32_MAX);
        dr.unsig("rq_depth_granted_ll", d.rq_depth_granted_ll, UINT32_MAX);
        dr.unsig("rq_depth_granted_bw", d.rq_depth_granted_bw, UINT32_MAX);
        dr.str("gid_type", d.gid_type, sizeof d.gid_type);
        dr.unsig("min_rnr_timer", d.min_rnr_timer, UINT32_MAX);
        dr.unsig("rnr_retry", d.rnr_retry, UINT32_MAX);
        dr.unsig("retry_count", d.retry_count, UINT32_MAX);
        dr.unsig("ack_timeout", d.ack_timeout, UINT32_MAX);
        dr.integer("completion_timeout_ms", d.completion_timeout_ms, INT32_MIN, INT32_MAX);
        dr.unsig("rd_atomic_granted", d.rd_atomic_granted, UINT32_MAX);
        dr.unsig("dest_rd_atomic_granted", d.dest_rd_atomic_granted, UINT32_MAX);
        dr.unsig("rdma_limit_granted", d.rdma_limit_granted, UINT64_MAX);
        dr.str("gpu_rdma", d.gpu_rdma, sizeof d.gpu_rdma);
        dr.str("progress_ll", d.progress_ll, sizeof d.progress_ll);
        dr.str("progress_bw", d.progress_bw, sizeof d.progress_bw);
        dr.unsig("cq_mod_count_granted", d.cq_mod_count_granted, UINT32_MAX);
        dr.unsig("cq_mod_usec_granted", d.cq_mod_usec_granted, UINT32_MAX);
        dr.str("progress_note", d.progress_note, sizeof d.progress_note);
        if (!dr.ok)
            return false;
    }
    r.str("nic_policy", c.nic_policy, sizeof c.nic_policy);
    r.str("nic_near", c.nic_near, sizeof c.nic_near);
    if (const JValue *v = r.raw("nics")) {
        if (v->type != JValue::Array || v->items.size() > LLRDMA_NIC_DUMP_MAX)
            return false;
        c.nnics = static_cast<int>(v->items.size());
        for (size_t i = 0; i < v->items.size(); ++i) {
            const JValue &e = v->items[i];
            llrdma_nic_report_t &n = c.nics[i];
            if (e.type != JValue::Object)
                return false;
            Reader nr(e);
            nr.str("name", n.name, sizeof n.name);
            nr.str("ports", n.ports, sizeof n.ports);
            nr.str("class", n.cls, sizeof n.cls);
            nr.str("reason", n.reason, sizeof n.reason);
            if (const JValue *b = nr.raw("chosen")) {
                if (b->type != JValue::Bool)
                    return false;
                n.chosen = b->b ? 1 : 0;
            }
            if (!nr.ok)
                return false;
        }
    }
    return r.ok;
}

// A partial JSON line or a partial path is worse than none (a dump could land in the wrong
// file), so on truncation the output is the empty string.
int copy_whole(const std::string &s, char *buf, size_t len)
{
    if (s.size() >= len) {
        buf[0] = '\0';
        return LLRDMA_ERR_TRUNCATED;
    }
    return copy_out(s, buf, len);
}

} // namespace
} // namespace llrdma

extern "C" int llrdma_config_to_json(const llrdma_rank_config_t *cfg, char *buf, size_t len)
{
    if (cfg == nullptr || buf == nullptr || len == 0)
        return LLRDMA_ERR_INVALID;
    try {
        return llrdma::copy_whole(llrdma::to_json(*cfg), buf, len);
    } catch (...) {
        buf[0] = '\0';
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" int llrdma_config_from_json(const char *json, llrdma_rank_config_t *cfg)
{
    if (json == nullptr || cfg == nullptr)
        return LLRDMA_ERR_INVALID;
    try {
        // Fields absent from the document keep these "unknown" values.
        llrdma_rank_config_t c{};
        c.rank = -1;
        c.hint.source = LLRDMA_SRC_DEFAULT;
        c.device.cq_moderation_supported = -1;
        c.device.gid_index = -1;
        if (!llrdma::from_json(json, c))
            return LLRDMA_ERR_INVALID; // *cfg untouched
        *cfg = c;
        return LLRDMA_OK;
    } catch (...) {
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" int llrdma_expand_path(const char *pattern, int rank, const char *host, long pid,
                                  char *buf, size_t len)
{
    if (pattern == nullptr || buf == nullptr || len == 0)
        return LLRDMA_ERR_INVALID;
    try {
        std::string o;
        for (const char *p = pattern; *p != '\0'; ++p) {
            if (*p != '%') {
                o += *p;
                continue;
            }
            switch (*++p) {
            case 'r':
                o += std::to_string(rank);
                break;
            case 'h':
                o += host != nullptr && *host != '\0' ? host : "unknown";
                break;
            case 'p':
                o += std::to_string(pid);
                break;
            case '%':
                o += '%';
                break;
            default: // unknown letter, or a lone '%' at the end
                buf[0] = '\0';
                return LLRDMA_ERR_INVALID;
            }
        }
        return llrdma::copy_whole(o, buf, len);
    } catch (...) {
        buf[0] = '\0';
        return LLRDMA_ERR_INTERNAL;
    }
}

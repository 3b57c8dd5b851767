// config_json.cc -- the per-rank effective configuration as one line of JSON, and back.
//
// Each rank dumps what actually took effect (hint, source, derived profile, what the device
// granted) so that llrdma-check can compare ranks offline; the report's second and third
// failures (a setting that never reached the device, ranks silently disagreeing) are only
// visible this way.  nlohmann-json parses and writes (json.hpp); unknown keys are skipped so
// older tools read newer dumps.
#include "json.hpp"
#include "llrdma_internal.hpp"

#include <climits>
#include <string>

namespace llrdma
{
namespace
{

// ------------------------------------------------------------------------------ writing

using json::Json;

// max_bytes == UINT64_MAX ("unbounded") is written as null: tools that read JSON numbers as
// doubles (jq, JavaScript) would otherwise print 18446744073709551616, a different number.
Json path_json(const llrdma_path_profile_t &p)
{
    Json o = Json::object();
    o["min_bytes"] = p.min_bytes;
    o["max_bytes"] = p.max_bytes == UINT64_MAX ? Json(nullptr) : Json(p.max_bytes);
    o["sq_depth"] = p.sq_depth;
    o["rq_depth"] = p.rq_depth;
    o["recv_buf_bytes"] = p.recv_buf_bytes;
    o["inline_bytes"] = p.inline_bytes;
    o["signal_interval"] = p.signal_interval;
    o["cq_mod_count"] = p.cq_mod_count;
    o["cq_mod_usec"] = p.cq_mod_usec;
    o["poll"] = p.poll == LLRDMA_POLL_BUSY ? "busy" : "event";
    o["eager_limit"] = p.eager_limit;
    o["max_send_size"] = p.max_send_size;
    o["rdma_pipeline_bytes"] = p.rdma_pipeline_bytes;
    o["rdma_rd_atomic"] = p.rdma_rd_atomic;
    o["rdma_frag_bytes"] = p.rdma_frag_bytes;
    return o;
}

// The key order is the dump format (tests and docs show it): fields are added in it.
std::string to_json(const llrdma_rank_config_t &c)
{
    Json o = Json::object();
    o["rank"] = c.rank;
    o["size"] = c.size;
    o["host"] = from_fixed(c.host, sizeof c.host);
    o["pid"] = c.pid;
    o["size_hint"] = c.hint.bytes;
    o["size_hint_text"] = from_fixed(c.hint.text, sizeof c.hint.text);
    o["source"] = llrdma_source_name(c.hint.source);
    o["origin"] = from_fixed(c.hint.origin, sizeof c.hint.origin);
    o["generic"] = c.profile.generic != 0;
    o["ll"] = path_json(c.profile.ll);
    o["bw"] = path_json(c.profile.bw);
    o["coll_segment_bytes"] = c.profile.coll_segment_bytes;
    o["coll_hint"] = c.coll_hint;
    o["coll_algorithm"] = c.coll_algorithm;
    o["coll_segment_knob"] = c.coll_segment_knob;
    o["coll_shm"] = c.coll_shm;
    o["coll_shm_chunk_knob"] = c.coll_shm_chunk_knob;
    o["coll_shm_lines_max"] = c.coll_shm_lines_max;
    o["coll_shm_share_min"] = c.coll_shm_share_min;
    o["coll_shm_share_ranks"] = c.coll_shm_share_ranks;
    o["coll_shm_stream_auto"] = c.coll_shm_stream_auto;
    o["coll_shm_stream_min"] = c.coll_shm_stream_min;
    o["coll_gpu_peer"] = c.coll_gpu_peer;
    o["coll_gpu_peer_min"] = c.coll_gpu_peer_min;
    o["coll_gpu_stage_auto"] = c.coll_gpu_stage_auto;
    o["coll_gpu_stage_max"] = c.coll_gpu_stage_max;
    o["coll_wait_spin_ns"] = c.coll_wait_spin_ns;
    o["coll_wait_sleep_ns"] = c.coll_wait_sleep_ns;
    o["coll_wait_oversubscribed"] = c.coll_wait_oversubscribed;
    o["coll_wait_why"] = from_fixed(c.coll_wait_why, sizeof c.coll_wait_why);
    o["gpu_rdma_every"] = c.gpu_rdma_every;
    o["fork_safe"] = from_fixed(c.fork_safe, sizeof c.fork_safe);
    o["btl_status"] = from_fixed(c.btl_status, sizeof c.btl_status);
    o["devices"] = c.ndevices;
    const llrdma_device_info_t &d = c.device;
    Json dev = Json::object();
    dev["name"] = from_fixed(d.name, sizeof d.name);
    dev["port"] = d.port;
    dev["max_inline_granted_ll"] = d.max_inline_granted_ll;
    dev["max_inline_granted_bw"] = d.max_inline_granted_bw;
    dev["sq_depth_granted_ll"] = d.sq_depth_granted_ll;
    dev["sq_depth_granted_bw"] = d.sq_depth_granted_bw;
    dev["cq_moderation_supported"] = d.cq_moderation_supported;
    dev["gid_index"] = d.gid_index;
    dev["rq_depth_granted_ll"] = d.rq_depth_granted_ll;
    dev["rq_depth_granted_bw"] = d.rq_depth_granted_bw;
    dev["gid_type"] = from_fixed(d.gid_type, sizeof d.gid_type);
    dev["min_rnr_timer"] = d.min_rnr_timer;
    dev["rnr_retry"] = d.rnr_retry;
    dev["retry_count"] = d.retry_count;
    dev["ack_timeout"] = d.ack_timeout;
    dev["completion_timeout_ms"] = d.completion_timeout_ms;
    dev["rd_atomic_granted"] = d.rd_atomic_granted;
    dev["dest_rd_atomic_granted"] = d.dest_rd_atomic_granted;
    dev["rdma_limit_granted"] = d.rdma_limit_granted;
    dev["gpu_rdma"] = from_fixed(d.gpu_rdma, sizeof d.gpu_rdma);
    dev["progress_ll"] = from_fixed(d.progress_ll, sizeof d.progress_ll);
    dev["progress_bw"] = from_fixed(d.progress_bw, sizeof d.progress_bw);
    dev["cq_mod_count_granted"] = d.cq_mod_count_granted;
    dev["cq_mod_usec_granted"] = d.cq_mod_usec_granted;
    dev["progress_note"] = from_fixed(d.progress_note, sizeof d.progress_note);
    dev["post_api"] = from_fixed(d.post_api, sizeof d.post_api);
    o["device"] = std::move(dev);
    // Every device btl/llrdma saw, chosen or not, and why (docs/btl-design.md "Devices by
    // locality").
    o["nic_policy"] = from_fixed(c.nic_policy, sizeof c.nic_policy);
    o["nic_near"] = from_fixed(c.nic_near, sizeof c.nic_near);
    Json nics = Json::array();
    for (int i = 0; i < c.nnics && i < LLRDMA_NIC_DUMP_MAX; ++i) {
        const llrdma_nic_report_t &n = c.nics[i];
        Json e = Json::object();
        e["name"] = from_fixed(n.name, sizeof n.name);
        e["ports"] = from_fixed(n.ports, sizeof n.ports);
        e["class"] = from_fixed(n.cls, sizeof n.cls);
        e["chosen"] = n.chosen != 0;
        e["reason"] = from_fixed(n.reason, sizeof n.reason);
        nics.push_back(std::move(e));
    }
    o["nics"] = std::move(nics);
    return json::dump(o);
}

// ------------------------------------------------------------------------------ reading

// Typed field readers: a missing key leaves the field alone, a present key of the wrong
// type or out of range makes the whole document invalid.
class Reader
{
  public:
    explicit Reader(const Json &obj) : o_(obj) {}
    bool ok = true;

    template <typename T> void integer(const char *key, T &field, long long lo, long long hi)
    {
        const Json *v = json::get(o_, key);
        long long r;
        if (v == nullptr)
            return;
        if (json::to_i64(*v, lo, hi, r))
            field = static_cast<T>(r);
        else
            ok = false;
    }

    template <typename T> void unsig(const char *key, T &field, uint64_t hi)
    {
        const Json *v = json::get(o_, key);
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
        const Json *v = json::get(o_, key);
        if (v == nullptr)
            return;
        if (const std::string *s = json::c_string(*v, cap))
            (void)copy_out(*s, field, cap);
        else
            ok = false;
    }

    const Json *obj(const char *key)
    {
        const Json *v = json::get(o_, key);
        if (v != nullptr && !v->is_object()) {
            ok = false;
            return nullptr;
        }
        return v;
    }

    const Json *raw(const char *key) { return json::get(o_, key); }

  private:
    const Json &o_;
};

bool read_path(const Json &o, llrdma_path_profile_t &p)
{
    Reader r(o);
    r.unsig("min_bytes", p.min_bytes, UINT64_MAX);
    if (const Json *v = r.raw("max_bytes")) {
        if (v->is_null())
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
    if (const Json *v = r.raw("poll")) {
        if (*v == "busy")
            p.poll = LLRDMA_POLL_BUSY;
        else if (*v == "event")
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

bool from_json(const char *text, llrdma_rank_config_t &c)
{
    Json root;
    std::string why; // this API has no message: llrdma-check shows the whole line instead
    if (!json::parse(text, root, why) || !root.is_object())
        return false;
    Reader r(root);
    r.integer("rank", c.rank, INT32_MIN, INT32_MAX);
    r.integer("size", c.size, INT32_MIN, INT32_MAX);
    r.str("host", c.host, sizeof c.host);
    r.integer("pid", c.pid, LONG_MIN, LONG_MAX);
    r.unsig("size_hint", c.hint.bytes, UINT64_MAX);
    c.profile.hint = c.hint.bytes; // the profile is always derived from the effective hint
    r.str("size_hint_text", c.hint.text, sizeof c.hint.text);
    if (const Json *v = r.raw("source")) {
        const auto *name = v->get_ptr<const std::string *>();
        if (name == nullptr || !source_from_name(*name, c.hint.source))
            return false;
    }
    r.str("origin", c.hint.origin, sizeof c.hint.origin);
    if (const Json *v = r.raw("generic")) {
        if (v->is_boolean())
            c.profile.generic = v->get<bool>() ? 1 : 0;
        else
            r.integer("generic", c.profile.generic, 0, 1);
    }
    if (const Json *v = r.obj("ll"); v != nullptr && !read_path(*v, c.profile.ll))
        return false;
    if (const Json *v = r.obj("bw"); v != nullptr && !read_path(*v, c.profile.bw))
        return false;
    r.unsig("coll_segment_bytes", c.profile.coll_segment_bytes, UINT64_MAX);
    r.unsig("coll_hint", c.coll_hint, UINT64_MAX);
    r.integer("coll_algorithm", c.coll_algorithm, 0, 64);
    r.unsig("coll_segment_knob", c.coll_segment_knob, UINT64_MAX);
    r.integer("coll_shm", c.coll_shm, 0, 1);
    r.unsig("coll_shm_chunk_knob", c.coll_shm_chunk_knob, UINT64_MAX);
    r.unsig("coll_shm_lines_max", c.coll_shm_lines_max, UINT64_MAX);
    r.unsig("coll_shm_share_min", c.coll_shm_share_min, UINT64_MAX);
    r.integer("coll_shm_share_ranks", c.coll_shm_share_ranks, 0, INT32_MAX);
    r.integer("coll_shm_stream_auto", c.coll_shm_stream_auto, 0, 1);
    r.unsig("coll_shm_stream_min", c.coll_shm_stream_min, UINT64_MAX);
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
    r.integer("gpu_rdma_every", c.gpu_rdma_every, 0, 1);
    r.integer("devices", c.ndevices, INT32_MIN, INT32_MAX);
    if (const Json *v = r.obj("device")) {
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
        dr.str("post_api", d.post_api, sizeof d.post_api);
        if (!dr.ok)
            return false;
    }
    r.str("nic_policy", c.nic_policy, sizeof c.nic_policy);
    r.str("nic_near", c.nic_near, sizeof c.nic_near);
    if (const Json *v = r.raw("nics")) {
        if (!v->is_array() || v->size() > LLRDMA_NIC_DUMP_MAX)
            return false;
        c.nnics = static_cast<int>(v->size());
        for (size_t i = 0; i < v->size(); ++i) {
            const Json &e = (*v)[i];
            llrdma_nic_report_t &n = c.nics[i];
            if (!e.is_object())
                return false;
            Reader nr(e);
            nr.str("name", n.name, sizeof n.name);
            nr.str("ports", n.ports, sizeof n.ports);
            nr.str("class", n.cls, sizeof n.cls);
            nr.str("reason", n.reason, sizeof n.reason);
            if (const Json *b = nr.raw("chosen")) {
                if (!b->is_boolean())
                    return false;
                n.chosen = b->get<bool>() ? 1 : 0;
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

// histogram.cc -- arithmetic of btl/llrdma's message-size histogram and its place in the
// per-rank dump (llrdma_hist.h).  The BTL only increments (inline, in the header); everything
// that reads the counts lives here so the rules are unit-tested without a device.
#include "json.hpp"
#include "llrdma_hist.h"
#include "llrdma_internal.hpp"

#include <cmath>
#include <string>

namespace llrdma
{
namespace
{

const char *const kPathName[LLRDMA_HIST_NPATHS] = {"ll", "bw", "rdma"};

using json::Json;

Json counts_json(const uint64_t *v)
{
    Json a = Json::array();
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b)
        a.push_back(v[b]);
    return a;
}

Json stats_json(const llrdma_hist_t &h)
{
    Json o = Json::object();
    o["buckets"] = "log2";
    o["header_allowance"] = LLRDMA_HIST_HDR_ALLOWANCE;
    // Self-describing for plots and other readers; the unbounded last bucket is null.
    Json max = Json::array();
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
        uint64_t m = llrdma_hist_bucket_max(b);
        max.push_back(m == UINT64_MAX ? Json(nullptr) : Json(m));
    }
    o["bucket_max"] = std::move(max);
    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
        Json path = Json::object();
        path["count"] = counts_json(h.count[p]);
        path["bytes"] = counts_json(h.bytes[p]);
        path["waits"] = h.waits[p];
        if (p < 2) {
            path["cq_completions"] = h.cq_completions[p];
            path["cq_events"] = h.cq_events[p];
            path["thread_completions"] = h.thread_completions[p];
        }
        o[kPathName[p]] = std::move(path);
    }
    o["thread_cpu_us"] = h.thread_cpu_us;
    return o;
}

bool u64_of(const Json *v, uint64_t &out)
{
    return v != nullptr && json::to_u64(*v, out);
}

// A JSON integer within 32 bits either way (rank, pid).
bool int_of(const Json *v, long long &out)
{
    return v != nullptr && json::to_i64(*v, -static_cast<long long>(INT32_MAX), INT32_MAX, out);
}

bool read_array(const Json *v, uint64_t *out, const std::string &what, std::string &why)
{
    if (v == nullptr || !v->is_array()) {
        why = what + ": missing or not an array";
        return false;
    }
    if (v->size() != LLRDMA_HIST_BUCKETS) {
        why = what + ": " + std::to_string(v->size()) + " buckets, expected " +
              std::to_string(LLRDMA_HIST_BUCKETS);
        return false;
    }
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b)
        if (!u64_of(&(*v)[b], out[b])) {
            why = what + "[" + std::to_string(b) + "]: not a non-negative integer";
            return false;
        }
    return true;
}

int parse(const char *text, llrdma_rank_stats_t &r, std::string &why)
{
    Json root;
    if (!json::parse(text, root, why)) {
        why = "not valid JSON (truncated or corrupt): " + why;
        return LLRDMA_ERR_INVALID;
    }
    using json::get;
    const Json *rec = get(root, "record");
    const bool final_rec = rec != nullptr && *rec == "finalize";
    if (!root.is_object() || get(root, "size_hint") == nullptr ||
        (!final_rec && get(root, "btl_status") == nullptr)) {
        why = "not an llrdma dump record (no \"size_hint\" with \"btl_status\" or "
              "\"record\":\"finalize\")";
        return LLRDMA_ERR_INVALID;
    }
    long long rank = -1, pid = 0;
    uint64_t hint = 0, sq = 0;
    const Json *host = get(root, "host");
    if (!int_of(get(root, "rank"), rank) || !u64_of(get(root, "size_hint"), hint) ||
        (get(root, "pid") != nullptr && !int_of(get(root, "pid"), pid)) ||
        (host != nullptr && json::c_string(*host, sizeof r.host) == nullptr)) {
        why = "llrdma dump record with a malformed rank, pid, host or size_hint";
        return LLRDMA_ERR_INVALID;
    }
    r.rank = static_cast<int>(rank);
    r.pid = static_cast<long>(pid);
    r.hint = hint;
    if (host != nullptr)
        (void)copy_out(host->get_ref<const std::string &>(), r.host, sizeof r.host);
    if (!final_rec)
        return LLRDMA_ERR_NOT_FOUND; // the MPI_Init record: configuration, no counts
    if (get(root, "ll_sq_depth") != nullptr) {
        if (!u64_of(get(root, "ll_sq_depth"), sq) || sq > UINT32_MAX) {
            why = "\"ll_sq_depth\" is not a 32-bit count";
            return LLRDMA_ERR_INVALID;
        }
        r.ll_sq_depth = static_cast<uint32_t>(sq);
    }
    const Json *st = get(root, "stats");
    if (st == nullptr || !st->is_object()) {
        why = "\"stats\" is missing or not an object";
        return LLRDMA_ERR_INVALID;
    }
    const Json *kind = get(*st, "buckets");
    uint64_t allow = 0;
    if (kind == nullptr || *kind != "log2" || !u64_of(get(*st, "header_allowance"), allow) ||
        allow != LLRDMA_HIST_HDR_ALLOWANCE) {
        why = "\"stats\": unknown bucket layout (expected log2 with a header allowance of " +
              std::to_string(LLRDMA_HIST_HDR_ALLOWANCE) + ")";
        return LLRDMA_ERR_INVALID;
    }
    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
        const Json *path = get(*st, kPathName[p]);
        std::string name = std::string("stats.") + kPathName[p];
        if (path == nullptr || !path->is_object()) {
            why = name + ": missing or not an object";
            return LLRDMA_ERR_INVALID;
        }
        if (!read_array(get(*path, "count"), r.hist.count[p], name + ".count", why) ||
            !read_array(get(*path, "bytes"), r.hist.bytes[p], name + ".bytes", why))
            return LLRDMA_ERR_INVALID;
        if (!u64_of(get(*path, "waits"), r.hist.waits[p])) {
            why = name + ".waits: missing or not a non-negative integer";
            return LLRDMA_ERR_INVALID;
        }
        // CQ counters: absent in dumps written before they existed (0 then).
        for (int k = 0; k < 3 && p < 2; ++k) {
            static const char *const keys[3] = {"cq_completions", "cq_events",
                                                "thread_completions"};
            uint64_t *dst[3] = {&r.hist.cq_completions[p], &r.hist.cq_events[p],
                                &r.hist.thread_completions[p]};
            const char *key = keys[k];
            const Json *v = get(*path, key);
            if (v == nullptr)
                continue;
            if (!u64_of(v, *dst[k])) {
                why = name + "." + key + ": not a non-negative integer";
                return LLRDMA_ERR_INVALID;
            }
        }
    }
    const Json *cpu = get(*st, "thread_cpu_us");
    if (cpu != nullptr && !u64_of(cpu, r.hist.thread_cpu_us)) {
        why = "stats.thread_cpu_us: not a non-negative integer";
        return LLRDMA_ERR_INVALID;
    }
    return LLRDMA_OK;
}

} // namespace
} // namespace llrdma

extern "C" uint64_t llrdma_hist_bucket_max(unsigned b)
{
    if (b >= LLRDMA_HIST_BUCKETS - 1)
        return UINT64_MAX;
    return uint64_t(1) << b;
}

extern "C" void llrdma_hist_merge(llrdma_hist_t *dst, const llrdma_hist_t *src)
{
    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
        for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
            dst->count[p][b] += src->count[p][b];
            dst->bytes[p][b] += src->bytes[p][b];
        }
        dst->waits[p] += src->waits[p];
    }
    for (int p = 0; p < 2; ++p) {
        dst->cq_completions[p] += src->cq_completions[p];
        dst->cq_events[p] += src->cq_events[p];
        dst->thread_completions[p] += src->thread_completions[p];
    }
    dst->thread_cpu_us += src->thread_cpu_us;
}

extern "C" uint64_t llrdma_hist_totals(const llrdma_hist_t *h, uint64_t *counts)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
        uint64_t c = 0;
        for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p)
            c += h->count[p][b];
        if (counts != nullptr)
            counts[b] = c;
        total += c;
    }
    return total;
}

extern "C" int llrdma_hist_percentile_bucket(const llrdma_hist_t *h, double pct)
{
    uint64_t counts[LLRDMA_HIST_BUCKETS];
    uint64_t total = llrdma_hist_totals(h, counts);
    if (total == 0 || !(pct > 0.0 && pct <= 100.0))
        return -1;
    // Nearest rank, as llrdma-bench's percentiles: a real fragment's bucket.
    auto rank = static_cast<uint64_t>(std::ceil(pct / 100.0 * static_cast<double>(total)));
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
        seen += counts[b];
        if (seen >= rank)
            return static_cast<int>(b);
    }
    return LLRDMA_HIST_BUCKETS - 1;
}

extern "C" int llrdma_stats_to_json(const llrdma_rank_config_t *cfg, const llrdma_hist_t *h,
                                    char *buf, size_t len)
{
    if (cfg == nullptr || h == nullptr || buf == nullptr || len == 0)
        return LLRDMA_ERR_INVALID;
    try {
        // Identity and hint only: the configuration is in the MPI_Init record, and tests that
        // count configuration lines keep counting one per rank.
        llrdma::json::Json j = llrdma::json::Json::object();
        j["rank"] = cfg->rank;
        j["size"] = cfg->size;
        j["host"] = llrdma::from_fixed(cfg->host, sizeof cfg->host);
        j["pid"] = cfg->pid;
        j["size_hint"] = cfg->hint.bytes;
        j["ll_sq_depth"] = cfg->profile.generic ? 0u : cfg->profile.ll.sq_depth;
        j["record"] = "finalize";
        j["stats"] = llrdma::stats_json(*h);
        const std::string o = llrdma::json::dump(j);
        if (o.size() >= len) {
            buf[0] = '\0';
            return LLRDMA_ERR_TRUNCATED;
        }
        return llrdma::copy_out(o, buf, len);
    } catch (...) {
        buf[0] = '\0';
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" int llrdma_stats_from_json(const char *json, llrdma_rank_stats_t *out, char *err,
                                      size_t errlen)
{
    if (json == nullptr || out == nullptr)
        return LLRDMA_ERR_INVALID;
    try {
        llrdma_rank_stats_t r{};
        r.rank = -1;
        std::string why;
        int rc = llrdma::parse(json, r, why);
        if (rc == LLRDMA_ERR_INVALID) {
            llrdma::set_err(err, errlen, why);
            return rc;
        }
        *out = r; // also for NOT_FOUND: the identity is useful to the caller
        if (rc == LLRDMA_ERR_NOT_FOUND)
            llrdma::set_err(err, errlen, "no \"stats\" (the record written at MPI_Init)");
        return rc;
    } catch (const nlohmann::json::exception &e) { // a reader bug, not bad input: say so
        llrdma::set_err(err, errlen, std::string("internal error reading the record: ") + e.what());
        return LLRDMA_ERR_INTERNAL;
    } catch (...) {
        llrdma::set_err(err, errlen, "out of memory");
        return LLRDMA_ERR_INTERNAL;
    }
}

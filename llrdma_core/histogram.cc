// histogram.cc -- arithmetic of btl/llrdma's message-size histogram and its place in the
// per-rank dump (llrdma_hist.h).  The BTL only increments (inline, in the header); everything
// that reads the counts lives here so the rules are unit-tested without a device.
#include "llrdma_internal.hpp"
#include "json_reader.hpp"
#include "llrdma_hist.h"
#include "llrdma_internal.hpp"

#include <cmath>
#include <string>

namespace llrdma
{
namespace
{

const char *const kPathName[LLRDMA_HIST_NPATHS] = {"ll", "bw", "rdma"};

void put_array(std::string &o, const uint64_t *v)
{
    o += '[';
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
        if (b)
            o += ',';
        o += std::to_string(v[b]);
    }
    o += ']';
}

std::string stats_json(const llrdma_hist_t &h)
{
    std::string o = "{\"buckets\":\"log2\",\"header_allowance\":";
    o += std::to_string(LLRDMA_HIST_HDR_ALLOWANCE);
    // Self-describing for plots and other readers; the unbounded last bucket is null.
    o += ",\"bucket_max\":[";
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b) {
        if (b)
            o += ',';
        uint64_t m = llrdma_hist_bucket_max(b);
        o += m == UINT64_MAX ? std::string("null") : std::to_string(m);
    }
    o += ']';
    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
        o += ",\"";
        o += kPathName[p];
        o += "\":{\"count\":";
        put_array(o, h.count[p]);
        o += ",\"bytes\":";
        put_array(o, h.bytes[p]);
        o += ",\"waits\":";
        o += std::to_string(h.waits[p]);
        if (p < 2) {
            o += ",\"cq_completions\":";
            o += std::to_string(h.cq_completions[p]);
            o += ",\"cq_events\":";
            o += std::to_string(h.cq_events[p]);
            o += ",\"thread_completions\":";
            o += std::to_string(h.thread_completions[p]);
        }
        o += '}';
    }
    o += ",\"thread_cpu_us\":";
    o += std::to_string(h.thread_cpu_us);
    o += '}';
    return o;
}

using json::JValue;

bool u64_of(const JValue *v, uint64_t &out)
{
    return v != nullptr && json::to_u64(*v, out);
}

// A JSON integer within long long (rank, pid).
bool int_of(const JValue *v, long long &out)
{
    if (v == nullptr || v->type != JValue::Number)
        return false;
    JValue mag = *v;
    bool neg = !mag.s.empty() && mag.s[0] == '-';
    if (neg)
        mag.s.erase(0, 1);
    uint64_t m;
    if (!u64_of(&mag, m) || m > static_cast<uint64_t>(INT32_MAX))
        return false; // ranks and pids fit 32 bits
    out = neg ? -static_cast<long long>(m) : static_cast<long long>(m);
    return true;
}

bool read_array(const JValue *v, uint64_t *out, const std::string &what, std::string &why)
{
    if (v == nullptr || v->type != JValue::Array) {
        why = what + ": missing or not an array";
        return false;
    }
    if (v->items.size() != LLRDMA_HIST_BUCKETS) {
        why = what + ": " + std::to_string(v->items.size()) + " buckets, expected " +
              std::to_string(LLRDMA_HIST_BUCKETS);
        return false;
    }
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b)
        if (!u64_of(&v->items[b], out[b])) {
            why = what + "[" + std::to_string(b) + "]: not a non-negative integer";
            return false;
        }
    return true;
}

int parse(const char *text, llrdma_rank_stats_t &r, std::string &why)
{
    JValue root;
    if (!json::Parser(text).document(root)) {
        why = "not valid JSON (truncated or corrupt)";
        return LLRDMA_ERR_INVALID;
    }
    const JValue *rec = root.type == JValue::Object ? root.get("record") : nullptr;
    const bool final_rec = rec != nullptr && rec->type == JValue::String && rec->s == "finalize";
    if (root.type != JValue::Object || root.get("size_hint") == nullptr ||
        (!final_rec && root.get("btl_status") == nullptr)) {
        why = "not an llrdma dump record (no \"size_hint\" with \"btl_status\" or "
              "\"record\":\"finalize\")";
        return LLRDMA_ERR_INVALID;
    }
    long long rank = -1, pid = 0;
    uint64_t hint = 0, sq = 0;
    const JValue *host = root.get("host");
    if (!int_of(root.get("rank"), rank) || !u64_of(root.get("size_hint"), hint) ||
        (root.get("pid") != nullptr && !int_of(root.get("pid"), pid)) ||
        (host != nullptr && (host->type != JValue::String || host->s.size() >= sizeof r.host))) {
        why = "llrdma dump record with a malformed rank, pid, host or size_hint";
        return LLRDMA_ERR_INVALID;
    }
    r.rank = static_cast<int>(rank);
    r.pid = static_cast<long>(pid);
    r.hint = hint;
    if (host != nullptr)
        (void)copy_out(host->s, r.host, sizeof r.host);
    if (!final_rec)
        return LLRDMA_ERR_NOT_FOUND; // the MPI_Init record: configuration, no counts
    if (root.get("ll_sq_depth") != nullptr) {
        if (!u64_of(root.get("ll_sq_depth"), sq) || sq > UINT32_MAX) {
            why = "\"ll_sq_depth\" is not a 32-bit count";
            return LLRDMA_ERR_INVALID;
        }
        r.ll_sq_depth = static_cast<uint32_t>(sq);
    }
    const JValue *st = root.get("stats");
    if (st == nullptr || st->type != JValue::Object) {
        why = "\"stats\" is missing or not an object";
        return LLRDMA_ERR_INVALID;
    }
    const JValue *kind = st->get("buckets");
    uint64_t allow = 0;
    if (kind == nullptr || kind->type != JValue::String || kind->s != "log2" ||
        !u64_of(st->get("header_allowance"), allow) || allow != LLRDMA_HIST_HDR_ALLOWANCE) {
        why = "\"stats\": unknown bucket layout (expected log2 with a header allowance of " +
              std::to_string(LLRDMA_HIST_HDR_ALLOWANCE) + ")";
        return LLRDMA_ERR_INVALID;
    }
    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p) {
        const JValue *path = st->get(kPathName[p]);
        std::string name = std::string("stats.") + kPathName[p];
        if (path == nullptr || path->type != JValue::Object) {
            why = name + ": missing or not an object";
            return LLRDMA_ERR_INVALID;
        }
        if (!read_array(path->get("count"), r.hist.count[p], name + ".count", why) ||
            !read_array(path->get("bytes"), r.hist.bytes[p], name + ".bytes", why))
            return LLRDMA_ERR_INVALID;
        if (!u64_of(path->get("waits"), r.hist.waits[p])) {
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
            const JValue *v = path->get(key);
            if (v == nullptr)
                continue;
            if (!u64_of(v, *dst[k])) {
                why = name + "." + key + ": not a non-negative integer";
                return LLRDMA_ERR_INVALID;
            }
        }
    }
    const JValue *cpu = st->get("thread_cpu_us");
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
        std::string o = "{\"rank\":" + std::to_string(cfg->rank);
        o += ",\"size\":" + std::to_string(cfg->size) + ",\"host\":";
        llrdma::put_json_string(o, llrdma::from_fixed(cfg->host, sizeof cfg->host));
        o += ",\"pid\":" + std::to_string(cfg->pid);
        o += ",\"size_hint\":" + std::to_string(cfg->hint.bytes);
        o += ",\"ll_sq_depth\":" +
             std::to_string(cfg->profile.generic ? 0u : cfg->profile.ll.sq_depth);
        o += ",\"record\":\"finalize\",\"stats\":";
        o += llrdma::stats_json(*h);
        o += '}';
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
    } catch (...) {
        llrdma::set_err(err, errlen, "out of memory");
        return LLRDMA_ERR_INTERNAL;
    }
}

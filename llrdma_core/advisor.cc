// advisor.cc -- "what hint should I use?": the field report's guidance (docs/background.md,
// "When to use it" and failure case 1) applied to the message-size histograms of every rank
// (llrdma_hist.h).  Pure: the tools read the dumps and print the result.
#include "json.hpp"
#include "llrdma_hist.h"
#include "llrdma_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace llrdma
{
namespace
{

// The thresholds are the report's words made numbers; docs/hint.md lists them.
constexpr int kSpanBuckets = 10;          // P10..P90 over >= 2^10 (three orders): sizes span
constexpr unsigned kBwFirstBucket = 16;   // median payload above 64K: bandwidth-first
constexpr double kPlusBitShare = 0.10;    // >= 10% just above the median's bucket: cover them
constexpr double kQueueFullShare = 0.002; // >= 1 LL send in 500 waited (report: every few hundred)
constexpr uint64_t kQueueFullMin = 10;    // ... and not a handful in a short run
constexpr int kRanksDifferBuckets = 2;    // per-rank medians 4x apart
constexpr uint64_t kTooLargeFactor = 4;   // current hint >= 4x the recommendation
constexpr uint64_t kMinHint = 64;         // below this only ob1's control messages remain

void add_line(char (*lines)[256], int &n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void add_line(char (*lines)[256], int &n, const char *fmt, ...)
{
    if (n >= LLRDMA_ADVICE_MAX_LINES)
        return;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(lines[n], 256, fmt, ap);
    va_end(ap);
    ++n;
}

std::string range_text(int b)
{
    if (b <= 0)
        return "0..1 B";
    if (b >= LLRDMA_HIST_BUCKETS - 1)
        return "above " + format_size(llrdma_hist_bucket_max(LLRDMA_HIST_BUCKETS - 2));
    return "(" + format_size(llrdma_hist_bucket_max(b - 1)) + ", " +
           format_size(llrdma_hist_bucket_max(b)) + "]";
}

double share(uint64_t part, uint64_t whole)
{
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

// Bucket a hint falls in (its payload bound), so a hint can be compared with buckets.
int bucket_of_hint(uint64_t hint)
{
    return static_cast<int>(llrdma_hist_bucket(hint + LLRDMA_HIST_HDR_ALLOWANCE));
}

void advise(const llrdma_rank_stats_t *ranks, int n, llrdma_advice_t &a)
{
    a.nranks = n;
    llrdma_hist_t all{};
    int lowest = -1;
    bool hints_differ = false;
    int med_lo = LLRDMA_HIST_BUCKETS, med_hi = -1, rank_lo = -1, rank_hi = -1;
    for (int i = 0; i < n; ++i) {
        const llrdma_rank_stats_t &r = ranks[i];
        llrdma_hist_merge(&all, &r.hist);
        if (lowest < 0 || r.rank < ranks[lowest].rank)
            lowest = i;
        if (r.hint != ranks[0].hint)
            hints_differ = true;
        int med = llrdma_hist_percentile_bucket(&r.hist, 50.0);
        if (med < 0)
            continue;
        ++a.nranks_data;
        if (med < med_lo) {
            med_lo = med;
            rank_lo = r.rank;
        }
        if (med > med_hi) {
            med_hi = med;
            rank_hi = r.rank;
        }
    }
    uint64_t counts[LLRDMA_HIST_BUCKETS];
    a.fragments = llrdma_hist_totals(&all, counts);
    for (int p = 0; p < LLRDMA_HIST_NPATHS; ++p)
        for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b)
            a.bytes += all.bytes[p][b];
    a.current_hint = lowest >= 0 ? ranks[lowest].hint : 0;
    if (a.fragments == 0) {
        a.kind = LLRDMA_ADVICE_NO_DATA;
        add_line(a.reasons, a.nreasons,
                 "no fragment was counted on %d record(s): btl/llrdma carried no traffic (not "
                 "active, or other transports were used)",
                 n);
        return;
    }

    // Warnings first: they hold whatever the recommendation is.
    if (hints_differ) {
        a.rules |= LLRDMA_RULE_HINTS_DIFFER;
        add_line(a.warnings, a.nwarnings,
                 "ranks ran with different hints (rank %d: %s); the counts are combined, but "
                 "check why they differ (llrdma-check, failure case 3)",
                 ranks[lowest].rank, format_size(a.current_hint).c_str());
    }
    uint64_t ll_sends = 0;
    for (unsigned b = 0; b < LLRDMA_HIST_BUCKETS; ++b)
        ll_sends += all.count[LLRDMA_HIST_LL][b];
    a.ll_wait_share = share(all.waits[LLRDMA_HIST_LL], ll_sends);
    if (all.waits[LLRDMA_HIST_LL] >= kQueueFullMin && a.ll_wait_share >= kQueueFullShare) {
        a.rules |= LLRDMA_RULE_QUEUE_FULL;
        add_line(a.warnings, a.nwarnings,
                 "the low-latency queue was full for %llu of %llu sends (%.2f%%) at hint %s: "
                 "bursts under the hint waited for a slot or credit, the report's periodic "
                 "spikes (failure case 1); a smaller hint keeps fewer, larger messages off it",
                 static_cast<unsigned long long>(all.waits[LLRDMA_HIST_LL]),
                 static_cast<unsigned long long>(ll_sends), 100.0 * a.ll_wait_share,
                 format_size(a.current_hint).c_str());
    }
    if (a.nranks_data > 1 && med_hi - med_lo >= kRanksDifferBuckets) {
        a.rules |= LLRDMA_RULE_RANKS_DIFFER;
        add_line(a.warnings, a.nwarnings,
                 "ranks saw very different size mixes: median %s on rank %d, %s on rank %d; "
                 "one hint serves all ranks, so it suits some less",
                 range_text(med_lo).c_str(), rank_lo, range_text(med_hi).c_str(), rank_hi);
    }

    const int p10 = llrdma_hist_percentile_bucket(&all, 10.0);
    const int p50 = llrdma_hist_percentile_bucket(&all, 50.0);
    const int p90 = llrdma_hist_percentile_bucket(&all, 90.0);
    a.p10_max = llrdma_hist_bucket_max(static_cast<unsigned>(p10));
    a.p50_max = llrdma_hist_bucket_max(static_cast<unsigned>(p50));
    a.p90_max = llrdma_hist_bucket_max(static_cast<unsigned>(p90));

    if (p90 - p10 >= kSpanBuckets) {
        a.rules |= LLRDMA_RULE_SPAN;
        add_line(a.reasons, a.nreasons,
                 "sizes span orders of magnitude: 10%% of fragments are in %s or below, 10%% in "
                 "%s or above; a hint serves one narrow band, so don't use one",
                 range_text(p10).c_str(), range_text(p90).c_str());
    }
    if (static_cast<unsigned>(p50) > kBwFirstBucket) {
        a.rules |= LLRDMA_RULE_BW_FIRST;
        add_line(a.reasons, a.nreasons,
                 "bandwidth-first traffic: the median fragment is in %s, above 64K, where a "
                 "low-latency path has nothing to win; don't use a hint",
                 range_text(p50).c_str());
    }
    if (a.rules & (LLRDMA_RULE_SPAN | LLRDMA_RULE_BW_FIRST)) {
        a.kind = LLRDMA_ADVICE_NO_HINT;
        return;
    }

    // Cover the median plus a bit, never the maximum: the median's bucket, raised to the
    // bucket of the 75th percentile, and one step more when many sizes sit just above.
    int rec = p50;
    a.rules |= LLRDMA_RULE_MEDIAN;
    add_line(a.reasons, a.nreasons,
             "the median fragment is in %s: the hint covers it (cover the median plus a bit, "
             "not the maximum)",
             range_text(p50).c_str());
    const int p75 = llrdma_hist_percentile_bucket(&all, 75.0);
    if (p75 > rec) {
        rec = p75;
        a.rules |= LLRDMA_RULE_PLUS_BIT;
        add_line(a.reasons, a.nreasons,
                 "a quarter of the fragments are larger, up to %s: raised to cover three in four",
                 range_text(rec).c_str());
    }
    const double next = rec + 1 < LLRDMA_HIST_BUCKETS ? share(counts[rec + 1], a.fragments) : 0;
    if (next >= kPlusBitShare) {
        ++rec;
        a.rules |= LLRDMA_RULE_PLUS_BIT;
        add_line(a.reasons, a.nreasons,
                 "%.0f%% of fragments are in %s, just above: raised one step so they do not "
                 "fall off the cliff above the hint",
                 100.0 * next, range_text(rec).c_str());
    }
    a.kind = LLRDMA_ADVICE_HINT;
    a.hint = std::max(llrdma_hist_bucket_max(static_cast<unsigned>(rec)), kMinHint);
    a.hint = std::min<uint64_t>(a.hint, LLRDMA_HINT_MAX);
    const int hb = bucket_of_hint(a.hint);
    uint64_t under = 0;
    for (int b = 0; b <= hb && b < LLRDMA_HIST_BUCKETS; ++b)
        under += counts[b];
    a.covered = share(under, a.fragments);
    int top = LLRDMA_HIST_BUCKETS - 1;
    while (top > 0 && counts[top] == 0)
        --top;
    if (under == a.fragments)
        add_line(a.reasons, a.nreasons, "all %llu fragments fit under %s",
                 static_cast<unsigned long long>(a.fragments), format_size(a.hint).c_str());
    else
        add_line(a.reasons, a.nreasons,
                 "%.1f%% of %llu fragments fit under %s; the largest (%s) take the bandwidth "
                 "path",
                 100.0 * a.covered, static_cast<unsigned long long>(a.fragments),
                 format_size(a.hint).c_str(), range_text(top).c_str());

    if (hints_differ || a.current_hint == 0)
        return;
    if (a.current_hint >= kTooLargeFactor * a.hint) {
        a.rules |= LLRDMA_RULE_TOO_LARGE;
        add_line(a.warnings, a.nwarnings,
                 "the current hint %s is %llux the recommendation: larger than the traffic "
                 "needs (failure case 1: a hint chosen too large)",
                 format_size(a.current_hint).c_str(),
                 static_cast<unsigned long long>(a.current_hint / a.hint));
    } else if (a.current_hint < a.hint) {
        uint64_t above = 0;
        for (int b = bucket_of_hint(a.current_hint) + 1; b < LLRDMA_HIST_BUCKETS; ++b)
            above += counts[b];
        a.rules |= LLRDMA_RULE_ABOVE_HINT;
        add_line(a.reasons, a.nreasons,
                 "at the current hint %s, %.1f%% of fragments took the bandwidth path",
                 format_size(a.current_hint).c_str(), 100.0 * share(above, a.fragments));
    }
}

// Shares are written to the precision the text form has always had (4 and 6 decimals),
// rounded here because nlohmann writes the shortest form of a double (0.96, not 0.9600).
double decimals(double v, double scale)
{
    return std::round(v * scale) / scale;
}

std::string advice_json(const llrdma_advice_t &a)
{
    static const char *const kRuleNames[] = {"median",       "plus_bit",   "span",
                                             "bw_first",     "queue_full", "ranks_differ",
                                             "hints_differ", "too_large",  "above_hint"};
    static const char *const kKind[] = {"hint", "none", "no-data"};
    using json::Json;
    Json o = Json::object();
    o["recommendation"] = kKind[a.kind];
    o["hint"] = a.hint;
    o["hint_text"] = format_size(a.hint);
    Json rules = Json::array();
    for (unsigned i = 0; i < sizeof kRuleNames / sizeof kRuleNames[0]; ++i)
        if (a.rules & (1u << i))
            rules.push_back(kRuleNames[i]);
    o["rules"] = std::move(rules);
    o["ranks"] = a.nranks;
    o["ranks_with_data"] = a.nranks_data;
    o["fragments"] = a.fragments;
    o["bytes"] = a.bytes;
    o["current_hint"] = a.current_hint;
    o["p10_max"] = a.p10_max;
    o["p50_max"] = a.p50_max;
    o["p90_max"] = a.p90_max;
    o["covered"] = decimals(a.covered, 1e4);
    o["ll_wait_share"] = decimals(a.ll_wait_share, 1e6);
    Json reasons = Json::array(), warnings = Json::array();
    for (int i = 0; i < a.nreasons; ++i)
        reasons.push_back(from_fixed(a.reasons[i], sizeof a.reasons[i]));
    for (int i = 0; i < a.nwarnings; ++i)
        warnings.push_back(from_fixed(a.warnings[i], sizeof a.warnings[i]));
    o["reasons"] = std::move(reasons);
    o["warnings"] = std::move(warnings);
    return json::dump(o);
}

} // namespace
} // namespace llrdma

extern "C" int llrdma_advise(const llrdma_rank_stats_t *ranks, int n, llrdma_advice_t *out)
{
    if (out == nullptr || n < 0 || (n > 0 && ranks == nullptr))
        return LLRDMA_ERR_INVALID;
    try {
        llrdma_advice_t a{};
        llrdma::advise(ranks, n, a);
        *out = a;
        return LLRDMA_OK;
    } catch (...) {
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" int llrdma_advice_to_json(const llrdma_advice_t *a, char *buf, size_t len)
{
    if (a == nullptr || buf == nullptr || len == 0)
        return LLRDMA_ERR_INVALID;
    try {
        std::string s = llrdma::advice_json(*a);
        if (s.size() >= len) {
            buf[0] = '\0';
            return LLRDMA_ERR_TRUNCATED;
        }
        return llrdma::copy_out(s, buf, len);
    } catch (...) {
        buf[0] = '\0';
        return LLRDMA_ERR_INTERNAL;
    }
}

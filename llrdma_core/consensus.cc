// consensus.cc -- detect ranks whose size hint differs from the rest of the job.
//
// A hint mismatch is the report's third failure: one process got its value from a config
// file, the others from the environment, and nothing said so.  Every rank publishes
// (bytes, host, origin) in the modex; rank 0 compares and names the odd ones out.
#include "llrdma_internal.hpp"

#include <map>

namespace llrdma
{
namespace
{

// At scale a broken file can make hundreds of ranks deviate; list enough to find the
// pattern (host, origin) without flooding stderr.
constexpr int kReportMaxDeviantLines = 32;

struct Tally {
    int count = 0;
    int min_rank = 0;
    int first_idx = 0;
};

int consensus(const llrdma_peer_hint_t *peers, int n, llrdma_consensus_t &out, int *deviant_idx,
              int max_deviants)
{
    out = llrdma_consensus_t{};
    std::map<uint64_t, Tally> tally;
    for (int i = 0; i < n; ++i) {
        const llrdma_peer_hint_t &p = peers[i];
        if (!p.present)
            continue; // excluded the component: nothing to agree with
        ++out.present;
        auto [it, fresh] = tally.try_emplace(p.bytes);
        Tally &t = it->second;
        if (fresh) {
            t.min_rank = p.rank;
            t.first_idx = i;
        } else if (p.rank < t.min_rank) {
            t.min_rank = p.rank;
        }
        ++t.count;
    }
    if (out.present == 0)
        return LLRDMA_OK;

    // Majority = most ranks.  A tie goes to the value held by the lowest rank (then the
    // earliest input position): deterministic, independent of the order peers arrived in,
    // and with rank 0 in the tie its own value wins, which matches what the user launched.
    const std::pair<const uint64_t, Tally> *best = nullptr;
    for (const auto &kv : tally) {
        const Tally &t = kv.second;
        if (best == nullptr || t.count > best->second.count ||
            (t.count == best->second.count &&
             (t.min_rank < best->second.min_rank ||
              (t.min_rank == best->second.min_rank && t.first_idx < best->second.first_idx))))
            best = &kv;
    }
    out.majority_bytes = best->first;
    out.majority_count = best->second.count;

    for (int i = 0; i < n; ++i) {
        if (!peers[i].present || peers[i].bytes == out.majority_bytes)
            continue;
        if (deviant_idx != nullptr && out.ndeviants < max_deviants)
            deviant_idx[out.ndeviants] = i;
        ++out.ndeviants;
    }
    return LLRDMA_OK;
}

std::string peer_line(const llrdma_peer_hint_t &p)
{
    return "rank " + std::to_string(p.rank) + " on " + from_fixed(p.host, sizeof p.host);
}

std::string origin_of(const llrdma_peer_hint_t &p)
{
    return "(" + from_fixed(p.origin, sizeof p.origin) + ")";
}

// Deviants are recomputed from peers rather than read from deviant_idx: that array may hold
// fewer than c.ndeviants entries (max_deviants), and the report must not read past it.
std::string report(const llrdma_peer_hint_t *peers, int n, const llrdma_consensus_t &c)
{
    if (c.ndeviants == 0 || c.present == 0)
        return std::string();
    std::string o = "llrdma: the low-latency RDMA size hint differs across ranks (majority " +
                    format_size(c.majority_bytes) + " on " + std::to_string(c.majority_count) +
                    " of " + std::to_string(c.present) + " ranks)\n";
    const llrdma_peer_hint_t *example = nullptr;
    int listed = 0, deviants = 0;
    for (int i = 0; i < n; ++i) {
        const llrdma_peer_hint_t &p = peers[i];
        if (!p.present)
            continue;
        if (p.bytes == c.majority_bytes) {
            if (example == nullptr || p.rank < example->rank)
                example = &p;
            continue;
        }
        ++deviants;
        if (listed < kReportMaxDeviantLines) {
            o += "  " + peer_line(p) + ": " + format_size(p.bytes) + " " + origin_of(p) + "\n";
            ++listed;
        }
    }
    if (deviants > listed)
        o += "  ... and " + std::to_string(deviants - listed) + " more ranks\n";
    if (example != nullptr)
        o += "  majority value from e.g. " + peer_line(*example) + " " + origin_of(*example);
    else if (!o.empty() && o.back() == '\n')
        o.pop_back(); // no line ends with a newline the caller did not ask for
    return o;
}

// Wire form: "<bytes>;<host>;<origin>", host and origin percent-encoded ('%', ';' and
// control characters) so the separator is unambiguous and the string has no NUL inside.
// The rank is not encoded: the modex already knows whose value it is.
void put_escaped(std::string &o, const std::string &s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (unsigned char c : s) {
        if (c == '%' || c == ';' || c < 0x20 || c == 0x7f) {
            o += '%';
            o += hex[c >> 4];
            o += hex[c & 0xf];
        } else {
            o += static_cast<char>(c);
        }
    }
}

int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

bool unescape(std::string_view in, char *out, size_t cap)
{
    std::string s;
    for (size_t i = 0; i < in.size(); ++i) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= in.size())
                return false;
            int hi = hexval(in[i + 1]), lo = hexval(in[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return false;
            s += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            return false; // the encoder never emits raw control characters
        } else {
            s += c;
        }
    }
    if (s.size() >= cap)
        return false;
    return copy_out(s, out, cap) == LLRDMA_OK;
}

int decode(const char *str, llrdma_peer_hint_t &p)
{
    std::string_view s(str);
    size_t a = s.find(';');
    size_t b = a == std::string_view::npos ? a : s.find(';', a + 1);
    if (b == std::string_view::npos || s.find(';', b + 1) != std::string_view::npos)
        return LLRDMA_ERR_INVALID;
    std::string_view num = s.substr(0, a);
    if (num.empty() || num.size() > 20)
        return LLRDMA_ERR_INVALID;
    uint64_t v = 0;
    for (char c : num) {
        if (c < '0' || c > '9')
            return LLRDMA_ERR_INVALID;
        uint64_t d = static_cast<uint64_t>(c - '0');
        if (v > (UINT64_MAX - d) / 10)
            return LLRDMA_ERR_INVALID;
        v = v * 10 + d;
    }
    llrdma_peer_hint_t r = p; // keep the caller's rank
    r.bytes = v;
    r.present = 1;
    if (!unescape(s.substr(a + 1, b - a - 1), r.host, sizeof r.host) ||
        !unescape(s.substr(b + 1), r.origin, sizeof r.origin))
        return LLRDMA_ERR_INVALID;
    p = r;
    return LLRDMA_OK;
}

} // namespace
} // namespace llrdma

extern "C" int llrdma_consensus(const llrdma_peer_hint_t *peers, int n, llrdma_consensus_t *out,
                                int *deviant_idx, int max_deviants)
{
    if (out == nullptr || n < 0 || (n > 0 && peers == nullptr) || max_deviants < 0)
        return LLRDMA_ERR_INVALID;
    try {
        return llrdma::consensus(peers, n, *out, deviant_idx, max_deviants);
    } catch (...) {
        *out = llrdma_consensus_t{};
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" int llrdma_consensus_report(const llrdma_peer_hint_t *peers, int n,
                                       const llrdma_consensus_t *c, const int *deviant_idx,
                                       char *buf, size_t len)
{
    (void)deviant_idx; // see report(): recomputed from peers, kept for API stability
    if (c == nullptr || buf == nullptr || len == 0 || n < 0 || (n > 0 && peers == nullptr))
        return LLRDMA_ERR_INVALID;
    try {
        // A cut report is still useful to a human, so truncation keeps the prefix.
        return llrdma::copy_out(llrdma::report(peers, n, *c), buf, len);
    } catch (...) {
        buf[0] = '\0';
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" int llrdma_peer_encode(const llrdma_peer_hint_t *p, char *buf, size_t len)
{
    if (p == nullptr || buf == nullptr || len == 0)
        return LLRDMA_ERR_INVALID;
    try {
        std::string o = std::to_string(p->bytes) + ";";
        llrdma::put_escaped(o, llrdma::from_fixed(p->host, sizeof p->host));
        o += ';';
        llrdma::put_escaped(o, llrdma::from_fixed(p->origin, sizeof p->origin));
        if (o.size() >= len) { // a cut wire string would decode to the wrong origin
            buf[0] = '\0';
            return LLRDMA_ERR_TRUNCATED;
        }
        return llrdma::copy_out(o, buf, len);
    } catch (...) {
        buf[0] = '\0';
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" int llrdma_peer_decode(const char *s, llrdma_peer_hint_t *p)
{
    if (s == nullptr || p == nullptr)
        return LLRDMA_ERR_INVALID;
    try {
        return llrdma::decode(s, *p);
    } catch (...) {
        return LLRDMA_ERR_INTERNAL;
    }
}

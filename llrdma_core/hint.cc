// hint.cc -- which size hint takes effect, and where it came from.
//
// Every rank must be able to say not only its hint but its source: the field report's third
// failure (a config file silently overriding the environment on some processes) is only
// diagnosable when the origin travels with the value.
#include "llrdma_internal.hpp"

#include <cmath>
#include <cstdio>

namespace llrdma
{
namespace
{

constexpr const char *kDefaultMcaName = "btl_llrdma_size_hint";
constexpr const char *kAliasName = "RDMA_LOW_LATENCY_HINT";

// Human-readable origin of a value; what users grep for when ranks disagree.
std::string origin_for(llrdma_source_t src, const char *name, const char *file, int line)
{
    switch (src) {
    case LLRDMA_SRC_API:
        return "llrdma_set_size_hint() before MPI_Init";
    case LLRDMA_SRC_ENV:
        return std::string("environment (OMPI_MCA_") + name + "; mpirun --mca sets this too)";
    case LLRDMA_SRC_FILE: {
        std::string s = std::string("file ") + (file != nullptr ? file : "(unknown path)");
        if (line > 0)
            s += ":" + std::to_string(line);
        return s;
    }
    case LLRDMA_SRC_ALIAS:
        return std::string("environment (") + kAliasName + ")";
    case LLRDMA_SRC_OVERRIDE:
        return std::string("override (") + name + ")";
    case LLRDMA_SRC_OTHER:
        return std::string("other (") + name + ": singleton command line, MPI_T, ...)";
    case LLRDMA_SRC_DEFAULT:
    default:
        return "default";
    }
}

// The glue is C, where an enum object may hold any int; reading such a value as the C++ enum
// type is undefined, so look at its bytes as an int instead.
static_assert(sizeof(llrdma_source_t) == sizeof(int), "C enums are int-sized");
int source_int(const llrdma_source_t &src)
{
    int v;
    std::memcpy(&v, &src, sizeof v);
    return v;
}

bool known_source(int src)
{
    return src >= LLRDMA_SRC_DEFAULT && src <= LLRDMA_SRC_OTHER;
}

std::string trimmed(const char *text)
{
    std::string_view s(text);
    size_t b = 0, e = s.size();
    while (b < e && is_blank(s[b]))
        ++b;
    while (e > b && is_blank(s[e - 1]))
        --e;
    return std::string(s.substr(b, e - b));
}

// Parse the winning text; on failure err names the parameter, the text and its origin.
int take(const char *param, const char *text, llrdma_source_t src, const std::string &origin,
         llrdma_hint_t &h, std::string &err)
{
    std::string reason;
    uint64_t v = 0;
    int rc = parse_size(text, LLRDMA_HINT_MAX, v, reason);
    if (rc != LLRDMA_OK) {
        err = std::string(param) + " = '" + text + "' (from " + origin + "): " + reason;
        return rc;
    }
    h.bytes = v;
    h.source = src;
    (void)copy_out(origin, h.origin, sizeof h.origin);
    // The default carries no text: "size_hint_text" stays empty unless someone set something.
    (void)copy_out(src == LLRDMA_SRC_DEFAULT ? std::string() : trimmed(text), h.text,
                   sizeof h.text);
    return LLRDMA_OK;
}

int resolve(const llrdma_hint_inputs_t &in, llrdma_hint_t &h, std::string &err)
{
    const char *name = in.mca_name != nullptr ? in.mca_name : kDefaultMcaName;
    if (!known_source(source_int(in.mca_source))) {
        err = std::string(name) + ": unknown source " + std::to_string(source_int(in.mca_source));
        return LLRDMA_ERR_INVALID;
    }

    // Only the winning source is parsed.  An invalid value at a lower-precedence source is
    // shadowed and deliberately NOT an error: it takes no effect, and failing MPI_Init over a
    // stale variable the user already overrode would be worse than ignoring it.  (The glue may
    // still warn about it; the core stays quiet.)

    // 1. The application's own call (stored only after validation, so it cannot be invalid).
    uint64_t api = 0;
    if (llrdma_state_get_api_hint(&api) == LLRDMA_OK) {
        h.bytes = api;
        h.source = LLRDMA_SRC_API;
        (void)copy_out(origin_for(LLRDMA_SRC_API, name, nullptr, 0), h.origin, sizeof h.origin);
        (void)copy_out(format_size(api), h.text, sizeof h.text);
        return LLRDMA_OK;
    }

    // 2. The MCA variable, when something other than its registered default set it.
    if (in.mca_source != LLRDMA_SRC_DEFAULT && in.mca_text != nullptr) {
        return take(name, in.mca_text, in.mca_source,
                    origin_for(in.mca_source, name, in.mca_file, in.mca_line), h, err);
    }

    // 3. The report's environment variable.
    if (in.alias_text != nullptr) {
        return take(kAliasName, in.alias_text, LLRDMA_SRC_ALIAS,
                    origin_for(LLRDMA_SRC_ALIAS, name, nullptr, 0), h, err);
    }

    // 4. The MCA variable's registered default (normally "0").  It is still parsed so that a
    // broken default is reported rather than silently read as "no hint".
    if (in.mca_text != nullptr)
        return take(name, in.mca_text, LLRDMA_SRC_DEFAULT, "default", h, err);
    return LLRDMA_OK; // h already holds the default
}

} // namespace
} // namespace llrdma

extern "C" const char *llrdma_source_name(llrdma_source_t src)
{
    switch (llrdma::source_int(src)) {
    case LLRDMA_SRC_DEFAULT:
        return "default";
    case LLRDMA_SRC_API:
        return "api";
    case LLRDMA_SRC_ENV:
        return "env";
    case LLRDMA_SRC_FILE:
        return "file";
    case LLRDMA_SRC_ALIAS:
        return "alias";
    case LLRDMA_SRC_OVERRIDE:
        return "override";
    case LLRDMA_SRC_OTHER:
        return "other";
    }
    return "unknown";
}

bool llrdma::source_from_name(std::string_view name, llrdma_source_t &out)
{
    for (int s = LLRDMA_SRC_DEFAULT; s <= LLRDMA_SRC_OTHER; ++s) {
        auto src = static_cast<llrdma_source_t>(s);
        if (name == llrdma_source_name(src)) {
            out = src;
            return true;
        }
    }
    return false;
}

extern "C" int llrdma_hint_resolve(const llrdma_hint_inputs_t *in, llrdma_hint_t *out, char *err,
                                   size_t errlen)
{
    try {
        if (in == nullptr || out == nullptr) {
            llrdma::set_err(err, errlen, "llrdma_hint_resolve: NULL argument");
            return LLRDMA_ERR_INVALID;
        }
        llrdma_hint_t h{};
        h.source = LLRDMA_SRC_DEFAULT;
        std::snprintf(h.origin, sizeof h.origin, "default");
        std::string msg;
        int rc = llrdma::resolve(*in, h, msg);
        llrdma::set_err(err, errlen, msg);
        if (rc == LLRDMA_OK)
            *out = h;
        return rc;
    } catch (...) {
        llrdma::set_err(err, errlen, "internal error (out of memory)");
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" uint64_t llrdma_hint_for_gradient_u64(uint64_t grad_bytes, int ranks, double headroom)
{
    if (ranks <= 0 || grad_bytes == 0)
        return 0;
    if (std::isnan(headroom) || headroom < 0)
        headroom = 0;
    if (std::isinf(headroom))
        return LLRDMA_HINT_MAX;

    // Exact integer math for any sane headroom: headroom is rounded to parts per billion so
    // 0.1 means exactly 1/10 (as a double it is slightly more, and ceil() would then add a
    // spurious byte to an exact result).  grad * (1e9 + ppb) < 2^64 * 2^50 fits in 128 bits.
    constexpr double kMaxExactHeadroom = 1e6;
    constexpr uint64_t kPpb = 1000000000u;
    if (headroom <= kMaxExactHeadroom) {
        auto ppb = static_cast<uint64_t>(std::llround(headroom * static_cast<double>(kPpb)));
        unsigned __int128 num = static_cast<unsigned __int128>(grad_bytes) * (kPpb + ppb);
        unsigned __int128 den = static_cast<unsigned __int128>(ranks) * kPpb;
        unsigned __int128 q = (num + den - 1) / den;
        return q > LLRDMA_HINT_MAX ? LLRDMA_HINT_MAX : static_cast<uint64_t>(q);
    }
    // Absurd headroom: precision no longer matters, only saturation does.
    long double v = std::ceil(static_cast<long double>(grad_bytes) / ranks *
                              (1.0L + static_cast<long double>(headroom)));
    return v >= static_cast<long double>(LLRDMA_HINT_MAX) ? LLRDMA_HINT_MAX
                                                          : static_cast<uint64_t>(v);
}

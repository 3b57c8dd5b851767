// size.cc -- parse and format byte sizes ("16K", "0x4000", "2MiB").
//
// The rules are deliberately strict: a size hint that silently parsed to something else (a
// fraction truncated, a sign ignored, an unknown suffix dropped) would give a rank a different
// transport profile than its user believes, which is exactly the failure llrdma exists to
// expose.  So anything not listed below is rejected with a reason.
#include "llrdma_internal.hpp"

#include <cctype>
#include <cstdio>
#include <new>

namespace llrdma
{
namespace
{

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

struct Suffix {
    const char *name; // compared case-insensitively
    uint64_t factor;
};

// All binary: "KB" means 1024 too, because that is what users of MCA parameters mean.
constexpr Suffix kSuffixes[] = {
    {"", 1},      {"k", kKiB},   {"kb", kKiB}, {"kib", kKiB}, {"m", kMiB},
    {"mb", kMiB}, {"mib", kMiB}, {"g", kGiB},  {"gb", kGiB},  {"gib", kGiB},
};

bool iequals(std::string_view a, const char *b)
{
    size_t i = 0;
    for (; i < a.size() && b[i] != '\0'; ++i) {
        if (std::tolower(static_cast<unsigned char>(a[i])) != b[i])
            return false;
    }
    return i == a.size() && b[i] == '\0';
}

int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

const char *const kTooLarge = "too large (does not fit in 64 bits)";

int parse_hex(std::string_view s, uint64_t &out, std::string &reason)
{
    size_t i = 2; // past "0x"
    uint64_t v = 0;
    size_t ndigits = 0;
    for (; i < s.size() && hexval(s[i]) >= 0; ++i, ++ndigits) {
        if (v > (UINT64_MAX >> 4)) {
            reason = kTooLarge;
            return LLRDMA_ERR_INVALID;
        }
        v = (v << 4) | static_cast<uint64_t>(hexval(s[i]));
    }
    if (ndigits == 0) {
        reason = "no hex digits after '0x'";
        return LLRDMA_ERR_INVALID;
    }
    if (i < s.size()) {
        // A suffix on a hex number is ambiguous ("0x1B" is a digit, not "bytes").
        reason = "hex values take no suffix ('" + std::string(s.substr(i)) + "')";
        return LLRDMA_ERR_INVALID;
    }
    out = v;
    return LLRDMA_OK;
}

} // namespace

int parse_size(std::string_view text, uint64_t max, uint64_t &out, std::string &reason)
{
    size_t b = 0, e = text.size();
    while (b < e && is_blank(text[b]))
        ++b;
    while (e > b && is_blank(text[e - 1]))
        --e;
    std::string_view s = text.substr(b, e - b);
    if (s.empty()) {
        reason = "empty value";
        return LLRDMA_ERR_INVALID;
    }
    if (s.find('\0') != std::string_view::npos) {
        reason = "contains a NUL character";
        return LLRDMA_ERR_INVALID;
    }
    if (s[0] == '+' || s[0] == '-') {
        reason = "signs are not allowed";
        return LLRDMA_ERR_INVALID;
    }

    uint64_t v = 0;
    if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        int rc = parse_hex(s, v, reason);
        if (rc != LLRDMA_OK)
            return rc;
    } else {
        if (!is_digit(s[0])) {
            reason = "not a size (expected digits, e.g. '16384', '16K' or '0x4000')";
            return LLRDMA_ERR_INVALID;
        }
        // Decimal even with leading zeros: "010" is 10, not octal 8 as strtoull(.., 0) would
        // read it; nobody writes an octal size on purpose.
        size_t i = 0;
        for (; i < s.size() && is_digit(s[i]); ++i) {
            uint64_t d = static_cast<uint64_t>(s[i] - '0');
            if (v > (UINT64_MAX - d) / 10) {
                reason = kTooLarge;
                return LLRDMA_ERR_INVALID;
            }
            v = v * 10 + d;
        }
        if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
            reason = "fractions are not supported (write '1536K', not '1.5M')";
            return LLRDMA_ERR_INVALID;
        }
        if (i + 1 < s.size() && (s[i] == 'e' || s[i] == 'E') && is_digit(s[i + 1])) {
            reason = "exponent notation is not supported";
            return LLRDMA_ERR_INVALID;
        }
        // One run of blanks may separate number and suffix ("16 KiB").
        size_t j = i;
        while (j < s.size() && is_blank(s[j]))
            ++j;
        std::string_view suffix = s.substr(j);
        const Suffix *found = nullptr;
        for (const Suffix &sx : kSuffixes) {
            if (iequals(suffix, sx.name)) {
                found = &sx;
                break;
            }
        }
        if (found == nullptr) {
            reason = "unknown suffix '" + std::string(suffix) + "' (use K, M or G; all binary)";
            return LLRDMA_ERR_INVALID;
        }
        if (found->factor > 1 && v > UINT64_MAX / found->factor) {
            reason = kTooLarge;
            return LLRDMA_ERR_INVALID;
        }
        v *= found->factor;
    }

    if (v > max) {
        reason = "above the maximum " + format_size(max);
        return LLRDMA_ERR_RANGE;
    }
    out = v;
    return LLRDMA_OK;
}

std::string format_size(uint64_t bytes)
{
    char buf[32];
    if (bytes != 0 && bytes % kGiB == 0)
        std::snprintf(buf, sizeof buf, "%lluG", static_cast<unsigned long long>(bytes / kGiB));
    else if (bytes != 0 && bytes % kMiB == 0)
        std::snprintf(buf, sizeof buf, "%lluM", static_cast<unsigned long long>(bytes / kMiB));
    else if (bytes != 0 && bytes % kKiB == 0)
        std::snprintf(buf, sizeof buf, "%lluK", static_cast<unsigned long long>(bytes / kKiB));
    else
        std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(bytes));
    return buf;
}

} // namespace llrdma

extern "C" int llrdma_parse_size(const char *text, uint64_t max, uint64_t *out, char *err,
                                 size_t errlen)
{
    try {
        if (text == nullptr) {
            llrdma::set_err(err, errlen, "(null): no value");
            return LLRDMA_ERR_INVALID;
        }
        if (out == nullptr) {
            llrdma::set_err(err, errlen, "internal: NULL output pointer");
            return LLRDMA_ERR_INVALID;
        }
        std::string reason;
        uint64_t v = 0;
        int rc = llrdma::parse_size(text, max, v, reason);
        if (rc != LLRDMA_OK) {
            llrdma::set_err(err, errlen, "'" + std::string(text) + "': " + reason);
            return rc;
        }
        *out = v;
        llrdma::set_err(err, errlen, "");
        return LLRDMA_OK;
    } catch (...) {
        llrdma::set_err(err, errlen, "internal error (out of memory)");
        return LLRDMA_ERR_INTERNAL;
    }
}

extern "C" void llrdma_format_size(uint64_t bytes, char *buf, size_t len)
{
    try {
        (void)llrdma::copy_out(llrdma::format_size(bytes), buf, len);
    } catch (...) {
        // Cannot happen in practice (the string fits the small-string buffer).
        if (buf != nullptr && len > 0)
            buf[0] = '\0';
    }
}

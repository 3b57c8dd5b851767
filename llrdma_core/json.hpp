// json.hpp -- the core's use of nlohmann-json (internal, C++ only, no I/O).
//
// ordered_json: objects are written in the order the fields are added, which is the dump
// format.  Integers stay 64-bit integers both ways (never a double), so counts above 2^53
// read back exactly.  Nothing here throws past its caller's catch: the extern "C" entry
// points catch everything and return error codes.
#ifndef LLRDMA_JSON_HPP
#define LLRDMA_JSON_HPP

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <string>

namespace llrdma
{
namespace json
{

using Json = nlohmann::ordered_json;

// ------------------------------------------------------------------------------ writing

// One line, compact.  nlohmann writes \b \f \n \r \t and a raw DEL; the dump has always
// carried \u00XX for every control character and for DEL (tests and older readers compare
// these bytes), so those are rewritten.  Outside strings the output is structural ASCII, and
// inside them every '\' starts an escape, so pairing '\' with the next byte is exact.
// Invalid UTF-8 (a multi-byte character cut by a fixed-size C field) is dropped rather than
// replaced by U+FFFD, which is longer: what is written must read back into the same fields.
inline std::string dump(const Json &j)
{
    const std::string s = j.dump(-1, ' ', false, Json::error_handler_t::ignore);
    std::string o;
    o.reserve(s.size() + 16);
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == 0x7f) {
            o += "\\u007f";
            continue;
        }
        if (c != '\\' || i + 1 == s.size()) {
            o += c;
            continue;
        }
        const char e = s[++i];
        switch (e) {
        case 'b':
            o += "\\u0008";
            break;
        case 't':
            o += "\\u0009";
            break;
        case 'n':
            o += "\\u000a";
            break;
        case 'f':
            o += "\\u000c";
            break;
        case 'r':
            o += "\\u000d";
            break;
        default: // \" \\ \uXXXX: as written
            o += c;
            o += e;
        }
    }
    return o;
}

// ------------------------------------------------------------------------------ reading

// Garbage like "[[[[..." is refused at this depth instead of building a huge DOM.
constexpr int kMaxDepth = 32;

struct TooDeep {
};

// Parses a whole document (trailing text other than whitespace is an error).  On failure
// `why` says what and where ("line 1, column 17: syntax error ..."), without nlohmann's
// "[json.exception...]" prefix.
inline bool parse(const char *text, Json &out, std::string &why)
{
    try {
        out = Json::parse(text, [](int depth, Json::parse_event_t ev, Json &) {
            if ((ev == Json::parse_event_t::object_start ||
                 ev == Json::parse_event_t::array_start) &&
                depth > kMaxDepth)
                throw TooDeep{};
            return true;
        });
        return true;
    } catch (const Json::parse_error &e) {
        std::string m = e.what();
        const size_t tag = m.find("] ");
        if (tag != std::string::npos)
            m.erase(0, tag + 2);
        if (m.compare(0, 15, "parse error at ") == 0)
            m.erase(0, 15);
        why = m;
    } catch (const TooDeep &) {
        why = "nested deeper than " + std::to_string(kMaxDepth) + " levels";
    }
    return false;
}

// The member `key` of object `o`, or nullptr (also when `o` is not an object).  Duplicate
// keys: the parser keeps the last one.
inline const Json *get(const Json &o, const char *key)
{
    if (!o.is_object())
        return nullptr;
    const auto it = o.find(key);
    return it == o.end() ? nullptr : &*it;
}

// A non-negative integer (no fraction or exponent) within 64 bits.  nlohmann stores such a
// literal as number_unsigned; "1.0", "1e3" or 2^64 become floats and are refused here.
inline bool to_u64(const Json &v, uint64_t &out)
{
    const auto *u = v.get_ptr<const Json::number_unsigned_t *>();
    if (u == nullptr)
        return false;
    out = *u;
    return true;
}

// An integer within [lo, hi].
inline bool to_i64(const Json &v, long long lo, long long hi, long long &out)
{
    long long r;
    if (const auto *u = v.get_ptr<const Json::number_unsigned_t *>()) {
        if (*u > static_cast<uint64_t>(LLONG_MAX))
            return false;
        r = static_cast<long long>(*u);
    } else if (const auto *i = v.get_ptr<const Json::number_integer_t *>()) {
        r = *i;
    } else {
        return false;
    }
    if (r < lo || r > hi)
        return false;
    out = r;
    return true;
}

// A string the C structs can hold: no embedded NUL ("\u0000"), shorter than `cap`.
inline const std::string *c_string(const Json &v, size_t cap)
{
    const auto *s = v.get_ptr<const std::string *>();
    if (s == nullptr || s->size() >= cap || s->find('\0') != std::string::npos)
        return nullptr;
    return s;
}

} // namespace json
} // namespace llrdma

#endif

// json_reader.hpp -- a minimal JSON reader for config_json.cc (internal, header-only).
//
// Just enough JSON to read back what llrdma_config_to_json writes plus whatever newer
// versions add: objects, arrays, strings, numbers, null and booleans into a small DOM.
// Numbers are kept as their literal text so 64-bit values never pass through a double.
#ifndef LLRDMA_JSON_READER_HPP
#define LLRDMA_JSON_READER_HPP

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace llrdma
{
namespace json
{

struct JValue {
    enum Type { Null, Bool, Number, String, Object, Array } type = Null;
    bool b = false;
    std::string s;                 // String: decoded text; Number: the literal
    std::vector<std::string> keys; // Object keys, parallel to items
    std::vector<JValue> items;     // Object values or Array elements

    const JValue *get(const char *key) const
    {
        const JValue *found = nullptr; // last duplicate wins, as in most JSON readers
        for (size_t i = 0; i < keys.size(); ++i)
            if (keys[i] == key)
                found = &items[i];
        return found;
    }
};

class Parser
{
  public:
    explicit Parser(const char *s) : p_(s) {}

    bool document(JValue &v)
    {
        skip_ws();
        if (!value(v, 0))
            return false;
        skip_ws();
        return *p_ == '\0';
    }

  private:
    static constexpr int kMaxDepth = 32; // garbage like "[[[[..." must not exhaust the stack
    const char *p_;

    void skip_ws()
    {
        while (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')
            ++p_;
    }

    bool literal(const char *word)
    {
        size_t n = std::strlen(word);
        if (std::strncmp(p_, word, n) != 0)
            return false;
        p_ += n;
        return true;
    }

    bool value(JValue &v, int depth)
    {
        if (depth > kMaxDepth)
            return false;
        switch (*p_) {
        case '{':
            return object(v, depth);
        case '[':
            return array(v, depth);
        case '"':
            v.type = JValue::String;
            return string(v.s);
        case 't':
            v.type = JValue::Bool;
            v.b = true;
            return literal("true");
        case 'f':
            v.type = JValue::Bool;
            return literal("false");
        case 'n':
            v.type = JValue::Null;
            return literal("null");
        default:
            return number(v);
        }
    }

    bool object(JValue &v, int depth)
    {
        v.type = JValue::Object;
        ++p_; // '{'
        skip_ws();
        if (*p_ == '}') {
            ++p_;
            return true;
        }
        for (;;) {
            skip_ws();
            std::string key;
            if (*p_ != '"' || !string(key))
                return false;
            skip_ws();
            if (*p_++ != ':')
                return false;
            skip_ws();
            JValue item;
            if (!value(item, depth + 1))
                return false;
            v.keys.push_back(std::move(key));
            v.items.push_back(std::move(item));
            skip_ws();
            if (*p_ == '}') {
                ++p_;
                return true;
            }
            if (*p_++ != ',')
                return false;
        }
    }

    bool array(JValue &v, int depth)
    {
        v.type = JValue::Array;
        ++p_; // '['
        skip_ws();
        if (*p_ == ']') {
            ++p_;
            return true;
        }
        for (;;) {
            skip_ws();
            JValue item;
            if (!value(item, depth + 1))
                return false;
            v.items.push_back(std::move(item));
            skip_ws();
            if (*p_ == ']') {
                ++p_;
                return true;
            }
            if (*p_++ != ',')
                return false;
        }
    }

    static bool digit(char c) { return c >= '0' && c <= '9'; }

    // JSON number grammar; the literal is kept and converted (strictly) when used.
    bool number(JValue &v)
    {
        const char *start = p_;
        if (*p_ == '-')
            ++p_;
        if (!digit(*p_))
            return false;
        if (*p_ == '0')
            ++p_;
        else
            while (digit(*p_))
                ++p_;
        if (*p_ == '.') {
            ++p_;
            if (!digit(*p_))
                return false;
            while (digit(*p_))
                ++p_;
        }
        if (*p_ == 'e' || *p_ == 'E') {
            ++p_;
            if (*p_ == '+' || *p_ == '-')
                ++p_;
            if (!digit(*p_))
                return false;
            while (digit(*p_))
                ++p_;
        }
        v.type = JValue::Number;
        v.s.assign(start, p_);
        return true;
    }

    bool hex4(unsigned &out)
    {
        out = 0;
        for (int i = 0; i < 4; ++i, ++p_) {
            char c = *p_;
            unsigned d;
            if (c >= '0' && c <= '9')
                d = c - '0';
            else if (c >= 'a' && c <= 'f')
                d = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F')
                d = c - 'A' + 10;
            else
                return false; // also stops at the terminating NUL
            out = out * 16 + d;
        }
        return true;
    }

    static void put_utf8(std::string &s, unsigned cp)
    {
        if (cp < 0x80) {
            s += static_cast<char>(cp);
        } else if (cp < 0x800) {
            s += static_cast<char>(0xc0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            s += static_cast<char>(0xe0 | (cp >> 12));
            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            s += static_cast<char>(0x80 | (cp & 0x3f));
        } else {
            s += static_cast<char>(0xf0 | (cp >> 18));
            s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            s += static_cast<char>(0x80 | (cp & 0x3f));
        }
    }

    bool escape(std::string &s)
    {
        char c = *p_++;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            s += c;
            return true;
        case 'b':
            s += '\b';
            return true;
        case 'f':
            s += '\f';
            return true;
        case 'n':
            s += '\n';
            return true;
        case 'r':
            s += '\r';
            return true;
        case 't':
            s += '\t';
            return true;
        case 'u':
            break;
        default:
            return false;
        }
        unsigned cp;
        if (!hex4(cp) || cp == 0) // a NUL cannot live in the C strings we fill
            return false;
        if (cp >= 0xdc00 && cp <= 0xdfff)
            return false; // lone low surrogate
        if (cp >= 0xd800 && cp <= 0xdbff) {
            unsigned lo;
            if (p_[0] != '\\' || p_[1] != 'u')
                return false;
            p_ += 2;
            if (!hex4(lo) || lo < 0xdc00 || lo > 0xdfff)
                return false;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        put_utf8(s, cp);
        return true;
    }

    bool string(std::string &s)
    {
        ++p_; // opening quote
        for (;;) {
            unsigned char c = static_cast<unsigned char>(*p_);
            if (c == '\0' || c < 0x20)
                return false; // truncated, or a raw control character
            ++p_;
            if (c == '"')
                return true;
            if (c == '\\') {
                if (!escape(s))
                    return false;
            } else {
                s += static_cast<char>(c);
            }
        }
    }
};

// A non-negative integer without fraction or exponent that fits 64 bits.
inline bool to_u64(const JValue &v, uint64_t &out)
{
    if (v.type != JValue::Number || v.s.empty() || v.s[0] == '-')
        return false;
    uint64_t r = 0;
    for (char c : v.s) {
        if (c < '0' || c > '9')
            return false; // fraction or exponent
        uint64_t d = static_cast<uint64_t>(c - '0');
        if (r > (UINT64_MAX - d) / 10)
            return false;
        r = r * 10 + d;
    }
    out = r;
    return true;
}

} // namespace json
} // namespace llrdma

#endif

#include "common/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

Json Json::Bool(bool b) {
  Json j;
  j.type_ = Type::kBool;
  j.bool_ = b;
  return j;
}
Json Json::Number(double d) {
  Json j;
  j.type_ = Type::kNumber;
  j.number_ = d;
  return j;
}
Json Json::String(std::string s) {
  Json j;
  j.type_ = Type::kString;
  j.string_ = std::move(s);
  return j;
}
Json Json::Array() {
  Json j;
  j.type_ = Type::kArray;
  return j;
}
Json Json::Object() {
  Json j;
  j.type_ = Type::kObject;
  return j;
}

const Json* Json::Find(absl::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  auto it = object_.find(std::string(key));
  return it == object_.end() ? nullptr : &it->second;
}

Json& Json::Append(Json v) {
  array_.push_back(std::move(v));
  return *this;
}

Json& Json::Set(absl::string_view key, Json v) {
  object_[std::string(key)] = std::move(v);
  return *this;
}

const char* Json::TypeName(Type t) {
  switch (t) {
    case Type::kNull: return "null";
    case Type::kBool: return "boolean";
    case Type::kNumber: return "number";
    case Type::kString: return "string";
    case Type::kArray: return "array";
    case Type::kObject: return "object";
  }
  return "?";
}

namespace {

void DumpString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void DumpTo(const Json& j, std::string* out) {
  switch (j.type()) {
    case Json::Type::kNull: out->append("null"); break;
    case Json::Type::kBool: out->append(j.bool_value() ? "true" : "false"); break;
    case Json::Type::kNumber: {
      double d = j.number_value();
      if (!std::isfinite(d)) {
        out->append("null");
      } else if (d == std::floor(d) && std::fabs(d) < 1e15) {
        absl::StrAppend(out, static_cast<int64_t>(d));
      } else {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.9g", d);
        out->append(buf);
      }
      break;
    }
    case Json::Type::kString: DumpString(j.string_value(), out); break;
    case Json::Type::kArray: {
      out->push_back('[');
      bool first = true;
      for (const Json& v : j.array_items()) {
        if (!first) out->push_back(',');
        first = false;
        DumpTo(v, out);
      }
      out->push_back(']');
      break;
    }
    case Json::Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, v] : j.object_items()) {
        if (!first) out->push_back(',');
        first = false;
        DumpString(k, out);
        out->push_back(':');
        DumpTo(v, out);
      }
      out->push_back('}');
      break;
    }
  }
}

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Json> ParseDocument() {
    Json v;
    absl::Status s = ParseValue(0, &v);
    if (!s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("end of input");
    return v;
  }

 private:
  absl::Status Error(absl::string_view expected) {
    std::string found = pos_ < text_.size()
                            ? absl::StrCat("'", text_.substr(pos_, 1), "'")
                            : "end of input";
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", expected, " at offset ", pos_, ", found ", found));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(absl::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  absl::Status ParseValue(int depth, Json* out) {
    if (depth > kMaxDepth) return Error("nesting of at most 64 levels");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("a value");
    char c = text_[pos_];
    if (c == '{') return ParseObject(depth, out);
    if (c == '[') return ParseArray(depth, out);
    if (c == '"') {
      std::string s;
      absl::Status st = ParseString(&s);
      if (!st.ok()) return st;
      *out = Json::String(std::move(s));
      return absl::OkStatus();
    }
    if (Consume("true")) { *out = Json::Bool(true); return absl::OkStatus(); }
    if (Consume("false")) { *out = Json::Bool(false); return absl::OkStatus(); }
    if (Consume("null")) { *out = Json(); return absl::OkStatus(); }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
    return Error("a value");
  }

  absl::Status ParseNumber(Json* out) {
    size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    auto digits = [&]() {
      size_t n = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        ++pos_;
        ++n;
      }
      return n;
    };
    if (digits() == 0) return Error("a digit");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Error("a digit after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("a digit in the exponent");
    }
    std::string num(text_.substr(start, pos_ - start));
    *out = Json::Number(std::strtod(num.c_str(), nullptr));
    return absl::OkStatus();
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  absl::Status ParseHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return Error("four hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      int h = HexValue(text_[pos_]);
      if (h < 0) return Error("a hex digit");
      v = v * 16 + h;
      ++pos_;
    }
    *out = v;
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) return Error("'\"' closing the string");
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("no control character inside a string");
      }
      if (c != '\\') {
        out->push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size()) return Error("an escape character");
      char e = text_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          absl::Status s = ParseHex4(&cp);
          if (!s.ok()) return s;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!Consume("\\u")) return Error("a low surrogate escape");
            uint32_t lo = 0;
            s = ParseHex4(&lo);
            if (!s.ok()) return s;
            if (lo < 0xDC00 || lo > 0xDFFF) return Error("a low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Error("a high surrogate before a low one");
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          --pos_;
          return Error("a valid escape character");
      }
    }
  }

  absl::Status ParseArray(int depth, Json* out) {
    ++pos_;  // '['
    Json arr = Json::Array();
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      *out = std::move(arr);
      return absl::OkStatus();
    }
    while (true) {
      Json v;
      absl::Status s = ParseValue(depth + 1, &v);
      if (!s.ok()) return s;
      arr.Append(std::move(v));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        *out = std::move(arr);
        return absl::OkStatus();
      }
      return Error("',' or ']'");
    }
  }

  absl::Status ParseObject(int depth, Json* out) {
    ++pos_;  // '{'
    Json obj = Json::Object();
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      *out = std::move(obj);
      return absl::OkStatus();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("a string key");
      size_t key_pos = pos_;
      std::string key;
      absl::Status s = ParseString(&key);
      if (!s.ok()) return s;
      if (obj.Find(key) != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "duplicate key \"", key, "\" at offset ", key_pos));
      }
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Error("':'");
      ++pos_;
      Json v;
      s = ParseValue(depth + 1, &v);
      if (!s.ok()) return s;
      obj.Set(key, std::move(v));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        *out = std::move(obj);
        return absl::OkStatus();
      }
      return Error("',' or '}'");
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string Json::Dump() const {
  std::string out;
  DumpTo(*this, &out);
  return out;
}

absl::StatusOr<Json> ParseJson(absl::string_view text) {
  return Parser(text).ParseDocument();
}

}  // namespace pstrain

#include "data/example_parser.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "packed floats are copied as they lie: a little-endian host is assumed");

namespace pstrain::data {
namespace {

enum WireType {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};

// Protobuf's parser refuses messages and groups nested deeper than this
// (its default recursion limit), so a deeper group is refused by both.
constexpr int kMaxGroupDepth = 100;

// One field of a message.
struct Field {
  uint32_t number = 0;
  int wire = 0;
  uint64_t varint = 0;      // kVarint
  absl::string_view bytes;  // kLengthDelimited, kFixed32, kFixed64
  int64_t at = 0;           // offset of the field's tag
  int64_t bytes_at = 0;     // offset of `bytes`
};

// Walks the fields of one message; offsets are counted from `base`.
class FieldReader {
 public:
  FieldReader(absl::string_view message, int64_t base)
      : begin_(message.data()),
        p_(message.data()),
        end_(message.data() + message.size()),
        base_(base) {}

  // The next field into `*f`: true, false at the end, or an error. A group
  // (wire type 3) is unknown to every message here, as to protobuf, and is
  // returned with its contents skipped.
  absl::StatusOr<bool> Next(Field* f) {
    auto more = Read(f, 0);
    if (more.ok() && *more && f->wire == kEndGroup) {
      return Bad(f->at, absl::StrCat("field ", f->number, " ends a group that was not started"));
    }
    return more;
  }

  int64_t Offset() const { return base_ + (p_ - begin_); }

 private:
  // Next(), inside `depth` groups; an end-group tag is returned as a field.
  absl::StatusOr<bool> Read(Field* f, int depth) {
    if (p_ == end_) return false;
    f->at = Offset();
    uint64_t tag;
    if (!Varint(&tag)) return Bad(f->at, "a field tag runs past the end");
    // As protobuf reads a tag: its low 32 bits.
    f->number = static_cast<uint32_t>(tag) >> 3;
    f->wire = static_cast<int>(tag & 7);
    if (f->number == 0) return Bad(f->at, "a field number is 0");
    switch (f->wire) {
      case kVarint:
        if (!Varint(&f->varint)) return Bad(f->at, "a varint runs past the end");
        return true;
      case kFixed64:
        return Take(8, f);
      case kFixed32:
        return Take(4, f);
      case kLengthDelimited: {
        uint64_t n;
        if (!Varint(&n)) return Bad(f->at, "a length runs past the end");
        return Take(n, f);
      }
      case kStartGroup: {
        if (depth == kMaxGroupDepth) {
          return Bad(f->at, absl::StrCat("groups nested more than ", kMaxGroupDepth, " deep"));
        }
        Field inner;
        while (true) {
          auto more = Read(&inner, depth + 1);
          if (!more.ok()) return more.status();
          if (!*more) {
            return Bad(f->at,
                       absl::StrCat("field ", f->number, " starts a group that does not end"));
          }
          if (inner.wire != kEndGroup) continue;
          if (inner.number != f->number) {
            return Bad(inner.at, absl::StrCat("field ", inner.number, " ends the group of field ",
                                              f->number));
          }
          return true;
        }
      }
      case kEndGroup:
        return true;
      default:
        return Bad(f->at, absl::StrCat("field ", f->number, " has wire type ", f->wire,
                                       ", which protobuf does not define"));
    }
  }

  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70 && p_ < end_; shift += 7) {
      const uint8_t b = static_cast<uint8_t>(*p_++);
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  absl::StatusOr<bool> Take(uint64_t n, Field* f) {
    if (n > static_cast<uint64_t>(end_ - p_)) {
      return Bad(f->at, absl::StrCat("field ", f->number, " says ", n, " bytes but ", end_ - p_,
                                     " remain"));
    }
    f->bytes_at = Offset();
    f->bytes = absl::string_view(p_, n);
    p_ += n;
    return true;
  }
  static absl::Status Bad(int64_t at, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("Example at byte ", at, ": ", what));
  }

  const char* const begin_;
  const char* p_;
  const char* const end_;
  const int64_t base_;
};

// The Feature field number of a list kind.
uint32_t FieldOf(ListKind kind) {
  switch (kind) {
    case ListKind::kBytes:
      return 1;
    case ListKind::kFloat:
      return 2;
    case ListKind::kInt64:
      return 3;
    case ListKind::kNone:
      break;
  }
  return 0;
}

// Calls `each(field)` for every length-delimited field numbered `number`
// of a message; the others are unknown to it, as to protobuf, and skipped.
template <typename Each>
absl::Status ForEachMessageField(absl::string_view message, int64_t base, uint32_t number,
                                 Each each) {
  FieldReader reader(message, base);
  Field f;
  while (true) {
    auto more = reader.Next(&f);
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
    if (f.number != number || f.wire != kLengthDelimited) continue;
    if (absl::Status s = each(f); !s.ok()) return s;
  }
}

// Calls `each` with every value field (number 1, any wire type) of every
// piece of the feature's list.
template <typename Each>
absl::Status ForEachValueField(const FeatureView& feature, Each each) {
  return ForEachMessageField(feature.body, feature.body_offset, FieldOf(feature.kind),
                             [&](const Field& piece) -> absl::Status {
                               FieldReader values(piece.bytes, piece.bytes_at);
                               Field value;
                               while (true) {
                                 auto more = values.Next(&value);
                                 if (!more.ok()) return more.status();
                                 if (!*more) return absl::OkStatus();
                                 if (value.number != 1) continue;
                                 if (absl::Status s = each(value); !s.ok()) return s;
                               }
                             });
}

}  // namespace

const char* ListKindName(ListKind kind) {
  switch (kind) {
    case ListKind::kBytes:
      return "bytes_list";
    case ListKind::kFloat:
      return "float_list";
    case ListKind::kInt64:
      return "int64_list";
    case ListKind::kNone:
      break;
  }
  return "no value";
}

absl::Status ParsedExample::Parse(absl::string_view example) {
  features_.clear();
  return ForEachMessageField(example, 0, 1, [this](const Field& features) {
    return ForEachMessageField(features.bytes, features.bytes_at, 1, [this](const Field& entry) {
      return ParseEntry(entry.bytes, entry.bytes_at);
    });
  });
}

absl::Status ParsedExample::ParseEntry(absl::string_view bytes, int64_t base) {
  FeatureView view;
  absl::string_view value;
  int64_t value_at = 0;
  bool has_value = false;
  FieldReader reader(bytes, base);
  Field f;
  while (true) {
    auto more = reader.Next(&f);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (f.wire != kLengthDelimited) continue;
    if (f.number == 1) {
      view.name = f.bytes;
    } else if (f.number == 2) {
      if (has_value) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Example at byte ", f.at,
            ": a feature's value is given in pieces, which this reader does not merge"));
      }
      has_value = true;
      value = f.bytes;
      value_at = f.bytes_at;
    }
  }
  // The kind is the last one set; its list runs from the first piece after
  // any other kind.
  FieldReader feature(value, value_at);
  const char* from = value.data();
  while (true) {
    auto more = feature.Next(&f);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (f.number < 1 || f.number > 3 || f.wire != kLengthDelimited) continue;
    const ListKind kind = f.number == 1   ? ListKind::kBytes
                          : f.number == 2 ? ListKind::kFloat
                                          : ListKind::kInt64;
    if (kind != view.kind) {
      view.kind = kind;
      from = value.data() + (f.at - value_at);
    }
  }
  view.body = value.substr(from - value.data());
  view.body_offset = value_at + (from - value.data());
  features_.push_back(view);
  return absl::OkStatus();
}

const FeatureView* ParsedExample::Find(absl::string_view name) const {
  for (auto it = features_.rbegin(); it != features_.rend(); ++it) {
    if (it->name == name) return &*it;
  }
  return nullptr;
}

absl::StatusOr<int64_t> ReadFloats(const FeatureView& feature, float* out, int64_t capacity) {
  int64_t count = 0;
  absl::Status s = ForEachValueField(feature, [&](const Field& v) -> absl::Status {
    if (v.wire == kFixed32) {
      if (count < capacity) std::memcpy(out + count, v.bytes.data(), 4);
      ++count;
      return absl::OkStatus();
    }
    if (v.wire != kLengthDelimited) return absl::OkStatus();  // unknown
    if (v.bytes.size() % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Example at byte ", v.at,
                                                     ": packed floats of ", v.bytes.size(),
                                                     " bytes, not a multiple of 4"));
    }
    const int64_t n = static_cast<int64_t>(v.bytes.size() / 4);
    const int64_t copy = std::max<int64_t>(0, std::min(n, capacity - count));
    if (copy > 0) std::memcpy(out + count, v.bytes.data(), copy * 4);
    count += n;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return count;
}

absl::StatusOr<int64_t> ReadInt64s(const FeatureView& feature, int64_t* out, int64_t capacity) {
  int64_t count = 0;
  absl::Status s = ForEachValueField(feature, [&](const Field& v) -> absl::Status {
    if (v.wire == kVarint) {
      if (count < capacity) out[count] = static_cast<int64_t>(v.varint);
      ++count;
      return absl::OkStatus();
    }
    if (v.wire != kLengthDelimited) return absl::OkStatus();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(v.bytes.data());
    const uint8_t* end = p + v.bytes.size();
    const uint8_t* const begin = p;
    while (p < end) {
      const uint8_t* const start = p;
      uint64_t value = 0;
      int shift = 0;
      while (true) {
        if (p == end || shift >= 70) {
          return absl::InvalidArgumentError(absl::StrCat("Example at byte ",
                                                         v.bytes_at + (start - begin),
                                                         ": a packed int64 runs past its list"));
        }
        const uint8_t b = *p++;
        value |= static_cast<uint64_t>(b & 0x7f) << shift;
        shift += 7;
        if ((b & 0x80) == 0) break;
      }
      if (count < capacity) out[count] = static_cast<int64_t>(value);
      ++count;
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return count;
}

absl::StatusOr<int64_t> ReadBytes(const FeatureView& feature,
                                  absl::FunctionRef<void(absl::string_view)> out) {
  int64_t count = 0;
  absl::Status s = ForEachValueField(feature, [&](const Field& v) -> absl::Status {
    if (v.wire != kLengthDelimited) return absl::OkStatus();
    out(v.bytes);
    ++count;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return count;
}

}  // namespace pstrain::data

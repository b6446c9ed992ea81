// A small JSON value type with a strict parser and a compact writer, enough
// for TF_CONFIG, metrics files and `--json` output. Numbers are doubles.
// Values are plain data: not thread-safe to mutate, safe to read concurrently.
#ifndef PSTRAIN_COMMON_JSON_H_
#define PSTRAIN_COMMON_JSON_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;  // null
  static Json Bool(bool b);
  static Json Number(double d);
  static Json String(std::string s);
  static Json Array();
  static Json Object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Accessors. REQUIRES: the value has the matching type.
  bool bool_value() const { return bool_; }
  double number_value() const { return number_; }
  const std::string& string_value() const { return string_; }
  const std::vector<Json>& array_items() const { return array_; }
  // Object members in key order (JSON objects are unordered; the order of the
  // input is not kept).
  const std::map<std::string, Json>& object_items() const { return object_; }

  // Object lookup; nullptr when absent or when this is not an object.
  const Json* Find(absl::string_view key) const;

  // Builders. REQUIRES: array (Append) or object (Set).
  Json& Append(Json v);
  Json& Set(absl::string_view key, Json v);

  // Compact serialisation; strings are escaped per RFC 8259.
  std::string Dump() const;

  // Human name of a type, for error messages ("object", "string", ...).
  static const char* TypeName(Type t);

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> array_;
  std::map<std::string, Json> object_;
};

// Parses one JSON document (RFC 8259; duplicate object keys are rejected).
// InvalidArgument with the byte offset and what was expected on bad input.
// Nesting deeper than 64 levels is rejected to bound recursion.
absl::StatusOr<Json> ParseJson(absl::string_view text);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_JSON_H_

// Words of a text, as the text converters and CSV text columns take them:
// ASCII letters lower-cased, split at every byte that is neither an ASCII
// letter or digit nor part of a multi-byte UTF-8 character (so "Café-au-
// lait, 2x" is "café", "au", "lait", "2x").
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_TOKENIZE_H_
#define PSTRAIN_DATA_TOKENIZE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pstrain::data {

inline bool IsWordByte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

// Calls fn(word) for each word in order; the view lives until the next
// call. `scratch` holds the lower-cased word.
template <typename Fn>
void ForEachWord(absl::string_view text, std::string* scratch, Fn fn) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    while (i < n && !IsWordByte(static_cast<unsigned char>(text[i]))) ++i;
    if (i == n) break;
    scratch->clear();
    while (i < n && IsWordByte(static_cast<unsigned char>(text[i]))) {
      const char c = text[i++];
      scratch->push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
    }
    fn(absl::string_view(*scratch));
  }
}

inline std::vector<std::string> Words(absl::string_view text) {
  std::vector<std::string> out;
  std::string scratch;
  ForEachWord(text, &scratch, [&](absl::string_view w) { out.emplace_back(w); });
  return out;
}

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_TOKENIZE_H_

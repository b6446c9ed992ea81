#include "data/debian_descriptions.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "data/feature_spec.h"

namespace pstrain::data {
namespace {

// One deb822 field of a paragraph: its value's first line and its
// continuation lines (each without the leading space).
struct Field {
  absl::string_view first;
  std::vector<absl::string_view> more;
};

// Calls fn(paragraph fields, line of the paragraph) for each paragraph.
absl::Status ForEachParagraph(
    absl::string_view text,
    absl::FunctionRef<absl::Status(const std::map<absl::string_view, Field>&, int64_t)> fn) {
  std::map<absl::string_view, Field> fields;
  Field* last = nullptr;
  int64_t line_number = 0, first_line = 1;
  auto flush = [&]() -> absl::Status {
    if (fields.empty()) return absl::OkStatus();
    absl::Status s = fn(fields, first_line);
    fields.clear();
    last = nullptr;
    return s;
  };
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      if (absl::Status s = flush(); !s.ok()) return s;
      continue;
    }
    if (fields.empty()) first_line = line_number;
    if (line[0] == ' ' || line[0] == '\t') {
      if (last == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_number, ": a continuation line with no field before it"));
      }
      line.remove_prefix(1);
      last->more.push_back(line == "." ? absl::string_view() : line);
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": \"", line.substr(0, 40), "\" is no field"));
    }
    last = &fields[line.substr(0, colon)];
    last->first = absl::StripAsciiWhitespace(line.substr(colon + 1));
    last->more.clear();
  }
  return flush();
}

}  // namespace

absl::Status ParsePackagesIndex(absl::string_view text,
                                absl::flat_hash_map<std::string, std::string>* sections) {
  return ForEachParagraph(
      text, [&](const std::map<absl::string_view, Field>& fields, int64_t line) -> absl::Status {
        auto package = fields.find("Package");
        if (package == fields.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("the paragraph at line ", line, " has no Package field"));
        }
        auto section = fields.find("Section");
        if (section == fields.end()) return absl::OkStatus();
        absl::string_view name = section->second.first;
        if (const size_t slash = name.rfind('/'); slash != absl::string_view::npos) {
          name.remove_prefix(slash + 1);
        }
        sections->emplace(std::string(package->second.first), std::string(name));
        return absl::OkStatus();
      });
}

absl::Status ParseTranslationIndex(absl::string_view text,
                                   absl::flat_hash_map<std::string, std::string>* descriptions) {
  return ForEachParagraph(
      text, [&](const std::map<absl::string_view, Field>& fields, int64_t line) -> absl::Status {
        auto package = fields.find("Package");
        auto description = fields.find("Description-en");
        if (package == fields.end() || description == fields.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the paragraph at line ", line, " lacks a Package or Description-en field"));
        }
        std::string joined(description->second.first);
        for (absl::string_view more : description->second.more)
          absl::StrAppend(&joined, "\n", more);
        descriptions->emplace(std::string(package->second.first), std::move(joined));
        return absl::OkStatus();
      });
}

DebianCorpus BuildDebianCorpus(const absl::flat_hash_map<std::string, std::string>& sections,
                               const absl::flat_hash_map<std::string, std::string>& descriptions,
                               const DebianCorpusOptions& options) {
  DebianCorpus corpus;
  std::map<std::string, int64_t> per_section;
  // (hash, name): the fixed order of the examples.
  std::vector<std::tuple<uint64_t, std::string, const std::string*, const std::string*>> packages;
  for (const auto& [name, section] : sections) {
    auto d = descriptions.find(name);
    if (d == descriptions.end()) {
      ++corpus.without_description;
      continue;
    }
    ++per_section[section];
    packages.emplace_back(StableHash(name), name, &section, &d->second);
  }
  corpus.packages = static_cast<int64_t>(packages.size());
  for (const auto& [section, n] : per_section) {
    if (n < options.min_class) corpus.merged.emplace_back(section, n);
  }
  std::sort(packages.begin(), packages.end());
  for (const auto& [hash, name, section, text] : packages) {
    LabeledText t;
    t.label = per_section[*section] < options.min_class ? "other" : *section;
    t.text = *text;
    (hash % 100 < static_cast<uint64_t>(options.test_percent) ? corpus.test : corpus.train)
        .push_back(std::move(t));
  }
  return corpus;
}

}  // namespace pstrain::data

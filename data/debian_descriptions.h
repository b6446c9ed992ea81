// A real text-classification corpus from nothing but apt's index files: the
// English long descriptions of a Debian archive's packages (Translation-en)
// labelled by each package's Section (Packages), like Reuters' newswires
// labelled by topic. Both files are deb822: paragraphs of "Field: value"
// lines, continuation lines beginning with a space, " ." a blank line.
// Stateless; thread-safe.
#ifndef PSTRAIN_DATA_DEBIAN_DESCRIPTIONS_H_
#define PSTRAIN_DATA_DEBIAN_DESCRIPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "data/text_corpus.h"

namespace pstrain::data {

// Package -> Section from a Packages index ("contrib/libs" is "libs"; a
// package listed twice keeps its first section). InvalidArgument naming
// the line of a paragraph without Package.
absl::Status ParsePackagesIndex(absl::string_view text,
                                absl::flat_hash_map<std::string, std::string>* sections);

// Package -> its description from a Translation-en index: the short
// description, then the long one's lines without their leading space
// (" ." lines as blank lines), joined by line ends. InvalidArgument naming
// the line of a paragraph without Package or Description-en.
absl::Status ParseTranslationIndex(absl::string_view text,
                                   absl::flat_hash_map<std::string, std::string>* descriptions);

struct DebianCorpusOptions {
  // Sections with fewer packages are merged into the class "other".
  int64_t min_class = 100;
  // Packages whose StableHash(name) % 100 is below this are the test split.
  int test_percent = 20;
};

struct DebianCorpus {
  // Labelled by section, in StableHash order of the package names (a fixed
  // shuffle, so that consecutive examples mix sections).
  std::vector<LabeledText> train, test;
  // The sections merged into "other", with their package counts.
  std::vector<std::pair<std::string, int64_t>> merged;
  int64_t packages = 0;             // with a section and a description
  int64_t without_description = 0;  // with a section only
};

DebianCorpus BuildDebianCorpus(const absl::flat_hash_map<std::string, std::string>& sections,
                               const absl::flat_hash_map<std::string, std::string>& descriptions,
                               const DebianCorpusOptions& options);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_DEBIAN_DESCRIPTIONS_H_

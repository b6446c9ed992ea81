// Builds the Debian package descriptions corpus (data/debian_descriptions.h,
// written by data/text_corpus.h) from apt's index files: what `pstrain data
// debian-descriptions` runs. Without given index files it reads the main
// archive's of the system's release as apt keeps them (`apt-get
// indextargets`, decompressed by `apt-helper cat-file`), first running
// `apt-get update -o Acquire::Languages=en` when the English translations
// are missing (as root; otherwise it says to).
#ifndef PSTRAIN_DATA_DEBIAN_CORPUS_BUILD_H_
#define PSTRAIN_DATA_DEBIAN_CORPUS_BUILD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "data/byte_source.h"

namespace pstrain::data {

struct DebianCorpusBuildOptions {
  std::string out;  // the corpus's directory, made if missing
  int64_t vocab_size = 20000;
  int train_files = 4;
  int64_t min_class = 100;  // smaller sections become "other"
  Compression compression = Compression::kGzip;
  // A Packages and a Translation-en index (any compression apt reads), or
  // both empty for apt's own.
  std::string packages;
  std::string translations;
  // Told what is being fetched before `apt-get update` runs.
  std::function<void(const std::string&)> say = [](const std::string&) {};
};

// Writes the corpus and its README.md under options.out and returns the
// README's text. InvalidArgument for options that do not fit (no `out`,
// one index file without the other); FailedPrecondition when apt's files
// are missing and this process may not fetch them, or an apt command
// fails; DataLoss naming the index file that does not parse; the file
// errors of writing.
absl::StatusOr<std::string> BuildDebianDescriptions(const DebianCorpusBuildOptions& options);

}  // namespace pstrain::data

#endif  // PSTRAIN_DATA_DEBIAN_CORPUS_BUILD_H_

#include "data/debian_corpus_build.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "data/debian_descriptions.h"
#include "data/text_corpus.h"

namespace pstrain::data {
namespace {

// Runs `argv` with its output into `path`: an error naming the command
// unless it exits 0 within `timeout`.
absl::Status RunInto(const std::vector<std::string>& argv, const std::string& path,
                     absl::Duration timeout) {
  SpawnOptions options;
  options.argv = argv;
  options.log_path = path;
  PSTRAIN_ASSIGN_OR_RETURN(pid_t pid, Spawn(options));
  std::optional<ChildExit> exit = WaitChild(pid, timeout);
  if (!exit.has_value()) {
    StopChildren({pid}, absl::Seconds(5));
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " did not finish in ", absl::FormatDuration(timeout)));
  }
  if (exit->code != 0) {
    auto said = ReadFile(path);
    return absl::FailedPreconditionError(
        absl::StrCat(absl::StrJoin(argv, " "), " exited with ", exit->code, ": ",
                     said.ok() ? absl::StripAsciiWhitespace(said->substr(0, 500)) : ""));
  }
  return absl::OkStatus();
}

// The system's release codename (/etc/os-release VERSION_CODENAME).
absl::StatusOr<std::string> Codename() {
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile("/etc/os-release"));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "VERSION_CODENAME=")) {
      return std::string(
          absl::StripAsciiWhitespace(absl::StripPrefix(absl::StripSuffix(line, "\""), "\"")));
    }
  }
  return absl::NotFoundError("/etc/os-release names no VERSION_CODENAME");
}

// The index file apt keeps of `identifier` ("Packages", "Translations") for
// the main component of release `codename`, present or not.
absl::StatusOr<std::string> IndexFile(const std::string& identifier, const std::string& codename,
                                      const std::string& scratch) {
  const std::string listing = scratch + "/indextargets";
  PSTRAIN_RETURN_IF_ERROR(
      RunInto({"/usr/bin/apt-get", "indextargets", "-o", "Acquire::Languages=en", "--format",
               "$(FILENAME)\t$(CODENAME)\t$(COMPONENT)\t$(LANGUAGE)", "Identifier: " + identifier},
              listing, absl::Minutes(2)));
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(listing));
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() >= 4 && f[1] == codename && f[2] == "main" &&
        (identifier != "Translations" || f[3] == "en")) {
      return f[0];
    }
  }
  return absl::NotFoundError(absl::StrCat("apt has no ", identifier, " index of ", codename,
                                          " main: is ", codename, " main in apt's sources?"));
}

// The decompressed text of an index file.
absl::StatusOr<std::string> ReadIndex(const std::string& path, const std::string& scratch) {
  const std::string text = scratch + "/index";
  PSTRAIN_RETURN_IF_ERROR(
      RunInto({"/usr/lib/apt/apt-helper", "cat-file", path}, text, absl::Minutes(5)));
  auto out = ReadFile(text);
  std::filesystem::remove(text);
  return out;
}

std::string Readme(const DebianCorpus& corpus, const TextCorpusSummary& summary,
                   const std::string& packages, const std::string& translations,
                   int64_t min_class) {
  std::string r = absl::StrCat(
      "# Debian package descriptions by section\n\n"
      "Built by `pstrain data debian-descriptions` on ",
      absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone()), " from\n\n    ", packages,
      "\n    ", translations, "\n\n", corpus.packages,
      " packages with a section and an English description (", corpus.without_description,
      " without one are left out).\n",
      "An example is a package: its short and long description, lower-cased and\n"
      "split at every character that is not a letter or digit, as ids of vocab.txt\n"
      "(the training split's ",
      summary.vocabulary,
      " most frequent words: the word on line i is id i + 2,\n"
      "0 pads, 1 is any other word; ",
      absl::StrFormat("%.1f", 100 * summary.test_oov_share),
      "% of the test split's words are out of\n"
      "vocabulary). Its label is its section. The test split is every package whose\n"
      "name's FNV-1a 64 hash is 0..19 modulo 100 (20%).\n\n"
      "Files: train-*.tfrecord.gz and test-*.tfrecord.gz (tf.train.Example:\n"
      "\"tokens\" int64_list, \"label\" int64_list), vocab.txt, labels.txt (the\n"
      "class on line i is id i).\n\n"
      "| id | class | train | test |\n| --- | --- | --- | --- |\n");
  int64_t train = 0, test = 0;
  for (size_t i = 0; i < summary.classes.size(); ++i) {
    absl::StrAppend(&r, "| ", i, " | ", summary.classes[i], " | ", summary.train_counts[i], " | ",
                    summary.test_counts[i], " |\n");
    train += summary.train_counts[i];
    test += summary.test_counts[i];
  }
  absl::StrAppend(&r, "| | all ", summary.classes.size(), " | ", train, " | ", test, " |\n\n");
  if (!corpus.merged.empty()) {
    absl::StrAppend(&r, "Sections with fewer than ", min_class, " packages are the class other:");
    for (size_t i = 0; i < corpus.merged.size(); ++i) {
      absl::StrAppend(&r, i == 0 ? " " : ", ", corpus.merged[i].first, " (",
                      corpus.merged[i].second, ")");
    }
    absl::StrAppend(&r, ".\n\n");
  }
  absl::StrAppend(&r,
                  "A model config reads it as\n\n"
                  "    input {\n      format: tfrecord\n"
                  "      train_files: \"train-*.tfrecord.gz\"\n"
                  "      test_files: \"test-*.tfrecord.gz\"\n"
                  "      feature { name: \"tokens\" type: \"int64\" max_len: 200 vocabulary: ",
                  summary.vocabulary + 2, " }\n      label: \"label\"\n    }\n");
  return r;
}

// Where apt keeps the Packages and Translation-en indexes of this
// release's main component, fetching them when missing and allowed to.
absl::Status FindAptIndexes(const std::string& scratch,
                            const std::function<void(const std::string&)>& say,
                            std::string* packages, std::string* translations) {
  PSTRAIN_ASSIGN_OR_RETURN(std::string codename, Codename());
  // apt lists only the index files it has: with the English
  // translations (or any index) missing, fetch them, then look again.
  auto find = [&]() -> absl::Status {
    PSTRAIN_ASSIGN_OR_RETURN(*packages, IndexFile("Packages", codename, scratch));
    PSTRAIN_ASSIGN_OR_RETURN(*translations, IndexFile("Translations", codename, scratch));
    if (!std::filesystem::exists(*packages) || !std::filesystem::exists(*translations)) {
      return absl::NotFoundError(absl::StrCat("apt has no ", *packages, " or ", *translations));
    }
    return absl::OkStatus();
  };
  absl::Status found = find();
  if (found.ok() || !absl::IsNotFound(found)) return found;
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(found.message(), ": run `apt-get update -o Acquire::Languages=en` as root"));
  }
  say("fetching the English descriptions: apt-get update -o Acquire::Languages=en");
  PSTRAIN_RETURN_IF_ERROR(RunInto({"/usr/bin/apt-get", "update", "-o", "Acquire::Languages=en"},
                                  scratch + "/update.log", absl::Minutes(10)));
  return find();
}

// The corpus from the two index files, written under options.out with its
// README; the README's text.
absl::StatusOr<std::string> BuildFrom(const DebianCorpusBuildOptions& options,
                                      const std::string& packages,
                                      const std::string& translations,
                                      const std::string& scratch) {
  absl::flat_hash_map<std::string, std::string> sections, descriptions;
  PSTRAIN_ASSIGN_OR_RETURN(std::string text, ReadIndex(packages, scratch));
  if (absl::Status s = ParsePackagesIndex(text, &sections); !s.ok()) {
    return absl::DataLossError(absl::StrCat(packages, ": ", s.message()));
  }
  PSTRAIN_ASSIGN_OR_RETURN(text, ReadIndex(translations, scratch));
  if (absl::Status s = ParseTranslationIndex(text, &descriptions); !s.ok()) {
    return absl::DataLossError(absl::StrCat(translations, ": ", s.message()));
  }
  text.clear();
  DebianCorpusOptions corpus_options;
  corpus_options.min_class = options.min_class;
  DebianCorpus corpus = BuildDebianCorpus(sections, descriptions, corpus_options);
  TextCorpusOptions write;
  write.out = options.out;
  write.vocab_size = options.vocab_size;
  write.train_files = options.train_files;
  write.compression = options.compression;
  PSTRAIN_ASSIGN_OR_RETURN(TextCorpusSummary summary,
                           WriteTextCorpus(corpus.train, corpus.test, write));
  const std::string readme = Readme(corpus, summary, packages, translations, options.min_class);
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(options.out + "/README.md", readme));
  return readme;
}

}  // namespace

absl::StatusOr<std::string> BuildDebianDescriptions(const DebianCorpusBuildOptions& options) {
  if (options.out.empty()) {
    return absl::InvalidArgumentError("--out=DIR is missing: where to write");
  }
  if (options.packages.empty() != options.translations.empty()) {
    return absl::InvalidArgumentError("give both --packages and --translations, or neither");
  }
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(options.out));
  const std::string scratch = options.out + "/.apt";
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(scratch));
  std::string packages = options.packages, translations = options.translations;
  absl::StatusOr<std::string> readme;
  if (absl::Status s = packages.empty()
                           ? FindAptIndexes(scratch, options.say, &packages, &translations)
                           : absl::OkStatus();
      s.ok()) {
    readme = BuildFrom(options, packages, translations, scratch);
  } else {
    readme = s;
  }
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  return readme;
}

}  // namespace pstrain::data

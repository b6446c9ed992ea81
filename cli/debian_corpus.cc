#include "cli/debian_corpus.h"

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
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "data/debian_descriptions.h"
#include "data/text_corpus.h"

namespace pstrain {
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

std::string Readme(const data::DebianCorpus& corpus, const data::TextCorpusSummary& summary,
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

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pstrain data: %s\n", std::string(s.message()).c_str());
  return s.code() == absl::StatusCode::kInvalidArgument ? kExitBadConfig : kExitPermanent;
}

}  // namespace

int DebianDescriptionsMain(CliArgs& args) {
  auto out = args.GetString("out", "");
  auto vocab = args.GetIntInRange("vocab_size", 20000, 1, int64_t{1} << 24);
  auto files = args.GetIntInRange("files", 4, 1, 1000);
  auto min_class = args.GetIntInRange("min_class", 100, 0, int64_t{1} << 30);
  auto compression_name = args.GetString("compression", "GZIP");
  auto packages = args.GetString("packages", "");
  auto translations = args.GetString("translations", "");
  for (const absl::Status& s :
       {out.status(), vocab.status(), files.status(), min_class.status(), compression_name.status(),
        packages.status(), translations.status()}) {
    if (!s.ok()) return Fail(s);
  }
  auto compression = data::ParseCompression(*compression_name);
  if (!compression.ok()) return Fail(compression.status());
  if (absl::Status s = args.CheckAllUsed(); !s.ok()) return Fail(s);
  if (out->empty()) return Fail(absl::InvalidArgumentError("--out=DIR is missing: where to write"));
  if (packages->empty() != translations->empty()) {
    return Fail(absl::InvalidArgumentError("give both --packages and --translations, or neither"));
  }
  if (absl::Status s = MakeDirs(*out); !s.ok()) return Fail(s);
  const std::string scratch = *out + "/.apt";
  if (absl::Status s = MakeDirs(scratch); !s.ok()) return Fail(s);
  auto build = [&]() -> absl::Status {
    if (packages->empty()) {
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
      if (absl::Status found = find(); !found.ok()) {
        if (!absl::IsNotFound(found)) return found;
        if (geteuid() != 0) {
          return absl::FailedPreconditionError(absl::StrCat(
              found.message(), ": run `apt-get update -o Acquire::Languages=en` as root"));
        }
        std::printf("fetching the English descriptions: apt-get update -o Acquire::Languages=en\n");
        std::fflush(stdout);
        PSTRAIN_RETURN_IF_ERROR(
            RunInto({"/usr/bin/apt-get", "update", "-o", "Acquire::Languages=en"},
                    scratch + "/update.log", absl::Minutes(10)));
        PSTRAIN_RETURN_IF_ERROR(find());
      }
    }
    absl::flat_hash_map<std::string, std::string> sections, descriptions;
    PSTRAIN_ASSIGN_OR_RETURN(std::string text, ReadIndex(*packages, scratch));
    if (absl::Status s = data::ParsePackagesIndex(text, &sections); !s.ok()) {
      return absl::DataLossError(absl::StrCat(*packages, ": ", s.message()));
    }
    PSTRAIN_ASSIGN_OR_RETURN(text, ReadIndex(*translations, scratch));
    if (absl::Status s = data::ParseTranslationIndex(text, &descriptions); !s.ok()) {
      return absl::DataLossError(absl::StrCat(*translations, ": ", s.message()));
    }
    text.clear();
    data::DebianCorpusOptions options;
    options.min_class = *min_class;
    data::DebianCorpus corpus = data::BuildDebianCorpus(sections, descriptions, options);
    data::TextCorpusOptions write;
    write.out = *out;
    write.vocab_size = *vocab;
    write.train_files = static_cast<int>(*files);
    write.compression = *compression;
    PSTRAIN_ASSIGN_OR_RETURN(data::TextCorpusSummary summary,
                             data::WriteTextCorpus(corpus.train, corpus.test, write));
    const std::string readme = Readme(corpus, summary, *packages, *translations, *min_class);
    PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(*out + "/README.md", readme));
    std::fputs(readme.c_str(), stdout);
    return absl::OkStatus();
  };
  absl::Status s = build();
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  return s.ok() ? kExitOk : Fail(s);
}

}  // namespace pstrain

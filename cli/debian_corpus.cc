#include "cli/debian_corpus.h"

#include <cstdio>
#include <string>

#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "data/debian_corpus_build.h"

namespace pstrain {
namespace {

absl::StatusOr<std::string> Build(CliArgs& args) {
  data::DebianCorpusBuildOptions options;
  PSTRAIN_ASSIGN_OR_RETURN(options.out, args.GetString("out", ""));
  PSTRAIN_ASSIGN_OR_RETURN(options.vocab_size,
                           args.GetIntInRange("vocab_size", 20000, 1, int64_t{1} << 24));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t files, args.GetIntInRange("files", 4, 1, 1000));
  options.train_files = static_cast<int>(files);
  PSTRAIN_ASSIGN_OR_RETURN(options.min_class,
                           args.GetIntInRange("min_class", 100, 0, int64_t{1} << 30));
  PSTRAIN_ASSIGN_OR_RETURN(std::string compression, args.GetString("compression", "GZIP"));
  PSTRAIN_ASSIGN_OR_RETURN(options.packages, args.GetString("packages", ""));
  PSTRAIN_ASSIGN_OR_RETURN(options.translations, args.GetString("translations", ""));
  PSTRAIN_ASSIGN_OR_RETURN(options.compression, data::ParseCompression(compression));
  PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
  options.say = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  return data::BuildDebianDescriptions(options);
}

}  // namespace

int DebianDescriptionsMain(CliArgs& args) {
  absl::StatusOr<std::string> readme = Build(args);
  if (!readme.ok()) {
    std::fprintf(stderr, "pstrain data: %s\n", std::string(readme.status().message()).c_str());
    return readme.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadConfig
                                                                         : kExitPermanent;
  }
  std::fputs(readme->c_str(), stdout);
  return kExitOk;
}

}  // namespace pstrain

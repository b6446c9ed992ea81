// Every flag a pstrain task reads, defined once: its name, the value it
// takes, its default, its range, what it is for, and which tasks read it.
// The readers below take defaults and ranges from here; the usage text
// (FlagUsage), the flag reference (docs/flags.md, FlagReference; a test
// keeps the file current) and the names every task accepts so that one
// argument list serves every role (TaskFlagNames, job/task_flags.h) all
// come from this table. Job flags a model config may set read the
// config's value (or JobSpec's) as their default instead; the table names
// JobSpec's, and a test checks that they agree.
// Thread-safe: the table is constant.
#ifndef PSTRAIN_JOB_FLAG_TABLE_H_
#define PSTRAIN_JOB_FLAG_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/cli_args.h"

namespace pstrain {

// Which tasks read a flag.
enum class FlagGroup {
  kJob,        // every training task and train --local: the job's settings
  kSecurity,   // every task, launch and status: TLS and the token
  kPlatform,   // every task, before its role runs: where it works and logs
  kPs,         // the parameter servers
  kTrainer,    // the chief and the workers
  kEvaluator,  // the evaluator
};

struct FlagDef {
  const char* name;
  FlagGroup group;
  // The value's form in the usage text ("N", "DIR", "sgd|adam|..."); empty
  // for a boolean (--NAME, --noNAME).
  const char* value;
  // The default as the usage text shows it (empty: none).
  const char* default_value;
  const char* help;
  // Integers: the inclusive range a value must lie in (none: any).
  std::optional<int64_t> lo, hi;
};

// Every flag, grouped, in the order the usage text lists them.
const std::vector<FlagDef>& FlagTable();
// The flag named `name`; null when there is none.
const FlagDef* FindFlag(absl::string_view name);

// Readers of a flag of the table: its value in `args`, else `fallback`
// (none: the table's default). An integer outside the table's range is
// InvalidArgument "--NAME=V: must be in LO..HI"; CliArgs' errors otherwise.
// REQUIRES: `name` is in the table.
absl::StatusOr<int64_t> IntFlag(CliArgs& args, absl::string_view name,
                                std::optional<int64_t> fallback = std::nullopt);
absl::StatusOr<double> DoubleFlag(CliArgs& args, absl::string_view name,
                                  std::optional<double> fallback = std::nullopt);
absl::StatusOr<bool> BoolFlag(CliArgs& args, absl::string_view name,
                              std::optional<bool> fallback = std::nullopt);
absl::StatusOr<std::string> StringFlag(CliArgs& args, absl::string_view name,
                                       std::optional<std::string> fallback = std::nullopt);

// The usage text of `group`'s flags: one line per flag, "  --NAME=VALUE
// (DEFAULT)  help", under a heading.
std::string FlagUsage(FlagGroup group);
// The usage text of every group but the job's.
std::string TaskFlagUsage();
// The flag reference in Markdown: a table per group (docs/flags.md).
std::string FlagReference();

}  // namespace pstrain

#endif  // PSTRAIN_JOB_FLAG_TABLE_H_

// Command-line parsing for the mains: "--name=value", "--name value",
// "--flag" (true) and "--noflag" (false). Only main.cc files use it; they turn
// the result into an Options struct, so library code never sees flags.
// Not thread-safe; a CliArgs is used by one thread.
#ifndef PSTRAIN_BASE_CLI_ARGS_H_
#define PSTRAIN_BASE_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pstrain {

// Whether argv[first..argc) asks for help (--help, -h, -help) or for the
// version (--version, -V) before any "--": what every binary (pstrain and
// each role's) answers before it reads anything else.
bool AsksForHelp(int argc, const char* const* argv, int first);
bool AsksForVersion(int argc, const char* const* argv, int first);

class CliArgs {
 public:
  // Parses argv[first..argc). Arguments not starting with "--" are positional.
  // "--" ends flag parsing. InvalidArgument for "--" followed by nothing
  // usable, e.g. "--=x".
  static absl::StatusOr<CliArgs> Parse(int argc, const char* const* argv, int first = 1);

  // Typed getters: return `def` when the flag is absent; InvalidArgument
  // naming the flag when its value does not parse. Each marks the flag used.
  absl::StatusOr<std::string> GetString(absl::string_view name, absl::string_view def);
  absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t def);
  // GetInt, and InvalidArgument "--NAME=V: must be in LO..HI" when the value
  // (given or default) is outside [lo, hi].
  absl::StatusOr<int64_t> GetIntInRange(absl::string_view name, int64_t def, int64_t lo,
                                        int64_t hi);
  absl::StatusOr<double> GetDouble(absl::string_view name, double def);
  absl::StatusOr<bool> GetBool(absl::string_view name, bool def);
  bool Has(absl::string_view name) const;
  // Gives flag `name` the value `value` when it was not given (a default
  // taken from elsewhere, such as a run's settings): it then reads as
  // given and is appended to raw_flags(). Returns whether it was added.
  bool AddDefault(absl::string_view name, absl::string_view value);

  const std::vector<std::string>& positional() const { return positional_; }
  // Every flag as given, "--name=value", in order, then those AddDefault
  // added (for passing on to child processes).
  const std::vector<std::string>& raw_flags() const { return raw_flags_; }

  // InvalidArgument naming the first flag no getter asked for, so a typo such
  // as --epoch=3 is an error rather than silently ignored; the message
  // suggests the nearest flag a getter asked for when one is a few letters
  // away ("unknown flag --epoch (did you mean --epochs?)").
  absl::Status CheckAllUsed() const;
  // CheckAllUsed, except that a flag no getter asked for that is in
  // `also_known` (flags other parts of the program take) is appended to
  // *ignored instead of being an error; suggestions draw on both sets.
  absl::Status CheckAllUsed(const std::vector<std::string>& also_known,
                            std::vector<std::string>* ignored) const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
  std::vector<std::string> positional_;
  std::vector<std::string> raw_flags_;
};

}  // namespace pstrain

#endif  // PSTRAIN_BASE_CLI_ARGS_H_

#include "base/cli_args.h"

#include <algorithm>
#include <initializer_list>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

namespace {

bool AsksFor(int argc, const char* const* argv, int first,
             std::initializer_list<absl::string_view> words) {
  for (int i = first; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") return false;
    for (absl::string_view w : words) {
      if (arg == w) return true;
    }
  }
  return false;
}

}  // namespace

bool AsksForHelp(int argc, const char* const* argv, int first) {
  return AsksFor(argc, argv, first, {"--help", "-h", "-help"});
}

bool AsksForVersion(int argc, const char* const* argv, int first) {
  return AsksFor(argc, argv, first, {"--version", "-V"});
}

absl::StatusOr<CliArgs> CliArgs::Parse(int argc, const char* const* argv, int first) {
  CliArgs out;
  bool flags_done = false;
  for (int i = first; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (flags_done || arg.size() < 2 || arg.substr(0, 2) != "--") {
      out.positional_.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    absl::string_view body = arg.substr(2);
    std::string name, value;
    size_t eq = body.find('=');
    if (eq != absl::string_view::npos) {
      name = std::string(body.substr(0, eq));
      value = std::string(body.substr(eq + 1));
    } else {
      name = std::string(body);
      // "--name value" when the next argument is not a flag; else boolean.
      if (i + 1 < argc && absl::string_view(argv[i + 1]).substr(0, 2) != "--") {
        value = argv[++i];
      } else if (name.size() > 2 && name.substr(0, 2) == "no") {
        name = name.substr(2);
        value = "false";
      } else {
        value = "true";
      }
    }
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("argument \"", arg, "\" has no flag name"));
    }
    out.values_[name] = value;
    out.raw_flags_.push_back(absl::StrCat("--", name, "=", value));
  }
  return out;
}

bool CliArgs::Has(absl::string_view name) const { return values_.count(std::string(name)) > 0; }

bool CliArgs::AddDefault(absl::string_view name, absl::string_view value) {
  if (name.empty() || !values_.emplace(std::string(name), std::string(value)).second) return false;
  raw_flags_.push_back(absl::StrCat("--", name, "=", value));
  return true;
}

absl::StatusOr<std::string> CliArgs::GetString(absl::string_view name, absl::string_view def) {
  used_.insert(std::string(name));
  auto it = values_.find(std::string(name));
  return it == values_.end() ? std::string(def) : it->second;
}

absl::StatusOr<int64_t> CliArgs::GetInt(absl::string_view name, int64_t def) {
  used_.insert(std::string(name));
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return def;
  int64_t v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", it->second, ": expected an integer"));
  }
  return v;
}

absl::StatusOr<int64_t> CliArgs::GetIntInRange(absl::string_view name, int64_t def, int64_t lo,
                                               int64_t hi) {
  absl::StatusOr<int64_t> v = GetInt(name, def);
  if (v.ok() && (*v < lo || *v > hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", *v, ": must be in ", lo, "..", hi));
  }
  return v;
}

absl::StatusOr<double> CliArgs::GetDouble(absl::string_view name, double def) {
  used_.insert(std::string(name));
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return def;
  double v;
  if (!absl::SimpleAtod(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", it->second, ": expected a number"));
  }
  return v;
}

absl::StatusOr<bool> CliArgs::GetBool(absl::string_view name, bool def) {
  used_.insert(std::string(name));
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return def;
  std::string v = absl::AsciiStrToLower(it->second);
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, "=", it->second, ": expected true or false"));
}

namespace {

// Edits (insert, delete, substitute one character) that turn a into b.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

absl::Status CliArgs::CheckAllUsed() const { return CheckAllUsed({}, nullptr); }

absl::Status CliArgs::CheckAllUsed(const std::vector<std::string>& also_known,
                                   std::vector<std::string>* ignored) const {
  const std::set<std::string> known(also_known.begin(), also_known.end());
  for (const auto& [name, value] : values_) {
    if (used_.count(name) != 0) continue;
    if (known.count(name) != 0 && ignored != nullptr) {
      ignored->push_back(name);
      continue;
    }
    // The nearest flag the command asked for or knows, when it is a likely
    // typo: a third of the name's letters or fewer apart (at least one).
    std::string nearest;
    size_t best = std::max<size_t>(1, name.size() / 3) + 1;
    for (const std::set<std::string>* names : {&used_, &known}) {
      for (const std::string& candidate : *names) {
        const size_t d = EditDistance(name, candidate);
        if (d < best) {
          best = d;
          nearest = candidate;
        }
      }
    }
    return absl::InvalidArgumentError(
        nearest.empty()
            ? absl::StrCat("unknown flag --", name)
            : absl::StrCat("unknown flag --", name, " (did you mean --", nearest, "?)"));
  }
  return absl::OkStatus();
}

}  // namespace pstrain

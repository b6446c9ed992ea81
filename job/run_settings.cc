#include "job/run_settings.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/json.h"
#include "job/run_record.h"

namespace pstrain {
namespace {

// The flags that give a model's layers, taken or left together.
bool IsLayersFlag(const std::string& name) {
  return name == "model_config" || name == "config" || name == "hidden";
}

// "--name=value" split; the name is "" when `flag` is not of that form.
std::pair<std::string, std::string> SplitFlag(const std::string& flag) {
  if (flag.rfind("--", 0) != 0) return {"", ""};
  const size_t eq = flag.find('=');
  if (eq == std::string::npos) return {flag.substr(2), "true"};
  return {flag.substr(2, eq - 2), flag.substr(eq + 1)};
}

}  // namespace

absl::StatusOr<std::optional<RunSettings>> ReadRunSettings(const std::string& dir) {
  const std::string path = RunRecordPath(dir);
  if (!std::filesystem::exists(path)) return std::nullopt;
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Json> run = ParseJson(*text);
  if (!run.ok() || !run->is_object()) {
    return absl::DataLossError(absl::StrCat(
        path, " does not parse", run.ok() ? "" : absl::StrCat(": ", run.status().message())));
  }
  const Json* flags = FindMember(*run, "flags");
  if (flags == nullptr || !flags->is_array()) return std::nullopt;
  RunSettings out;
  out.path = path;
  out.flags = JobFlagsOf(FlagsOf(*run));
  const Json* config = FindMember(*run, "model_config");
  const Json* file = FindMember(*run, "model_config_file");
  if (config != nullptr && config->is_string()) out.model_config = config->get<std::string>();
  if (file != nullptr && file->is_string()) out.model_config_file = file->get<std::string>();
  return out;
}

TakenSettings TakeRunSettings(const RunSettings& run, const std::vector<std::string>& skip,
                              bool config_as_text, CliArgs& args) {
  TakenSettings out;
  const bool own_layers = args.Has("model_config") || args.Has("config") || args.Has("hidden");
  // The run's value of each flag, the last one given winning as it did.
  std::vector<std::pair<std::string, std::string>> recorded;
  for (const std::string& flag : run.flags) {
    auto [name, value] = SplitFlag(flag);
    if (name.empty() || std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    auto same = std::find_if(recorded.begin(), recorded.end(),
                             [&name = name](const auto& r) { return r.first == name; });
    if (same != recorded.end()) recorded.erase(same);
    recorded.emplace_back(name, value);
  }
  std::string run_layers;  // the run's layers flag, as given
  for (const auto& [name, value] : recorded) {
    if (IsLayersFlag(name)) run_layers = absl::StrCat("--", name, "=", value);
  }
  // What `args` gives, read before anything is added.
  std::vector<std::pair<std::string, std::string>> given;
  for (const std::string& flag : args.raw_flags()) given.push_back(SplitFlag(flag));
  auto given_value = [&given](const std::string& name) -> const std::string* {
    const std::string* v = nullptr;
    for (const auto& g : given) {
      if (g.first == name) v = &g.second;
    }
    return v;
  };
  for (const auto& [name, value] : recorded) {
    if (IsLayersFlag(name)) {
      if (own_layers) continue;
      if (name != "hidden" && config_as_text && !run.model_config.empty()) {
        out.config_text = run.model_config;
        continue;
      }
      if (args.AddDefault(name, value)) out.taken.push_back(absl::StrCat("--", name, "=", value));
      continue;
    }
    if (const std::string* mine = given_value(name)) {
      if (*mine != value) {
        out.differ.push_back(
            absl::StrCat("--", name, "=", *mine, " (the run had --", name, "=", value, ")"));
      }
      continue;
    }
    if (args.AddDefault(name, value)) out.taken.push_back(absl::StrCat("--", name, "=", value));
  }
  // Layers of the command's own: named when they are not the run's.
  if (own_layers) {
    for (const char* name : {"model_config", "config", "hidden"}) {
      const std::string* mine = given_value(name);
      if (mine == nullptr) continue;
      const std::string flag = absl::StrCat("--", name, "=", *mine);
      bool same = flag == run_layers;
      if (name != std::string("hidden") && !run.model_config.empty()) {
        absl::StatusOr<std::string> text = ReadFile(*mine);
        same = text.ok() && *text == run.model_config;
      }
      if (same) continue;
      out.differ.push_back(absl::StrCat(
          flag, " (",
          flag == run_layers
              ? "the file has changed since the run; run.json holds the text the run had"
              : absl::StrCat("the run had ", run_layers.empty() ? "the default model" : run_layers),
          ")"));
    }
  }
  return out;
}

std::string DescribeTaken(const RunSettings& run, const TakenSettings& taken) {
  std::vector<std::string> parts = taken.taken;
  if (!taken.config_text.empty()) {
    parts.insert(
        parts.begin(),
        absl::StrCat("--model_config=", run.model_config_file.empty() ? "?" : run.model_config_file,
                     " (its text as run.json records it)"));
  }
  std::string out;
  if (!parts.empty()) {
    absl::StrAppend(&out, "the run's settings (", run.path, "): ", absl::StrJoin(parts, ", "));
  }
  if (!taken.differ.empty()) {
    // Named once: after the settings taken, the same file is meant.
    absl::StrAppend(&out,
                    out.empty() ? absl::StrCat("flags that differ from the run's (", run.path, ")")
                                : "; flags that differ from the run's",
                    ": ", absl::StrJoin(taken.differ, ", "));
  }
  return out;
}

std::string TakeRelaunchSettings(const std::string& dir, CliArgs& args) {
  absl::StatusOr<std::optional<RunSettings>> run = ReadRunSettings(dir);
  if (!run.ok() || !run->has_value()) return "";
  return DescribeTaken(**run, TakeRunSettings(**run, {"output_dir"}, false, args));
}

}  // namespace pstrain

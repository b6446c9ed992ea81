#include "job/run_record.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/event_file.h"
#include "base/exit_codes.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "job/flag_table.h"
#include "job/job_description.h"
#include "proto/event.pb.h"

namespace pstrain {
namespace {

constexpr char kHparamsPlugin[] = "hparams";

// run.json's "outcome": "ok", or the status's code and message ("NOT_FOUND:
// cannot open ..."), without the payloads only this process reads.
std::string OutcomeText(const absl::Status& outcome) {
  if (outcome.ok()) return "ok";
  return absl::StrCat(absl::StatusCodeToString(outcome.code()), ": ", outcome.message());
}

// One hparams record in a new event file at the top of `dir`.
absl::Status WriteHparamsData(const std::string& dir, const std::string& tag,
                              const events::HParamsPluginData& data) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> events,
                           EventWriter::Open(dir, /*with_jsonl=*/false));
  return events->WritePluginData(0, tag, kHparamsPlugin, data.SerializeAsString());
}

// How many tasks of `type` the run's cluster has.
int64_t TasksOf(const Json& run, const char* type) {
  const Json* cluster = FindMember(run, "cluster");
  const Json* tasks = cluster == nullptr ? nullptr : FindMember(*cluster, type);
  return tasks != nullptr && tasks->is_array() ? static_cast<int64_t>(tasks->size()) : 0;
}

}  // namespace

events::HParamsPluginData HparamsOfRun(const Json& run, absl::Time started) {
  events::HParamsPluginData data;
  events::SessionStartInfo* start = data.mutable_session_start_info();
  start->set_start_time_secs(absl::ToDoubleSeconds(started - absl::UnixEpoch()));
  auto& hparams = *start->mutable_hparams();
  if (const Json* job = FindMember(run, "job"); job != nullptr && job->is_object()) {
    for (const auto& [name, value] : job->items()) {
      if (value.is_boolean()) {
        hparams[name].set_bool_value(value.get<bool>());
      } else if (value.is_number()) {
        hparams[name].set_number_value(value.get<double>());
      } else if (value.is_string()) {
        hparams[name].set_string_value(value.get<std::string>());
      }
    }
  }
  hparams["ps"].set_number_value(static_cast<double>(TasksOf(run, "ps")));
  // Training replicas: the workers and the chief (one process when local).
  const int64_t replicas = TasksOf(run, "chief") + TasksOf(run, "worker");
  hparams["replicas"].set_number_value(static_cast<double>(std::max<int64_t>(replicas, 1)));
  if (const Json* model = FindMember(run, "model"); model != nullptr) {
    int64_t parameters = 0;
    if (const Json* vars = FindMember(*model, "variables"); vars != nullptr && vars->is_array()) {
      for (const Json& v : *vars) {
        int64_t n = 1;
        if (const Json* shape = FindMember(v, "shape"); shape != nullptr && shape->is_array()) {
          for (const Json& d : *shape) n *= d.is_number_integer() ? d.get<int64_t>() : 1;
        }
        parameters += n;
      }
    }
    hparams["parameters"].set_number_value(static_cast<double>(parameters));
  }
  return data;
}

absl::StatusOr<std::unique_ptr<DirLock>> LockOutputDir(const std::string& dir,
                                                       absl::string_view task,
                                                       absl::Duration wait) {
  if (absl::Status made = MakeDirs(dir); !made.ok()) {
    return WithFailureKind(std::move(made), FailureKind::kBadConfig);
  }
  const std::string holder = ThisProcessAsHolder(absl::StrCat(", ", task));
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    absl::StatusOr<std::unique_ptr<DirLock>> lock = DirLock::Acquire(dir, holder);
    if (lock.ok()) return lock;
    const bool held = absl::StrContains(lock.status().message(), " held by: ");
    if (!held || absl::Now() >= deadline) {
      if (!held) {
        return WithFailureKind(absl::FailedPreconditionError(lock.status().message()),
                               FailureKind::kBadConfig);
      }
      return WithFailureKind(
          absl::AlreadyExistsError(absl::StrCat(
              lock.status().message(),
              ": another job runs in this output directory; one job per --output_dir: "
              "give this job its own, or stop that one first")),
          FailureKind::kBadConfig);
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

std::string RunRecordPath(const std::string& dir) { return dir + "/run.json"; }

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::vector<std::string> JobFlagsOf(const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (const std::string& flag : flags) {
    absl::string_view name = flag;
    if (!absl::ConsumePrefix(&name, "--")) continue;
    name = name.substr(0, name.find('='));
    const FlagDef* def = FindFlag(name);
    if (def == nullptr && absl::ConsumePrefix(&name, "no")) def = FindFlag(name);
    if (def != nullptr && def->group == FlagGroup::kJob) out.push_back(flag);
  }
  return out;
}

std::vector<std::string> FlagsOf(const Json& run) {
  std::vector<std::string> flags;
  const Json* recorded = FindMember(run, "flags");
  if (recorded == nullptr || !recorded->is_array()) return flags;
  for (const Json& f : *recorded) {
    if (f.is_string()) flags.push_back(f.get<std::string>());
  }
  return flags;
}

namespace {

// Whether `run` (run.json's form) is a record of the job of `flags` on
// `cluster`: it names its flags, the same job flags as given, and the same
// cluster.
bool OfThisJob(const Json& run, const std::vector<std::string>& flags, const Json& cluster) {
  const Json* recorded = FindMember(run, "flags");
  const Json* on = FindMember(run, "cluster");
  return recorded != nullptr && recorded->is_array() && on != nullptr && *on == cluster &&
         JobFlagsOf(FlagsOf(run)) == JobFlagsOf(flags);
}

// run.json of `dir` when it records the end of this job (OfThisJob): its
// "outcome" and "ended" are strings then.
std::optional<Json> RecordedEnd(const std::string& dir, const std::vector<std::string>& flags,
                                const Json& cluster) {
  absl::StatusOr<std::string> text = ReadFile(RunRecordPath(dir));
  if (!text.ok()) return std::nullopt;
  absl::StatusOr<Json> run = ParseJson(*text);
  if (!run.ok()) return std::nullopt;
  const Json* outcome = FindMember(*run, "outcome");
  const Json* ended = FindMember(*run, "ended");
  if (outcome == nullptr || !outcome->is_string() || ended == nullptr || !ended->is_string() ||
      !OfThisJob(*run, flags, cluster)) {
    return std::nullopt;
  }
  return *std::move(run);
}

}  // namespace

absl::StatusOr<bool> RecordFailedLaunch(const std::string& dir, const Json& run,
                                        const absl::Status& outcome, absl::Time ended) {
  Json record = run;
  if (absl::StatusOr<std::string> text = ReadFile(RunRecordPath(dir)); text.ok()) {
    absl::StatusOr<Json> before = ParseJson(*text);
    const Json* cluster = FindMember(run, "cluster");
    // Another job's record, or one that does not parse: not ours to replace.
    if (!before.ok() || cluster == nullptr || !OfThisJob(*before, FlagsOf(run), *cluster)) {
      return false;
    }
    record = *std::move(before);
  }
  record["ended"] = Rfc3339(ended);
  record["outcome"] = OutcomeText(outcome);
  record["exit_code"] = RoleExitCode(outcome, FailureKind::kPermanent);
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(RunRecordPath(dir), record.dump(2) + "\n"));
  return true;
}

std::optional<std::string> EndedWell(const std::string& dir,
                                     const std::vector<std::string>& flags, const Json& cluster) {
  std::optional<Json> run = RecordedEnd(dir, flags, cluster);
  if (!run.has_value() || (*run)["outcome"] != Json("ok")) return std::nullopt;
  return (*run)["ended"].get<std::string>();
}

std::optional<absl::Status> EndedBadly(const std::string& dir,
                                       const std::vector<std::string>& flags, const Json& cluster,
                                       absl::Time since) {
  std::optional<Json> run = RecordedEnd(dir, flags, cluster);
  if (!run.has_value() || (*run)["outcome"] == Json("ok")) return std::nullopt;
  const std::string ended = (*run)["ended"].get<std::string>();
  absl::Time at;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%SZ", ended, absl::UTCTimeZone(), &at, &error) ||
      at < since - absl::Seconds(1)) {
    return std::nullopt;
  }
  const Json* code = FindMember(*run, "exit_code");
  const int exit_code = code != nullptr && code->is_number_integer() ? code->get<int>()
                                                                       : kExitPermanent;
  if (exit_code == kExitOk || exit_code >= kExitRetryable) return std::nullopt;
  return WithFailureKind(
      absl::FailedPreconditionError(absl::StrCat("the job failed at ", ended, " (exit ", exit_code,
                                                 "): ", (*run)["outcome"].get<std::string>())),
      FailureKindOfExitCode(exit_code));
}

absl::Status CheckRelaunch(const std::string& dir, const Json& model) {
  const std::string path = RunRecordPath(dir);
  absl::StatusOr<Json> before = ReadRunModel(dir);
  if (before.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  if (before.status().code() == absl::StatusCode::kDataLoss) {
    return absl::DataLossError(absl::StrCat(before.status().message(), "; move it away to go on"));
  }
  if (!before.ok()) return before.status();
  const std::vector<std::string> diff = ModelDifferences(*before, model, "on disk", "in this job");
  if (diff.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      dir, " holds a run of another model (", path,
      "), and its checkpoints cannot be restored "
      "into this one: ",
      JoinDifferences(diff),
      ". Nothing was changed. Relaunch with that run's flags and --model_config to resume it, "
      "or give a new --output_dir to start afresh"));
}

absl::Status AcceptRelaunch(DirLock& lock, const std::string& dir, const Json& model) {
  PSTRAIN_RETURN_IF_ERROR(CheckRelaunch(dir, model));
  return WithFailureKind(lock.Claim(), FailureKind::kBadConfig);
}

absl::Status WriteRunStart(const std::string& dir, Json run, absl::Time started) {
  const std::string path = RunRecordPath(dir);
  int64_t launches = 0;
  std::string first = Rfc3339(started);
  if (auto text = ReadFile(path); text.ok()) {
    if (auto old = ParseJson(*text); old.ok()) {
      const Json* n = FindMember(*old, "launches");
      if (n != nullptr && n->is_number_integer()) launches = n->get<int64_t>();
      const Json* f = FindMember(*old, "first_started");
      if (f != nullptr && f->is_string()) first = f->get<std::string>();
    }
  }
  run["started"] = Rfc3339(started);
  run["first_started"] = first;
  run["launches"] = launches + 1;
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(path, run.dump(2) + "\n"));
  return WriteHparamsData(dir, "_hparams_/session_start_info", HparamsOfRun(run, started));
}

absl::Status WriteRunEnd(const std::string& dir, const absl::Status& outcome, absl::Time ended) {
  const std::string path = RunRecordPath(dir);
  PSTRAIN_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  PSTRAIN_ASSIGN_OR_RETURN(Json run, ParseJson(text));
  run["ended"] = Rfc3339(ended);
  run["outcome"] = OutcomeText(outcome);
  run["exit_code"] = RoleExitCode(outcome, FailureKind::kPermanent);
  PSTRAIN_RETURN_IF_ERROR(WriteFileAtomically(path, run.dump(2) + "\n"));
  events::HParamsPluginData data;
  data.mutable_session_end_info()->set_status(outcome.ok() ? 1 : 2);
  data.mutable_session_end_info()->set_end_time_secs(
      absl::ToDoubleSeconds(ended - absl::UnixEpoch()));
  return WriteHparamsData(dir, "_hparams_/session_end_info", data);
}

}  // namespace pstrain

#include "cli/tools.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/exit_codes.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "common/tf_config.h"
#include "model/mlp.h"
#include "cli/job_flags.h"
#include "worker/ps_client.h"

namespace pstrain {
namespace {

int Fail(absl::string_view cmd, const absl::Status& s) {
  std::fprintf(stderr, "pstrain %s: %s\n", std::string(cmd).c_str(),
               std::string(s.message()).c_str());
  return ExitCodeFor(s);
}

double ImbalancePercent(const Placement& p) {
  int64_t total = 0, largest = 0;
  for (int64_t b : p.bytes_per_ps) {
    total += b;
    largest = std::max(largest, b);
  }
  const double ideal = static_cast<double>(total) / p.num_ps;
  return ideal > 0 ? 100.0 * (largest - ideal) / ideal : 0.0;
}

}  // namespace

std::string PlacementTable(const Placement& p) {
  std::string out = absl::StrFormat("%-28s %-8s %-16s %12s %4s\n", "variable", "slice",
                                    "rows", "bytes", "ps");
  for (const SliceDef& s : p.slices) {
    out += absl::StrFormat("%-28s %-8s %-16s %12d %4d\n", s.variable,
                           absl::StrFormat("%d/%d", s.slice_index, s.num_slices),
                           absl::StrFormat("[%d, %d)", s.row_begin, s.row_end), s.bytes(),
                           s.ps);
  }
  int64_t total = 0;
  for (int64_t b : p.bytes_per_ps) total += b;
  out += "\n";
  for (int i = 0; i < p.num_ps; ++i) {
    out += absl::StrFormat("ps:%-3d %12d bytes  %5.1f%%\n", i, p.bytes_per_ps[i],
                           total > 0 ? 100.0 * p.bytes_per_ps[i] / total : 0.0);
  }
  out += absl::StrFormat("total  %12d bytes; largest ps is %.1f%% above the ideal %d\n",
                         total, ImbalancePercent(p), total / p.num_ps);
  return out;
}

std::string PlacementJson(const Placement& p) {
  Json slices = Json::Array();
  for (const SliceDef& s : p.slices) {
    Json j = Json::Object();
    j.Set("variable", Json::String(s.variable));
    j.Set("key", Json::String(s.key()));
    j.Set("slice_index", Json::Number(s.slice_index));
    j.Set("num_slices", Json::Number(s.num_slices));
    j.Set("row_begin", Json::Number(s.row_begin));
    j.Set("row_end", Json::Number(s.row_end));
    j.Set("bytes", Json::Number(s.bytes()));
    j.Set("ps", Json::Number(s.ps));
    slices.Append(std::move(j));
  }
  Json per_ps = Json::Array();
  for (int64_t b : p.bytes_per_ps) per_ps.Append(Json::Number(b));
  Json root = Json::Object();
  root.Set("num_ps", Json::Number(p.num_ps));
  root.Set("slices", std::move(slices));
  root.Set("bytes_per_ps", std::move(per_ps));
  root.Set("imbalance_percent", Json::Number(ImbalancePercent(p)));
  return root.Dump() + "\n";
}

int PlacementMain(CliArgs& args) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(int64_t num_ps, args.GetInt("ps", 0));
    PSTRAIN_ASSIGN_OR_RETURN(bool json, args.GetBool("json", false));
    PlacementOptions options;
    PSTRAIN_ASSIGN_OR_RETURN(options.min_slice_bytes,
                             args.GetInt("min_slice_bytes", options.min_slice_bytes));
    PSTRAIN_ASSIGN_OR_RETURN(model::JobSpec job, JobSpecFromFlags(args));
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    if (num_ps < 1 || num_ps > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("--ps=", num_ps, ": must be in 1..1024"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<model::Mlp> mlp, model::Mlp::Create(job.model, 1));
    PSTRAIN_ASSIGN_OR_RETURN(Placement p,
                             ComputePlacement(mlp->variables(), num_ps, options));
    return json ? PlacementJson(p) : PlacementTable(p);
  };
  auto out = run();
  if (!out.ok()) return Fail("placement", out.status());
  std::fputs(out->c_str(), stdout);
  return kExitOk;
}

int StatusMain(CliArgs& args, const std::string& tf_config) {
  auto run = [&]() -> absl::StatusOr<std::string> {
    PSTRAIN_ASSIGN_OR_RETURN(std::string ps_list, args.GetString("ps", ""));
    PSTRAIN_ASSIGN_OR_RETURN(bool json, args.GetBool("json", false));
    PSTRAIN_RETURN_IF_ERROR(args.CheckAllUsed());
    std::vector<HostPort> addresses;
    if (!ps_list.empty()) {
      int i = 0;
      for (absl::string_view a : absl::StrSplit(ps_list, ',')) {
        PSTRAIN_ASSIGN_OR_RETURN(HostPort hp,
                                 ParseHostPort(a, absl::StrCat("--ps entry ", i++)));
        addresses.push_back(hp);
      }
    } else if (!tf_config.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(TfConfig cfg, ParseTfConfig(tf_config));
      addresses = cfg.cluster.ps;
    }
    if (addresses.empty()) {
      return absl::InvalidArgumentError("no ps to ask: give --ps=HOST:PORT,... or set TF_CONFIG");
    }
    worker::PsClientOptions options;
    options.ps_addresses = addresses;
    options.rpc_deadline = absl::Seconds(5);
    options.max_attempts = 2;
    Placement empty;
    empty.num_ps = static_cast<int>(addresses.size());
    PSTRAIN_ASSIGN_OR_RETURN(auto client, worker::PsClient::Create(options, empty));
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<v1::StatsResponse> stats, client->Stats());
    if (json) {
      Json root = Json::Array();
      for (size_t i = 0; i < stats.size(); ++i) {
        Json ps = Json::Object();
        ps.Set("ps", Json::Number(stats[i].ps_index()));
        ps.Set("address", Json::String(addresses[i].ToString()));
        ps.Set("global_step", Json::Number(stats[i].global_step()));
        Json slices = Json::Array();
        for (const v1::SliceStats& s : stats[i].slices()) {
          Json j = Json::Object();
          j.Set("key", Json::String(s.key()));
          j.Set("bytes", Json::Number(s.bytes()));
          j.Set("pushes", Json::Number(s.pushes()));
          j.Set("pulls", Json::Number(s.pulls()));
          slices.Append(std::move(j));
        }
        ps.Set("slices", std::move(slices));
        root.Append(std::move(ps));
      }
      return root.Dump() + "\n";
    }
    std::string out;
    for (size_t i = 0; i < stats.size(); ++i) {
      out += absl::StrFormat("ps:%d %s  global step %d\n", stats[i].ps_index(),
                             addresses[i].ToString(), stats[i].global_step());
      if (stats[i].slices_size() == 0) out += "  (no variables yet)\n";
      for (const v1::SliceStats& s : stats[i].slices()) {
        out += absl::StrFormat("  %-32s %12d bytes %10d pushes %10d pulls\n", s.key(),
                               s.bytes(), s.pushes(), s.pulls());
      }
    }
    return out;
  };
  auto out = run();
  if (!out.ok()) return Fail("status", out.status());
  std::fputs(out->c_str(), stdout);
  return kExitOk;
}

}  // namespace pstrain

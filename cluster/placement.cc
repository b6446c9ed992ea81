#include "cluster/placement.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

const char* VariableUpdateName(VariableUpdate update) {
  switch (update) {
    case VariableUpdate::kOptimizer:
      return "optimizer";
    case VariableUpdate::kIncrement:
      return "increment";
    case VariableUpdate::kFrozen:
      return "frozen";
  }
  return "?";
}

absl::StatusOr<VariableUpdate> ParseVariableUpdate(absl::string_view name) {
  for (VariableUpdate u :
       {VariableUpdate::kOptimizer, VariableUpdate::kIncrement, VariableUpdate::kFrozen}) {
    if (name == VariableUpdateName(u)) return u;
  }
  if (name.empty()) return VariableUpdate::kOptimizer;
  return absl::InvalidArgumentError(absl::StrCat("variable update \"", name,
                                                 "\" is not optimizer, increment or frozen"));
}

int64_t VariableDef::row_elements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::string SliceDef::key() const {
  return absl::StrCat(variable, "/part_", slice_index);
}

std::vector<SliceDef> Placement::SlicesOn(int ps) const {
  std::vector<SliceDef> out;
  for (const SliceDef& s : slices) {
    if (s.ps == ps) out.push_back(s);
  }
  return out;
}

std::vector<SliceDef> Placement::SlicesOf(const std::string& variable) const {
  std::vector<SliceDef> out;
  for (const SliceDef& s : slices) {
    if (s.variable == variable) out.push_back(s);
  }
  return out;
}

namespace {

// The PS with the fewest bytes, lowest index on ties, among those not in
// `exclude`.
int LeastLoaded(const std::vector<int64_t>& load, const std::set<int>& exclude) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(load.size()); ++i) {
    if (exclude.count(i)) continue;
    if (best < 0 || load[i] < load[best]) best = i;
  }
  return best;
}

}  // namespace

absl::StatusOr<Placement> ComputePlacement(
    const std::vector<VariableDef>& variables, int num_ps,
    const PlacementOptions& options) {
  if (num_ps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement needs at least one ps, got ", num_ps));
  }
  if (options.min_slice_bytes < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement min_slice_bytes ", options.min_slice_bytes, " is below 4"));
  }
  std::set<std::string> names;
  for (const VariableDef& v : variables) {
    if (v.name.empty()) {
      return absl::InvalidArgumentError("variable with an empty name");
    }
    if (!names.insert(v.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", v.name, "\" is defined twice"));
    }
    if (v.shape.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable \"", v.name, "\" has an empty shape"));
    }
    for (int64_t d : v.shape) {
      if (d < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable \"", v.name, "\" has a dimension of ", d));
      }
    }
    if (v.embedding && v.shape.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding table \"", v.name, "\" has rank ", v.shape.size(),
          "; it must be [vocabulary, dim]"));
    }
  }

  Placement p;
  p.num_ps = num_ps;
  p.variables = variables;
  p.bytes_per_ps.assign(num_ps, 0);

  // Largest first; name breaks ties so input order does not matter.
  std::vector<size_t> order(variables.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (variables[a].bytes() != variables[b].bytes()) {
      return variables[a].bytes() > variables[b].bytes();
    }
    return variables[a].name < variables[b].name;
  });

  for (const VariableDef& v : variables) {
    if (!v.embedding) continue;
    p.embeddings.push_back(v);
    const int64_t row_bytes = v.row_elements() * 4;
    for (int i = 0; i < num_ps; ++i) {
      p.bytes_per_ps[i] += row_bytes * (v.rows() / num_ps + (i < v.rows() % num_ps ? 1 : 0));
    }
  }
  std::vector<std::vector<SliceDef>> per_var(variables.size());
  for (size_t vi : order) {
    const VariableDef& v = variables[vi];
    if (v.embedding) continue;
    int64_t k = 1;
    if (v.bytes() >= 2 * options.min_slice_bytes) {
      k = std::min<int64_t>({num_ps, v.rows(), v.bytes() / options.min_slice_bytes});
    }
    std::set<int> used;
    int64_t base = v.rows() / k, extra = v.rows() % k, row = 0;
    for (int64_t i = 0; i < k; ++i) {
      SliceDef s;
      s.variable = v.name;
      s.slice_index = static_cast<int>(i);
      s.num_slices = static_cast<int>(k);
      s.row_begin = row;
      s.row_end = row + base + (i < extra ? 1 : 0);
      s.row_elements = v.row_elements();
      row = s.row_end;
      s.ps = LeastLoaded(p.bytes_per_ps, used);
      used.insert(s.ps);
      p.bytes_per_ps[s.ps] += s.bytes();
      per_var[vi].push_back(s);
    }
  }
  for (auto& list : per_var) {
    for (SliceDef& s : list) p.slices.push_back(std::move(s));
  }
  return p;
}

int EmbeddingOwner(int64_t id, int num_ps) {
  if (num_ps == 1) return 0;  // the hash below, mod 1, without its division
  uint64_t x = static_cast<uint64_t>(id) + 0x9e3779b97f4a7c15ULL;  // SplitMix64
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<int>(x % static_cast<uint64_t>(num_ps));
}

}  // namespace pstrain

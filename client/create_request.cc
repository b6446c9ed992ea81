#include "client/create_request.h"

namespace pstrain::client {

v1::CreateVariablesRequest CreateRequestFor(const Placement& placement, int ps,
                                            const std::vector<float>& params,
                                            const std::vector<int64_t>& offsets,
                                            const CreateOptions& create) {
  v1::CreateVariablesRequest req;
  req.set_ps_index(ps);
  req.set_num_ps(placement.num_ps);
  req.set_consistency(create.consistency.ToString());
  req.set_num_replicas(create.num_replicas);
  req.set_replicas_to_aggregate(create.replicas_to_aggregate);
  req.set_seed(create.seed);
  req.set_generation(create.generation);
  req.set_sync_wait_ms(static_cast<int32_t>(absl::ToInt64Milliseconds(create.sync_wait)));
  if (create.restore_step >= 0) {
    v1::CheckpointRef* ref = req.mutable_restore();
    ref->set_dir(create.restore_dir);
    ref->set_step(create.restore_step);
    ref->set_num_ps(create.restore_num_ps > 0 ? create.restore_num_ps : placement.num_ps);
  }
  const OptimizerSpec& optimizer = create.optimizer;
  v1::OptimizerConfig* o = req.mutable_optimizer();
  o->set_name(optimizer.name);
  o->set_learning_rate(optimizer.learning_rate);
  o->set_momentum(optimizer.momentum);
  o->set_nesterov(optimizer.nesterov);
  o->set_initial_accumulator(optimizer.initial_accumulator);
  o->set_beta1(optimizer.beta1);
  o->set_beta2(optimizer.beta2);
  o->set_epsilon(optimizer.epsilon);
  o->set_l1(optimizer.l1);
  o->set_l2(optimizer.l2);
  o->set_dense_table_updates(optimizer.dense_table_updates);
  o->set_schedule(optimizer.schedule);
  o->set_decay_steps(optimizer.decay_steps);
  o->set_decay_rate(optimizer.decay_rate);
  o->set_staircase(optimizer.staircase);
  o->set_alpha(optimizer.alpha);
  o->mutable_boundaries()->Add(optimizer.boundaries.begin(), optimizer.boundaries.end());
  o->mutable_values()->Add(optimizer.values.begin(), optimizer.values.end());
  for (const SliceDef& s : placement.SlicesOn(ps)) {
    size_t v = 0;
    while (placement.variables[v].name != s.variable) ++v;
    const VariableDef& var = placement.variables[v];
    v1::SliceSpec* spec = req.add_slices();
    spec->set_variable(s.variable);
    spec->set_slice_index(s.slice_index);
    spec->set_num_slices(s.num_slices);
    spec->set_row_begin(s.row_begin);
    spec->set_row_end(s.row_end);
    for (int64_t d : var.shape) spec->add_shape(d);
    if (var.consistency.has_value()) spec->set_consistency(var.consistency->ToString());
    spec->set_initializer(var.initializer);
    if (!var.trainable()) spec->set_update(VariableUpdateName(var.update));
    if (!params.empty()) {
      const float* src = params.data() + offsets[v] + s.element_offset();
      req.add_initial_values(reinterpret_cast<const char*>(src), s.bytes());
    }
  }
  for (const VariableDef& e : placement.embeddings) {
    v1::EmbeddingSpec* spec = req.add_embeddings();
    spec->set_variable(e.name);
    spec->set_vocabulary(e.rows());
    spec->set_dim(e.row_elements());
    if (e.consistency.has_value()) spec->set_consistency(e.consistency->ToString());
    spec->set_initializer(e.initializer);
  }
  return req;
}

}  // namespace pstrain::client

#!/usr/bin/env bash
# A few chaos trials (tests/chaos.py) with fixed seeds, each a whole job run
# as an orchestrator runs it: failure cases found by earlier trials (one PS
# killed five times with the last kill in the final phase, a chief killed
# after a PS restore, a chief killed in its final phase), each with the seed
# it has among the six of the full set. The other two (trials 1 and 3: a PS
# killed as the final phase starts, a chief killed after a worker finished)
# run as unit tests of the chief's parts (coordinator/: PsWatchTest,
# CoordinatorTest's kept reports, JobFinisherTest) and in a soak. Trial 5
# is a cluster without ps: a replica frozen past --sync_wait_secs, so its
# ring neighbours end the step retryably, then woken to find them gone; the
# job resumes from its last checkpoint to the schedule's step. Trial 6
# kills the chief of an async job while it trains its shard: restarted, it
# carries on from the pushes the PS applied from it, and the job ends at
# exactly the schedule's global step (every trial checks that). Trials 7-9
# are jobs that cannot run (an output directory the chief cannot write, a
# truncated training file, a worker started under an index its cluster
# does not have): every task must exit 2 within 10 s of the start. Trials
# 10 and 11 are clusters without ps at their edges: a training file cut
# short (every replica and the evaluator exit 2, the failure in run.json),
# and replica 0 killed while it writes the job's end (the others wait for
# it, end retryably, and the relaunch finishes the job). Trials 12-15 are
# its other edges: a record one replica meets in mid-training with its
# label out of range, and one every replica meets (a checksum that fails):
# the failure goes around the ring, and every task, the evaluator included,
# exits 1 with it recorded in run.json; a replica stopped in the final
# phase past --sync_wait_secs, and the evaluator killed as it comes to
# score the final checkpoint: the job still ends 0, scored. A long
# soak is `tests/chaos.py --pstrain=bazel-bin/pstrain
# --pstrain_slow_disk=bazel-bin/tests/pstrain_slow_disk --trials=50`.
# Bazel runs the five as shards (tests/BUILD): this shard runs every
# TEST_TOTAL_SHARDS-th of them from TEST_SHARD_INDEX.
set -euo pipefail
trials=(0 2 4 5 6 7 8 9 10 11 12 13 14 15)
run=()
total=${TEST_TOTAL_SHARDS:-1}
index=${TEST_SHARD_INDEX:-0}
[[ -n "${TEST_SHARD_STATUS_FILE:-}" ]] && touch "$TEST_SHARD_STATUS_FILE"
for i in "${!trials[@]}"; do
  (( i % total == index )) && run+=("${trials[$i]}")
done
(( ${#run[@]} > 0 )) || { echo "shard $index of $total: no trial"; exit 0; }
exec /usr/bin/python3 tests/chaos.py --pstrain="$TEST_SRCDIR/pstrain/pstrain" \
  --pstrain_slow_disk="$TEST_SRCDIR/pstrain/tests/pstrain_slow_disk" --seed=29 \
  --trials=16 --run_trials="$(IFS=,; echo "${run[*]}")" --out="$TEST_TMPDIR/chaos" \
  --faults=ps_kill_5x,ps_kill_final,ps_restored_then_chief_killed,chief_kill_after_done,chief_kill_final,allreduce_replica_freeze,chief_kill,readonly_output_dir,truncated_input,bad_task_index,allreduce_truncated_input,allreduce_chief_kill_final,allreduce_bad_record,allreduce_bad_checksum,allreduce_replica_freeze_final,allreduce_evaluator_kill_final

#!/usr/bin/python3
"""Chaos trials: a pstrain job run the way an orchestrator runs it, with faults.

Every task (2 PS, a chief, 2 workers, an evaluator; for the faults named
allreduce_*, the same without PS: the replicas train by ring all-reduce) is
its own process with its own TF_CONFIG on loopback. A task that exits 128-255 or dies of a signal
is started again 0.5 s later; one that exits 0-127 never is (Kubernetes'
`restartPolicy: ExitCode`). Each trial injects one fault from a seeded list
at a seeded moment. A trial survives when it ends, within its bound, with
every task's last exit 0, the final checkpoint complete and scored by the
evaluator, final_metrics.json written, the global step equal to the
schedule exactly (no update lost, none applied twice), and nothing left
running. ps_restarted_after_end also needs the PS started after the job's
end to exit 0 within 5 s; two_chiefs, the second chief to exit 2 naming the
job that holds the output directory.

The faults in FAILS_FOR_GOOD are a job that cannot run: an output directory
the chief cannot write (mounted read-only in its own mount namespace when
run as root, else made read-only for every task), a training file cut short
(every task reads a copy of the data with train-images truncated), a worker
started under an index its cluster does not have (worker:1 as index 5);
allreduce_truncated_input is the training file cut short in a job without
PS; allreduce_bad_record is a record of the training file (the data as
TFRecord files, streamed) whose label one replica meets in mid-training out
of range: that replica fails for good and tells the others around the ring,
so every task ends with its code (1), and run.json records it.
allreduce_bad_checksum damages the record's bytes
instead, which every replica reading the file meets at once.
Such a trial survives when every task's last exit is that code (2, or 1),
none runs 10 s after the trial began, and nothing is left running.

  tests/chaos.py --pstrain=bazel-bin/pstrain --trials=50 --seed=1   # a soak
  tests/chaos.py --pstrain=... --faults=ps_kill_5x,chief_kill_after_done

Prints one line per trial and a summary (trials, survived, hangs, the
median and worst time from fault to the job's end); exit status 1 when a
trial did not survive. Logs of failed trials are kept under --out. An
allreduce_* trial whose fault ends a replica also checks that every other
training replica exited retryably within --collapse_bound_s of the fault (the
job ends, to be started again) and prints that time and the step the
relaunch resumed from.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

RESTART_DELAY_S = 0.5


def masked_crc32c(data):
    """TFRecord's checksum of `data`: CRC-32C, masked."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    crc ^= 0xFFFFFFFF
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


# The label feature of a tf.train.Example as `pstrain data to-tfrecord`
# writes it, up to its one-byte value: the map entry's key, then its Feature
# (an int64_list of one packed varint).
LABEL = b"label\x12\x05\x1a\x03\x0a\x01"


def bad_record_data(args, trial_out, rng, checksum):
    """The data of allreduce_bad_record and allreduce_bad_checksum:
    Fashion-MNIST as TFRecord files (raw bytes), written once per run, copied
    into the trial with one record damaged, one among the second eighth of
    the file, which replicas meet a hundred or so steps into their first
    epoch. Its label is 99 (of 10 classes) with its checksum right: only the
    replica whose record it is decodes it (by-record sharding); or, with
    `checksum`, a byte of its data is flipped, which every replica reading
    the file finds (the count at launch reads only the framing). A config
    streams them (a shuffle buffer) through the job's MLP. The flags that
    read them."""
    cache = os.path.join(args.out, "fashion-tfrecord")
    if not os.path.exists(os.path.join(cache, "written")):
        subprocess.run([args.pstrain, "data", "to-tfrecord", "--data_dir=" + args.data_dir,
                        "--out=" + cache, "--image_encoding=raw", "--compression=NONE"],
                       check=True, stdout=subprocess.DEVNULL)
        open(os.path.join(cache, "written"), "w").close()
    data = os.path.join(trial_out, "data")
    os.makedirs(data)
    shutil.copy(os.path.join(cache, "test-00000-of-00001.tfrecord"), data)
    with open(os.path.join(cache, "train-00000-of-00001.tfrecord"), "rb") as f:
        blob = bytearray(f.read())
    records = []  # (where its data starts, its length)
    at = 0
    while at < len(blob):
        (length,) = struct.unpack_from("<Q", blob, at)
        records.append((at + 12, length))  # the length, its checksum, the data
        at += 12 + length + 4
    start, length = records[rng.randrange(len(records) // 8, len(records) // 4)]
    if checksum:
        blob[start + length // 2] ^= 0xFF
    else:
        label = blob.find(LABEL, start, start + length) + len(LABEL)
        assert label >= len(LABEL), "no label feature where pstrain data to-tfrecord writes it"
        blob[label] = 99
        struct.pack_into("<I", blob, start + length, masked_crc32c(blob[start:start + length]))
    with open(os.path.join(data, "train-00000-of-00001.tfrecord"), "wb") as f:
        f.write(blob)
    layers = "".join('layer { dense { units: %s activation: relu } }\n' % u
                     for u in args.hidden.split(","))
    config = os.path.join(data, "model.pbtxt")
    with open(config, "w") as f:
        f.write('input {\n  format: tfrecord\n  train_files: "train-*.tfrecord"\n'
                '  test_files: "test-*.tfrecord"\n  shuffle_buffer: 1000\n'
                '  feature { name: "image_raw" decode: "raw_uint8" length: 784 '
                'scale: 0.00392156862745098 }\n  label: "label"\n}\n' + layers +
                'layer { dense { units: 10 } }\n'
                'optimizer { name: "sgd" learning_rate: 0.05 }\n')
    return ["--data_dir=" + data, "--model_config=" + config]


def free_ports(n):
    # Below the kernel's ephemeral range, as pstrain launch picks them: a
    # port the kernel hands out meanwhile (a PS's frame port, an outgoing
    # connection) is never one of these.
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    socks, ports = [], []
    attempts = 0
    while len(ports) < n:
        attempts += 1
        s = socket.socket()
        # The kernel's choice once that range seems full.
        port = rng.randrange(10000, low) if low > 10001 and attempts <= 1000 else 0
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            if port == 0:
                raise
            continue
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def retryable(code):
    # Popen gives -N for a death by signal N: 128+N to an orchestrator.
    return code < 0 or code >= 128


class Task:
    def __init__(self, name, argv, env, log_path):
        self.name, self.argv, self.env, self.log_path = name, argv, env, log_path
        self.proc = None
        self.starts = 0
        self.codes = []          # every exit, in order
        self.exit_times = []     # when each came (seconds since the trial began)
        self.restart_at = None   # when a retryable exit is to be restarted

    def start(self):
        self.starts += 1
        with open(self.log_path, "a") as log:
            log.write("=== start %d\n" % self.starts)
            log.flush()
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.restart_at = None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.running():
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            return True
        return False

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


class Trial:
    def __init__(self, args, number, fault, seed):
        self.args, self.number, self.fault, self.seed = args, number, fault, seed
        self.rng = random.Random(seed)
        self.out = os.path.join(args.out, "trial-%03d-%s" % (number, fault))
        shutil.rmtree(self.out, ignore_errors=True)
        os.makedirs(self.out)
        self.job_dir = os.path.join(self.out, "job")
        self.allreduce = fault.startswith("allreduce_")
        data_flags = []
        if fault in ("truncated_input", "allreduce_truncated_input"):
            data = os.path.join(self.out, "data")
            shutil.copytree(args.data_dir, data)
            images = os.path.join(data, "train-images-idx3-ubyte.gz")
            with open(images, "r+b") as f:
                f.truncate(os.path.getsize(images) // 2)
            data_flags = ["--data_dir=" + data]
        elif fault in ("allreduce_bad_record", "allreduce_bad_checksum"):
            data_flags = bad_record_data(args, self.out, self.rng,
                                         checksum=fault == "allreduce_bad_checksum")
        elif fault == "readonly_output_dir":
            os.makedirs(self.job_dir)
            if os.geteuid() != 0:
                os.chmod(self.job_dir, 0o555)
        ports = free_ports(6)
        at = lambda p: "127.0.0.1:%d" % p
        self.cluster = {"chief": [at(ports[0])], "ps": [at(ports[1]), at(ports[2])],
                        "worker": [at(ports[3]), at(ports[4])], "evaluator": [at(ports[5])]}
        if self.allreduce:
            del self.cluster["ps"]
        # allreduce_bad_*: the layers are its config's; --model_config: that file's.
        layers = ([] if fault.startswith("allreduce_bad_")
                  else ["--model_config=" + args.model_config] if args.model_config
                  else ["--hidden=%s" % args.hidden])
        job_flags = layers + [
                     "--epochs=%d" % args.epochs,
                     "--batch_size=%d" % args.batch_size,
                     # Steps that wait a little (not compute): a job long
                     # enough for faults to land in, at little CPU.
                     # two_chiefs: long enough for the second chief's
                     # wait for the directory (10 s) to end before the job.
                     "--straggler=all:%d" % (args.step_delay_ms * (3 if fault == "two_chiefs"
                                                                   else 1)),
                     "--checkpoint_secs=1",
                     "--seed=%d" % (seed % 1000 + 1), "--output_dir=" + self.job_dir] + data_flags
        if self.allreduce:
            # A neighbour silent this long inside a step fails it.
            job_flags.append("--sync_wait_secs=%d" % args.allreduce_wait_s)
        else:
            job_flags.append("--consistency=" + ("sync" if fault.endswith("_sync") else "async"))
        self.tasks = {}
        self.intruder = None    # two_chiefs: the second chief
        for role, addrs in self.cluster.items():
            for i in range(len(addrs)):
                name = "%s:%d" % (role, i)
                env = dict(os.environ)
                # bad_task_index: worker:1 started as the cluster's worker:5.
                index = 5 if fault == "bad_task_index" and name == "worker:1" else i
                env["TF_CONFIG"] = json.dumps(
                    {"cluster": self.cluster, "task": {"type": role, "index": index}})
                argv = [args.pstrain]
                # A slow disk: checkpoints (the final one too) take long
                # enough for faults to land in them; the PS's, and replica
                # 0's when the fault is its loss in the final one.
                # allreduce_*_final and _after_done: replica 0's final
                # checkpoint is slow too, so the others wait for its end
                # long enough for the fault to land on them.
                slow = role == "ps" or (name == "chief:0" and fault in (
                    "allreduce_chief_kill_final", "allreduce_worker_kill_after_done",
                    "allreduce_replica_freeze_final", "allreduce_evaluator_kill_final"))
                if slow and args.pstrain_slow_disk:
                    argv = [args.pstrain_slow_disk]
                    env["PSTRAIN_TEST_SHARD_PAUSE_MS"] = str(args.checkpoint_delay_ms)
                if role == "ps":
                    # The job's flags, as one argument list gives them: a
                    # PS started after its job ended finds that in run.json.
                    argv += job_flags
                elif role == "evaluator":
                    argv += job_flags + ["--eval_poll_secs=1"]
                else:
                    argv += job_flags + ["--ps_wait_s=%d" % args.ps_wait_s]
                if (fault == "readonly_output_dir" and name == "chief:0"
                        and os.geteuid() == 0):
                    # Its own view of the output directory, read-only.
                    argv = ["unshare", "-m", "sh", "-c",
                            'mount --bind -o ro "$0" "$0" && exec "$@"', self.job_dir] + argv
                self.tasks[name] = Task(name, argv, env,
                                        os.path.join(self.out, name.replace(":", "-") + ".log"))
                if name == "chief:0":
                    # two_chiefs: another job's chief started on the same
                    # output directory while this one trains.
                    self.intruder = Task("second chief", argv, env,
                                         os.path.join(self.out, "second-chief.log"))
        self.late_start = None  # ps_restarted_after_end: when ps:0 started again
        self.events = []      # (seconds since start, what)
        self.fault_time = None
        self.chief_done_at = None
        self.left_running = []

    # --- what the injector looks at ---
    def now(self):
        return time.monotonic() - self.t0

    def note(self, what):
        self.events.append((self.now(), what))

    def training(self):
        said = "training by all-reduce " if self.allreduce else "training replica "
        return all(said in self.tasks[t].log() for t in ("chief:0", "worker:0", "worker:1"))

    def chief_log_count(self, text):
        return self.tasks["chief:0"].log().count(text)

    def final_step(self):
        """One replica's steps in the job (a job without PS, or sync: its last step)."""
        return self.args.epochs * (60000 // 3 // self.args.batch_size)

    def replicas_agreed(self):
        """Whether a job without PS is in its final phase: the replicas have
        agreed on the final model, and replica 0 writes the job's end."""
        return self.chief_log_count("every replica holds the same model") > 0

    def final_checkpoint_indexed(self):
        """Whether the checkpoint index names the final checkpoint."""
        try:
            with open(os.path.join(self.job_dir, "checkpoint")) as f:
                index = json.load(f)
        except (OSError, ValueError):
            return False
        return index.get("final") is True and index.get("step") == self.final_step()

    def checkpoint_tmp(self):
        try:
            for d in os.listdir(self.job_dir):
                if d.startswith("ckpt-"):
                    for f in os.listdir(os.path.join(self.job_dir, d)):
                        if f.endswith(".tmp"):
                            return True
        except OSError:
            pass
        return False

    def kill(self, name, sig=signal.SIGKILL):
        if self.tasks[name].signal(sig):
            self.note("%s %s" % (signal.Signals(sig).name, name))
            if self.fault_time is None:
                self.fault_time = self.now()
            return True
        return False

    # --- the faults: generators that yield while they wait ---
    def wait_for(self, ready, bound_s=120):
        end = self.now() + bound_s
        while not ready() and self.now() < end:
            yield
        return ready()

    def sleep(self, seconds):
        end = self.now() + seconds
        while self.now() < end:
            yield

    def injector(self):
        f, rng = self.fault, self.rng
        if f in FAILS_FOR_GOOD:
            # There from the start.
            self.fault_time = 0.0
            self.note(f)
            return
        if f == "chief_kill_step0":
            # As it writes the checkpoint of step 0, right after it initialised
            # the variables.
            yield from self.wait_for(lambda: self.chief_log_count("initialised ")
                                     or self.checkpoint_tmp(), 60)
            self.kill("chief:0")
            return
        yield from self.wait_for(self.training)
        if f in ("ps_kill", "ps_kill_sync"):
            yield from self.sleep(rng.uniform(0.5, 4))
            self.kill("ps:%d" % rng.randrange(2))
        elif f == "ps_kill_5x":
            # The same PS five times, 3-4 s apart; the last once every
            # replica is done (the chief's final phase).
            for _ in range(4):
                self.kill("ps:0")
                yield from self.sleep(rng.uniform(3, 4))
                if self.chief_log_count("every replica is done"):
                    break
            yield from self.wait_for(lambda: self.chief_log_count("every replica is done"))
            yield from self.wait_for(lambda: self.tasks["ps:0"].running())
            self.kill("ps:0")
        elif f == "ps_kill_both":
            yield from self.sleep(rng.uniform(0.5, 4))
            self.kill("ps:0")
            self.kill("ps:1")
        elif f == "ps_kill_in_checkpoint":
            yield from self.sleep(rng.uniform(0.5, 2))
            yield from self.wait_for(self.checkpoint_tmp, 30)
            self.kill("ps:%d" % rng.randrange(2))
        elif f == "ps_kill_final":
            # At once: the final checkpoint and score take tens of ms here.
            yield from self.wait_for(lambda: self.chief_log_count("every replica is done"))
            self.kill("ps:%d" % rng.randrange(2))
        elif f == "ps_freeze":
            yield from self.sleep(rng.uniform(0.5, 4))
            name = "ps:%d" % rng.randrange(2)
            if self.kill(name, signal.SIGSTOP):
                yield from self.sleep(10)
                self.kill(name, signal.SIGCONT)
        elif f == "ps_restored_then_chief_killed":
            yield from self.sleep(rng.uniform(0.5, 3))
            before = self.chief_log_count("restored every ps")
            self.kill("ps:0")
            yield from self.wait_for(lambda: self.chief_log_count("restored every ps") > before, 60)
            yield from self.sleep(rng.uniform(0.5, 5))
            self.kill("chief:0")
        elif f == "chief_kill":
            yield from self.sleep(rng.uniform(0.5, 4))
            self.kill("chief:0")
        elif f == "chief_kill_after_done":
            yield from self.wait_for(lambda: self.chief_log_count("worker:1 finished") > 0)
            yield from self.sleep(0.1)
            self.kill("chief:0")
        elif f == "chief_kill_final":
            yield from self.wait_for(lambda: self.chief_log_count("every replica is done"))
            yield from self.sleep(rng.uniform(0, 0.02))
            self.kill("chief:0")
        elif f in ("worker_kill", "worker_kill_sync"):
            yield from self.sleep(rng.uniform(0.5, 4))
            self.kill("worker:%d" % rng.randrange(2))
        elif f == "evaluator_kill_scoring":
            ev = self.tasks["evaluator:0"]
            scored = ev.log().count("eval at step")
            yield from self.wait_for(lambda: ev.log().count("evaluator: checkpoint at step")
                                     + ev.log().count("eval at step") > scored, 60)
            yield from self.sleep(rng.uniform(0, 0.2))
            self.kill("evaluator:0")
        elif f == "whole_job":
            yield from self.sleep(rng.uniform(1, 4))
            self.kill_all()
        elif f == "allreduce_replica_kill":
            yield from self.sleep(rng.uniform(0.5, 4))
            self.kill(rng.choice(["chief:0", "worker:0", "worker:1"]))
        elif f == "allreduce_replica_freeze":
            # Stopped for longer than --sync_wait_secs: its neighbours fail
            # the step; woken, it finds them gone.
            yield from self.sleep(rng.uniform(0.5, 4))
            name = rng.choice(["chief:0", "worker:0", "worker:1"])
            if self.kill(name, signal.SIGSTOP):
                yield from self.sleep(self.args.allreduce_wait_s + 3)
                self.kill(name, signal.SIGCONT)
        elif f == "allreduce_evaluator_kill":
            yield from self.sleep(rng.uniform(0.5, 4))
            self.kill("evaluator:0")
        elif f == "allreduce_chief_kill_final":
            # Replica 0 lost while it writes the job's end (the final
            # checkpoint, the score, final_metrics.json): the others, which
            # wait for it, end retryably and the relaunch finishes the job.
            yield from self.wait_for(self.replicas_agreed)
            yield from self.sleep(rng.uniform(0, 0.05))
            self.kill("chief:0")
        elif f == "allreduce_worker_kill_after_done":
            # A replica lost as the job ends, or after: restarted, it finds
            # the end in run.json and exits 0 (or the job ends retryably
            # and the relaunch finishes it).
            yield from self.wait_for(self.replicas_agreed)
            yield from self.sleep(rng.uniform(0, 0.3))
            self.kill("worker:1")
        elif f == "allreduce_replica_freeze_final":
            # A replica stopped in the final phase, past --sync_wait_secs,
            # while replica 0 writes the job's end: replica 0 ends 0 once the
            # end is on disk; the others end retryably and, restarted (the
            # frozen one once woken), find the end in run.json and exit 0.
            yield from self.wait_for(self.replicas_agreed)
            yield from self.sleep(rng.uniform(0, 0.2))
            name = rng.choice(["worker:0", "worker:1"])
            if self.kill(name, signal.SIGSTOP):
                yield from self.sleep(self.args.allreduce_wait_s + 3)
                self.kill(name, signal.SIGCONT)
        elif f == "allreduce_evaluator_kill_final":
            # The evaluator lost while it scores the final checkpoint:
            # restarted, it scores it, and replica 0, which waits for that
            # score, ends after it.
            yield from self.wait_for(self.replicas_agreed)
            # It polls the index every second and scores the MLP in tens
            # of ms: a moment before its next poll lands before or inside
            # the score (a kill after it would find it gone).
            yield from self.wait_for(self.final_checkpoint_indexed, 60)
            yield from self.sleep(rng.uniform(0, 0.8))
            if "eval at step %d:" % self.final_step() not in self.tasks["evaluator:0"].log():
                self.kill("evaluator:0")
        elif f == "two_chiefs":
            # One job per output directory: the second chief is refused
            # with exit 2, naming the first, and this job goes on.
            yield from self.sleep(rng.uniform(0.5, 3))
            self.note("start a second chief on the output directory")
            if self.fault_time is None:
                self.fault_time = self.now()
            self.intruder.start()
            yield from self.wait_for(lambda: not self.intruder.running(), 30)
            if self.intruder.running():
                self.intruder.signal(signal.SIGKILL)
                self.intruder.proc.wait()
            self.intruder.codes.append(self.intruder.proc.poll())
            self.note("second chief exited %s" % self.intruder.codes[-1])
        elif f == "ps_restarted_after_end":
            # Stopped by the chief at the job's end, then started again (an
            # orchestrator that restarts it, a late start): it finds the
            # job's end recorded and exits 0 within a few seconds.
            ps = self.tasks["ps:0"]
            yield from self.wait_for(lambda: ps.codes and ps.codes[-1] == 0 and not ps.running(),
                                     200)
            self.note("start ps:0 after the job's end")
            self.late_start = self.now()
            if self.fault_time is None:
                self.fault_time = self.now()
            ps.start()
        elif f == "none":
            pass
        else:
            raise ValueError("unknown fault " + f)

    def stop_everything(self):
        for t in self.tasks.values():
            if t.running():
                t.signal(signal.SIGCONT)
                t.signal(signal.SIGKILL)
                t.proc.wait()

    def kill_all(self):
        for name in self.tasks:
            self.kill(name)

    # --- the orchestrator ---
    def run(self):
        self.t0 = time.monotonic()
        for name in ("ps:0", "ps:1", "chief:0", "worker:0", "worker:1", "evaluator:0"):
            if name in self.tasks:
                self.tasks[name].start()
        injector = self.injector()
        hung = False
        while True:
            if injector is not None:
                try:
                    next(injector)
                except StopIteration:
                    injector = None
            pending = False
            for t in self.tasks.values():
                if t.proc is not None and t.restart_at is None and t.proc.poll() is not None:
                    code = t.proc.returncode
                    t.codes.append(code)
                    t.exit_times.append(self.now())
                    self.note("%s exited %d" % (t.name, code if code >= 0 else 128 - code))
                    t.proc = None
                    if retryable(code):
                        t.restart_at = time.monotonic() + RESTART_DELAY_S
                if t.restart_at is not None:
                    pending = True
                    if time.monotonic() >= t.restart_at:
                        self.note("restart " + t.name)
                        t.start()
                if t.running():
                    pending = True
            if not pending:
                break
            chief = self.tasks["chief:0"]
            if chief.codes and not retryable(chief.codes[-1]) and chief.restart_at is None:
                # The job is over (TFJob's success policy); what still runs
                # after a grace time is stopped, as its cleanPodPolicy
                # would, and counts against the trial.
                if self.chief_done_at is None:
                    self.chief_done_at = self.now()
                elif self.now() - self.chief_done_at > self.args.cleanup_grace_s:
                    for t in self.tasks.values():
                        if t.running():
                            self.left_running.append(t.name)
                            t.signal(signal.SIGCONT)
                            t.signal(signal.SIGTERM)
                    self.note("SIGTERM to " + ", ".join(self.left_running))
                    self.chief_done_at = float("inf")
            if self.now() > self.args.trial_timeout_s:
                hung = True
                self.note("hung: killing what is left")
                self.stop_everything()
                break
            time.sleep(0.05)
        self.elapsed = self.now()
        return self.verdict(hung)

    def verdict(self, hung):
        problems = []
        if self.fault in FAILS_FOR_GOOD:
            return self.failed_verdict(hung, problems)
        if self.left_running:
            problems.append("still running %ds after the chief finished: %s" % (
                self.args.cleanup_grace_s, ", ".join(self.left_running)))
        if hung:
            problems.append("hung past %ds" % self.args.trial_timeout_s)
        for t in self.tasks.values():
            last = t.codes[-1] if t.codes else None
            if last != 0:
                problems.append("%s last exit %s" % (t.name, last))
        if self.fault == "two_chiefs":
            log = self.intruder.log()
            if self.intruder.codes != [2]:
                problems.append("the second chief exited %s, not 2" % self.intruder.codes)
            if "another job runs in this output directory" not in log:
                problems.append("the second chief did not name the job holding the directory")
        if self.fault == "ps_restarted_after_end":
            ps = self.tasks["ps:0"]
            if self.late_start is None:
                problems.append("ps:0 was not started after the job's end")
            elif not ps.exit_times or ps.exit_times[-1] - self.late_start > 5:
                problems.append("ps:0, started after the job's end, did not exit within 5s")
        def read_json(name, missing):
            try:
                with open(os.path.join(self.job_dir, name)) as f:
                    return json.load(f)
            except (OSError, ValueError):
                problems.append(missing)
                return {}
        metrics = read_json("final_metrics.json", "no final_metrics.json")
        index = read_json("checkpoint", "no checkpoint index")
        if index and not index.get("final"):
            problems.append("the newest checkpoint is not final")
        if index.get("final"):
            manifest = os.path.join(self.job_dir, "ckpt-%d" % index["step"], "MANIFEST")
            if not os.path.exists(manifest):
                problems.append("final checkpoint has no MANIFEST")
            try:
                with open(os.path.join(self.job_dir, "eval", "scored")) as f:
                    scored = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                scored = -1
            if scored != index["step"]:
                problems.append("final checkpoint %d not scored (scored: %d)"
                                % (index["step"], scored))
        self.collapse_s = None
        self.resumed_from = None
        # (Not for the faults at the job's end: whether the others end
        # retryably or have finished depends on when the fault lands.)
        if self.allreduce and self.fault_time is not None and self.fault not in (
                "allreduce_evaluator_kill", "allreduce_chief_kill_final",
                "allreduce_worker_kill_after_done", "allreduce_replica_freeze_final",
                "allreduce_evaluator_kill_final"):
            # Every training replica ended retryably soon after the fault:
            # the ones not hit by it exited 128-255 themselves.
            latest = 0.0
            for name in ("chief:0", "worker:0", "worker:1"):
                t = self.tasks[name]
                after = [(when, code) for when, code in zip(t.exit_times, t.codes)
                         if when >= self.fault_time]
                if not after or not retryable(after[0][1]):
                    problems.append("%s did not end retryably after the fault (exits %s)"
                                    % (name, t.codes))
                    continue
                latest = max(latest, after[0][0] - self.fault_time)
            self.collapse_s = latest
            if latest > self.args.collapse_bound_s:
                problems.append("the job took %.1fs to end after the fault (bound %ds)"
                                % (latest, self.args.collapse_bound_s))
            chief_log = self.tasks["chief:0"].log()
            runs = chief_log.split("=== start ")
            if len(runs) >= 3:
                last = runs[-1]
                at = last.find(", from step ")
                self.resumed_from = int(last[at + 12:].split()[0]) if at >= 0 else 0
            else:
                problems.append("the chief was not started again")
        if metrics:
            # The schedule: every epoch of each replica's shard, no step
            # lost and none taken twice. Sync and all-reduce steps are the
            # job's (each replica's shard in step); async steps are every
            # replica's pushes, the three shards' steps together.
            per_replica = self.final_step()
            synchronous = self.allreduce or self.fault.endswith("_sync")
            schedule = per_replica if synchronous else 3 * per_replica
            if metrics.get("global_step") != schedule:
                problems.append("global step %s, not the schedule's %d"
                                % (metrics.get("global_step"), schedule))
        self.metrics = metrics
        self.problems = problems
        return not problems


    def failed_verdict(self, hung, problems):
        """A job that cannot run: every task ends with its code, soon."""
        expected = FAILS_FOR_GOOD[self.fault]
        if self.left_running:
            problems.append("still running %ds after the chief exited: %s" % (
                self.args.cleanup_grace_s, ", ".join(self.left_running)))
        if hung:
            problems.append("hung past %ds" % self.args.trial_timeout_s)
        last_exit = 0.0
        for t in self.tasks.values():
            last = t.codes[-1] if t.codes else None
            if last != expected:
                problems.append("%s last exit %s, not %d" % (t.name, last, expected))
            if t.exit_times:
                last_exit = max(last_exit, t.exit_times[-1])
        if last_exit > self.args.fail_bound_s:
            problems.append("the last task exited %.1fs into the trial (bound %ds)"
                            % (last_exit, self.args.fail_bound_s))
        if self.fault.startswith("allreduce_bad_"):
            # The failure is the run's end, where the job's other tasks read it.
            try:
                with open(os.path.join(self.job_dir, "run.json")) as f:
                    run = json.load(f)
            except (OSError, ValueError) as e:
                run = {}
                problems.append("run.json: %s" % e)
            if run and (run.get("exit_code") != expected
                        or BAD_RECORD_SAYS[self.fault] not in run.get("outcome", "")):
                problems.append("run.json records exit %s (%s), not %d for the bad record"
                                % (run.get("exit_code"), run.get("outcome"), expected))
        self.collapse_s = None
        self.resumed_from = None
        self.metrics = {}
        self.problems = problems
        return not problems


def main():
    # SIGTERM ends the run as Ctrl-C does, stopping the trial's tasks.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pstrain", required=True, help="the pstrain binary")
    p.add_argument("--pstrain_slow_disk", default="",
                   help="the PS's binary: pstrain on a slow disk (tests/slow_disk_main.cc; "
                        "default: --pstrain, no pause)")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--seed", type=int, default=1, help="seeds the faults and their moments")
    p.add_argument("--faults", default="",
                   help="comma-separated faults to take in turn (default: all, seeded order)")
    p.add_argument("--run_trials", default="",
                   help="comma-separated trial numbers to run of the --trials (default: all); "
                        "every trial's seed is drawn all the same, so a trial runs as it "
                        "would among the others")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--hidden", default="128,64")
    p.add_argument("--model_config", default="",
                   help="the model to train instead of --hidden's MLP (a config on the IDX data: "
                        "configs/fashion_mnist_mobile.pbtxt, with batch normalization, say)")
    p.add_argument("--step_delay_ms", type=int, default=4,
                   help="every replica sleeps this long before each step")
    p.add_argument("--checkpoint_delay_ms", type=int, default=200,
                   help="with --pstrain_slow_disk, each PS's shard write takes this much longer")
    p.add_argument("--ps_wait_s", type=int, default=60)
    p.add_argument("--allreduce_wait_s", type=int, default=3,
                   help="allreduce_* trials: --sync_wait_secs, how long a ring neighbour may "
                        "stay silent inside a step")
    p.add_argument("--collapse_bound_s", type=int, default=10,
                   help="allreduce_* trials: every replica ends within this of the fault")
    p.add_argument("--trial_timeout_s", type=int, default=240)
    p.add_argument("--cleanup_grace_s", type=int, default=20,
                   help="how long tasks may run on after the chief exited for good")
    p.add_argument("--fail_bound_s", type=int, default=10,
                   help="faults that fail the job for good: every task ends within this")
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist",
                   help="the Fashion-MNIST files (truncated_input truncates a copy)")
    p.add_argument("--out", default="", help="where trials write (default: a temporary dir)")
    p.add_argument("--keep", action="store_true", help="keep the logs of trials that survived")
    args = p.parse_args()
    args.pstrain = os.path.abspath(args.pstrain)
    if not os.access(args.pstrain, os.X_OK):
        sys.exit("--pstrain %s is not an executable file" % args.pstrain)
    if not args.out:
        args.out = tempfile.mkdtemp(prefix="pstrain-chaos-")
    faults = [f for f in args.faults.split(",") if f] or list(ALL_FAULTS)
    for f in faults:
        if f not in ALL_FAULTS:
            sys.exit("unknown fault %s; known: %s" % (f, ", ".join(ALL_FAULTS)))
    rng = random.Random(args.seed)
    if not args.faults:
        rng.shuffle(faults)
    run = {int(t) for t in args.run_trials.split(",") if t} or set(range(args.trials))
    survived, hangs, to_end, collapses = 0, 0, [], []
    for n in range(args.trials):
        fault = faults[n % len(faults)]
        seed = rng.randrange(1 << 30)
        if n not in run:
            continue
        trial = Trial(args, n, fault, seed)
        try:
            ok = trial.run()
        finally:
            trial.stop_everything()  # on an interrupt too: nothing is left behind
        survived += ok
        hangs += any("hung" in p for p in trial.problems)
        if trial.fault_time is not None:
            to_end.append(trial.elapsed - trial.fault_time)
        m = trial.metrics
        if trial.collapse_s is not None:
            collapses.append(trial.collapse_s)
        print("trial %d %-30s seed %-10d %s in %.1fs%s; restarts %d; global step %s; "
              "steps lost %s; test accuracy %s%s" % (
                  n, fault, seed, "survived" if ok else "FAILED", trial.elapsed,
                  "" if trial.fault_time is None else
                  " (fault at %.1fs)" % trial.fault_time,
                  sum(max(0, t.starts - 1) for t in trial.tasks.values()),
                  m.get("global_step"), m.get("global_steps_lost"),
                  "%.4f" % m["test_accuracy"] if "test_accuracy" in m else None,
                  "" if trial.collapse_s is None else
                  "; every replica ended %.1fs after the fault, resumed from step %s"
                  % (trial.collapse_s, trial.resumed_from)), flush=True)
        if not ok:
            print("  problems: " + "; ".join(trial.problems))
            print("  events: " + ", ".join("%.1fs %s" % e for e in trial.events))
            print("  logs: " + trial.out, flush=True)
        elif not args.keep:
            shutil.rmtree(trial.out, ignore_errors=True)
    print("%d trials: %d survived, %d failed, %d hung; fault to the job's end: median %.1fs, "
          "worst %.1fs" % (len(run), survived, len(run) - survived, hangs,
                           statistics.median(to_end) if to_end else 0,
                           max(to_end) if to_end else 0))
    if collapses:
        print("all-reduce replica faults: every replica ended after the fault in median "
              "%.1fs, worst %.1fs" % (statistics.median(collapses), max(collapses)))
    return 0 if survived == len(run) else 1


ALL_FAULTS = ["none", "ps_kill", "ps_kill_5x", "ps_kill_both", "ps_kill_in_checkpoint", "ps_kill_final",
              "ps_freeze", "ps_restored_then_chief_killed", "chief_kill", "chief_kill_step0",
              "chief_kill_after_done", "chief_kill_final", "worker_kill", "worker_kill_sync",
              "ps_kill_sync", "evaluator_kill_scoring", "whole_job", "allreduce_replica_kill",
              "allreduce_replica_freeze", "allreduce_evaluator_kill", "ps_restarted_after_end",
              "two_chiefs", "readonly_output_dir", "truncated_input", "bad_task_index",
              "allreduce_truncated_input", "allreduce_chief_kill_final",
              "allreduce_worker_kill_after_done", "allreduce_bad_record", "allreduce_bad_checksum",
              "allreduce_replica_freeze_final", "allreduce_evaluator_kill_final"]

# Faults that fail the job for good, and the code every task must end with.
FAILS_FOR_GOOD = {"readonly_output_dir": 2, "truncated_input": 2, "bad_task_index": 2,
                  "allreduce_truncated_input": 2, "allreduce_bad_record": 1,
                  "allreduce_bad_checksum": 1}
# What run.json's outcome says of the damaged record.
BAD_RECORD_SAYS = {"allreduce_bad_record": "outside the classes [0, 10)",
                   "allreduce_bad_checksum": "the checksum of the record's"}

if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The headline figures, each beside its peer and its target, in one sitting.

Builds the benchmarks (`bazel build -c opt`), then for each row runs
pstrain's command and its peer's in turns, ROUNDS rounds (3 by default),
and prints one Markdown table: the medians of both, the median of the
rounds' ratios, and the target. BENCHMARKS.md opens with that table.

    /usr/bin/python3 bench/headline.py [--rounds=3] [--seconds=2]
        [--pslite_bench=PATH] [--out=FILE] [--nobuild]

The peers: PyTorch (Debian's python3-torch, over oneDNN and OpenBLAS as
this machine has them) for training, PyTorch's gloo (torch.distributed,
backend "gloo") for the ring all-reduce, iperf3 for one TCP stream on
loopback, and ps-lite for the PS data path. The first three are Debian
packages (`deploy/install_deps.sh --bench` installs them); ps-lite is not
packaged: --pslite_bench names a program built outside this repository
against ps-lite (dmlc/ps-lite) that takes `--mode=push_pull|pipelined
--servers=M --workers=N --bytes=B --seconds=S --inflight=K`, runs its own
scheduler, servers and workers on loopback, applies SGD on the server and
prints one line `GB/s X` (each way for push_pull, the workers' sum one
way for pipelined). Without it the ps-lite rows say "not run".

Every command is printed before it runs, with the transport, connections
and threads pstrain's own benchmarks report they used, so each figure can
be checked against what it names. About 10 minutes with the defaults on
a 2-core machine.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG = []


def say(line):
    print(line, flush=True)
    LOG.append(line)


def run(cmd, env=None, timeout=300):
    """Runs cmd (a list); returns its stdout. Raises on a non-zero exit."""
    say("$ " + " ".join(cmd))
    merged = dict(os.environ, **(env or {}))
    p = subprocess.run(cmd, cwd=ROOT, env=merged, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (cmd[0], p.returncode, p.stdout[-3000:]))
    return p.stdout


def grab(pattern, text, what):
    m = re.search(pattern, text)
    if not m:
        raise RuntimeError("no %s in:\n%s" % (what, text[-3000:]))
    return m


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- pstrain's side

def bin_path(name):
    return os.path.join(ROOT, "bazel-bin", name)


def ps_push_pull(ps, clients, seconds):
    out = run([bin_path("bench/ps_bench"), "--scenario=push_pull", "--ps=%d" % ps,
               "--clients=%d" % clients, "--bytes=4194304", "--seconds=%g" % seconds,
               "--repeat=1", "--transport=tcp"])
    conns = re.findall(r"^push_pull ps tcp .* (\d+)\s*$", out, re.M)
    say("  ps_bench: TCP frames, %s connections held by the clients" % (conns[0] if conns else "?"))
    return float(grab(r"ps over tcp\s+\d+ calls/s = ([0-9.]+) GB/s", out, "push_pull figure").group(1))


def ps_pipelined(transport, seconds, certs=None):
    cmd = [bin_path("bench/ps_bench"), "--scenario=pipelined", "--transport=" + transport,
           "--bytes=4194304", "--seconds=%g" % seconds, "--repeat=1", "--clients=1"]
    if certs:
        cmd.append("--certs=" + certs)
    out = run(cmd)
    m = grab(r"pipelined over \S+, (\d+) in flight, 1 client: ([0-9.]+) GB/s one way(.*)", out,
             "pipelined figure")
    conns = re.findall(r"^pipelined x\d+ \S+ .* (\d+)\s*$", out, re.M)
    say("  ps_bench: %s frames, %s in flight, 1 client, %s connections%s" % (
        transport, m.group(1), conns[0] if conns else "?", m.group(3)))
    return float(m.group(2))


def ring(processes, nbytes, seconds):
    out = run([bin_path("bench/allreduce_bench"), "--processes=%d" % processes,
               "--bytes=%d" % nbytes, "--seconds=%g" % seconds, "--repeat=1",
               "--noshared_memory"])
    say("  allreduce_bench: " + out.splitlines()[0][:200])
    return float(grab(r"median of \d+: [0-9.]+ ms, algbw [0-9.]+ GB/s, busbw ([0-9.]+) GB/s", out,
                      "busbw").group(1))


def train_local(steps):
    out_dir = tempfile.mkdtemp(prefix="pstrain-headline-")
    try:
        out = run([bin_path("pstrain"), "train", "--local",
                   "--model_config=configs/fashion_mnist_mlp.pbtxt", "--max_steps=%d" % steps,
                   "--blas_threads=1", "--output_dir=" + out_dir],
                  env={"OPENBLAS_NUM_THREADS": "1"})
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    say("  train --local: 1 BLAS thread, batch 32")
    return float(grab(r"training throughput: ([0-9.]+) examples/s", out, "throughput").group(1))


# ---------------------------------------------------------------- the peers

GLOO_SCRIPT = r'''
import os, sys, time, torch, torch.distributed as dist
rank, n, nbytes, seconds, store = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=n)
x = torch.ones(nbytes // 4)
for _ in range(3): dist.all_reduce(x)
times = []
start = time.perf_counter()
while True:
    dist.barrier(); t = time.perf_counter(); dist.all_reduce(x); times.append(time.perf_counter() - t)
    done = torch.tensor([time.perf_counter() - start >= seconds], dtype=torch.int32)
    dist.all_reduce(done, op=dist.ReduceOp.MIN)
    if done.item(): break
if rank == 0:
    times.sort(); t = times[len(times) // 2]
    print("gloo %d processes, %d bytes: median %.3f ms of %d, busbw %.3f GB/s, torch %s" % (
        n, nbytes, t * 1e3, len(times), nbytes / t / 1e9 * 2 * (n - 1) / n, torch.__version__))
dist.destroy_process_group()
'''

TORCH_MLP = r'''
import gzip, sys, time, numpy as np, torch
steps, data = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(1); torch.manual_seed(1)
with gzip.open(data + "/train-images-idx3-ubyte.gz") as f: x = np.frombuffer(f.read(), np.uint8, offset=16)
with gzip.open(data + "/train-labels-idx1-ubyte.gz") as f: y = np.frombuffer(f.read(), np.uint8, offset=8)
x = torch.tensor(x.reshape(-1, 784), dtype=torch.float32) / 255.0; y = torch.tensor(y, dtype=torch.long)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
loss_fn = torch.nn.CrossEntropyLoss()
order = torch.randperm(x.shape[0])
def step(i):
    idx = order[(i * 32) % (x.shape[0] - 32):][:32]
    opt.zero_grad(set_to_none=True); loss = loss_fn(model(x[idx]), y[idx]); loss.backward(); opt.step()
for i in range(50): step(i)
start = time.perf_counter()
for i in range(steps): step(i)
print("torch %s: %.0f examples/s, 1 thread, batch 32" % (torch.__version__, steps * 32 / (time.perf_counter() - start)))
'''


def gloo(processes, nbytes, seconds):
    store = tempfile.mktemp(prefix="pstrain-gloo-")
    say("$ %d x python3 -c <torch.distributed all_reduce, backend gloo> %d bytes" % (processes, nbytes))
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", GLOO_SCRIPT, str(r), str(processes),
                               str(nbytes), str(seconds), store],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(processes)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    if os.path.exists(store):
        os.remove(store)
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError("gloo script failed:\n" + "\n".join(outs)[-3000:])
    m = grab(r"busbw ([0-9.]+) GB/s, torch (\S+)", outs[0], "gloo busbw")
    say("  gloo: one TCP pair per peer (PyTorch %s), 1 thread per process" % m.group(2))
    return float(m.group(1))


def torch_mlp(steps):
    say("$ python3 -c <the guide MLP in PyTorch, Adam, batch 32> %d steps" % steps)
    out = run(["/usr/bin/python3", "-c", TORCH_MLP, str(steps),
               "/usr/share/datasets/fashion-mnist"], env={"OMP_NUM_THREADS": "1"})
    return float(grab(r"([0-9.]+) examples/s", out, "torch throughput").group(1))


def iperf3(seconds):
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    why = "never answered"
    try:
        # Until the server listens and a test completes (a probe connection
        # would be a test of its own).
        for _ in range(50):
            p = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "%g" % seconds,
                                "-J"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=60 + seconds)
            try:
                result = json.loads(p.stdout[p.stdout.index("{"):])
                gbps = result["end"]["sum_received"]["bits_per_second"] / 8e9
                say("$ iperf3 -c 127.0.0.1 -p %d -t %g -J" % (port, seconds))
                say("  iperf3: one TCP stream on 127.0.0.1")
                return gbps
            except (ValueError, KeyError) as e:
                why = "said: %s" % (p.stdout.strip()[-300:] or e)
                time.sleep(0.2)
    finally:
        server.terminate()
        server.wait(timeout=30)
    raise RuntimeError("iperf3 on port %d %s" % (port, why))


def pslite(path, mode, servers, workers, seconds):
    out = run([path, "--mode=" + mode, "--servers=%d" % servers, "--workers=%d" % workers,
               "--bytes=4194304", "--seconds=%g" % seconds, "--inflight=4"])
    return float(grab(r"GB/s ([0-9.]+)", out, "ps-lite figure").group(1))


# ---------------------------------------------------------------- the table

def figure(x):
    return "{:,.0f}".format(x) if x >= 1000 else "%.3f" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--pslite_bench", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--nobuild", action="store_true")
    a = ap.parse_args()
    if not a.nobuild:
        run(["bazel", "build", "-c", "opt", "//:pstrain", "//bench:ps_bench",
             "//bench:allreduce_bench"], timeout=3600)
    certs = tempfile.mkdtemp(prefix="pstrain-headline-certs-")
    run(["deploy/make_certs.sh", certs])
    s = a.seconds
    have_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                                capture_output=True).returncode == 0
    have_iperf = shutil.which("iperf3") is not None
    pl = a.pslite_bench
    # (figure, unit, ours, peer name, peer or None, target ratio or text)
    rows = [
        ("PS push-then-pull, 4 MiB, 1 PS x 1 client", "GB/s each way",
         lambda: ps_push_pull(1, 1, s), "ps-lite",
         (lambda: pslite(pl, "push_pull", 1, 1, s)) if pl else None, 1.3),
        ("PS push-then-pull, 4 MiB, 2 PS x 2 clients", "GB/s each way",
         lambda: ps_push_pull(2, 2, s), "ps-lite",
         (lambda: pslite(pl, "push_pull", 2, 2, s)) if pl else None, 1.3),
        ("Pipelined pushes, 4 MiB, 4 in flight, 1 client", "GB/s one way",
         lambda: ps_pipelined("tcp", s), "ps-lite",
         (lambda: pslite(pl, "pipelined", 1, 1, s)) if pl else None, 1.3),
        ("The same pushes over TCP frames, against one TCP stream", "GB/s one way",
         lambda: ps_pipelined("tcp", s), "iperf3",
         (lambda: iperf3(s)) if have_iperf else None, "none set (the kernel's ceiling)"),
        ("The same pushes inside TLS, against plain TCP frames", "GB/s one way",
         lambda: ps_pipelined("tls", s, certs), "pstrain over TCP",
         lambda: ps_pipelined("tcp", s), 0.85),
        ("Ring all-reduce, 64 MiB, 3 processes, TCP links", "bus GB/s",
         lambda: ring(3, 64 << 20, s), "gloo (PyTorch)",
         (lambda: gloo(3, 64 << 20, s)) if have_torch else None, 1.5),
        ("Ring all-reduce, 4 MiB, 2 processes, TCP links", "bus GB/s",
         lambda: ring(2, 4 << 20, s), "gloo (PyTorch)",
         (lambda: gloo(2, 4 << 20, s)) if have_torch else None, 1.5),
        ("train --local, the guide MLP, 1 thread, batch 32", "examples/s",
         lambda: train_local(3000), "PyTorch",
         (lambda: torch_mlp(3000)) if have_torch else None, "none set"),
    ]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    t0 = time.time()
    table = []
    for name, unit, ours, peer_name, peer, target in rows:
        mine, theirs, ratios = [], [], []
        for r in range(a.rounds):
            say("== %s: round %d of %d" % (name, r + 1, a.rounds))
            mine.append(ours())
            say("  -> pstrain %.4g %s" % (mine[-1], unit))
            if peer is not None:
                theirs.append(peer())
                ratios.append(mine[-1] / theirs[-1])
                say("  -> %s %.4g %s: %.2fx" % (peer_name, theirs[-1], unit, ratios[-1]))
        med = statistics.median(mine)
        if theirs:
            ratio = statistics.median(ratios)
            peer_text = figure(statistics.median(theirs))
            ratio_text = "%.2fx" % ratio
        else:
            ratio = None
            peer_text, ratio_text = "not run", ""
        if isinstance(target, float):
            met = "" if ratio is None else (": met" if ratio >= target else ": not met")
            target_text = ">= %.2gx%s" % (target, met)
        else:
            target_text = target
        table.append("| %s | %s | %s | %s %s | %s | %s |" % (
            name, unit, figure(med), peer_name, peer_text, ratio_text, target_text))
    shutil.rmtree(certs, ignore_errors=True)
    lines = [
        "Headline figures, %s, %d rounds each (pstrain and its peer in turns; medians, and "
        "the median of the rounds' ratios), %.0f s in all: `/usr/bin/python3 bench/headline.py`"
        % (started, a.rounds, time.time() - t0),
        "",
        "| figure | unit | pstrain | peer | pstrain / peer | target |",
        "| --- | --- | --- | --- | --- | --- |",
    ] + table
    print()
    print("\n".join(lines))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n\n## Log\n\n" + "\n".join(LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

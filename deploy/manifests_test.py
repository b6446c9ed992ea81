#!/usr/bin/env python3
"""What the deployment files ask of a cluster, read as YAML: the TFJob and
the compose file list the evaluator in every TF_CONFIG (the operator does,
and `pstrain describe` accepts what it writes), name a pullable, versioned
image with a pull policy that uses a loaded one, give every replica the
same arguments, resources and a non-root, read-only security context, keep
a finished job's evaluator alive (cleanPodPolicy), and bound the job; the
Dockerfile is multi-stage on a pinned base and runs as a non-root user.
"""
import json
import os
import re
import subprocess
import unittest

import yaml

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), "pstrain")


def load(rel):
    with open(os.path.join(RUNFILES, rel)) as f:
        return f.read()


def version():
    return re.search(r'kPstrainVersion\[\] = "([^"]+)"', load("base/build_info.h")).group(1)


def check_image(test, image):
    """registry/name:tag, the tag the binary's version."""
    name, _, tag = image.rpartition(":")
    test.assertTrue(name and "/" in name, image)
    registry = name.split("/")[0]
    test.assertTrue("." in registry or ":" in registry or registry == "localhost",
                    "%s names no registry, so engines look in docker.io/library" % image)
    test.assertEqual(tag, version(), image)


def describe(tf_config):
    out = subprocess.run([os.path.join(RUNFILES, "pstrain"), "describe", "--json"],
                         env=dict(os.environ, TF_CONFIG=tf_config), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    return out.returncode, out.stdout + out.stderr


def check_data_volume(test, pod, container):
    """The input: the claim of data-pvc.yaml read-only at /data/data, which
    --data_dir names; the output: the claim of output-pvc.yaml."""
    claims = {yaml.safe_load(load("deploy/k8s/%s-pvc.yaml" % what))["metadata"]["name"]
              for what in ["data", "output"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    data = mounts["/data/data"]
    test.assertTrue(data["readOnly"])
    test.assertEqual(volumes[data["name"]]["persistentVolumeClaim"]["claimName"], "pstrain-data")
    output = volumes[mounts["/data/output"]["name"]]["persistentVolumeClaim"]["claimName"]
    test.assertEqual(claims, {"pstrain-data", output})
    test.assertIn("--data_dir=/data/data", container["args"])


def check_compose_service(test, name, s):
    """Host directories for the input (read-only, named by --data_dir) and
    the output; restarts by exit code through the entrypoint, none by the
    engine."""
    test.assertEqual(s["restart"], "no", name)
    entrypoint = s["entrypoint"]
    test.assertEqual(entrypoint[:2], ["/usr/local/bin/pstrain", "supervise"], name)
    test.assertRegex(entrypoint[2], r"^--restarts=[1-9][0-9]*$", name)
    test.assertEqual(entrypoint[3:], ["--"], name)
    mounts = {v.rsplit("}", 1)[-1].split(":")[1]: v for v in s["volumes"]}
    test.assertRegex(mounts["/data/data"], r"^\$\{PSTRAIN_DATA:-[^}]+\}:/data/data:ro$", name)
    test.assertRegex(mounts["/data/output"], r"^\$\{PSTRAIN_OUTPUT:-[^}]+\}:/data/output$", name)
    test.assertIn("--data_dir=/data/data", s["command"], name)


def run_entrypoint(entrypoint, args, tf_config):
    """The compose file's entrypoint with this build's binary in place of
    the image's path: its exit code and what it logged."""
    argv = [os.path.join(RUNFILES, "pstrain")] + entrypoint[1:] + args
    out = subprocess.run(argv, env=dict(os.environ, TF_CONFIG=tf_config), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120)
    return out.returncode, out.stdout


class TfJobTest(unittest.TestCase):
    def setUp(self):
        self.job = yaml.safe_load(load("deploy/k8s/tfjob.yaml"))
        self.replicas = self.job["spec"]["tfReplicaSpecs"]

    def containers(self):
        for kind, spec in self.replicas.items():
            pod = spec["template"]["spec"]
            for c in pod["containers"]:
                yield kind, pod, c

    def test_run_policy_keeps_the_evaluator_and_bounds_the_job(self):
        run = self.job["spec"]["runPolicy"]
        self.assertEqual(run["cleanPodPolicy"], "None")
        self.assertGreater(run["activeDeadlineSeconds"], 0)
        self.assertEqual(sorted(self.replicas), ["Chief", "Evaluator", "PS", "Worker"])
        for kind, spec in self.replicas.items():
            self.assertEqual(spec["restartPolicy"], "ExitCode", kind)

    def test_every_replica_pulls_a_versioned_image_and_shares_one_argument_list(self):
        args = None
        for kind, _, c in self.containers():
            self.assertEqual(c["name"], "tensorflow", kind)
            check_image(self, c["image"])
            self.assertEqual(c["imagePullPolicy"], "IfNotPresent", kind)
            args = args or c["args"]
            self.assertEqual(c["args"], args, kind)
        for flag in ["--tls_cert=/etc/pstrain/cert.pem", "--tls_key=/etc/pstrain/key.pem",
                     "--tls_ca=/etc/pstrain/ca.pem", "--token_file=/etc/pstrain/token",
                     "--bind=0.0.0.0:2222"]:
            self.assertIn(flag, args)
        self.assertTrue([a for a in args if a.startswith("--eval_wait_secs=")], args)

    def test_every_replica_has_resources_and_runs_non_root_read_only(self):
        units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}

        def quantity(q):
            q = str(q)
            for suffix, scale in units.items():
                if q.endswith(suffix):
                    return float(q[:-2]) * scale
            return float(q[:-1]) / 1000 if q.endswith("m") else float(q)

        for kind, pod, c in self.containers():
            res = c["resources"]
            for what in ["cpu", "memory"]:
                self.assertLessEqual(quantity(res["requests"][what]),
                                     quantity(res["limits"][what]), (kind, what))
            self.assertTrue(pod["securityContext"]["runAsNonRoot"], kind)
            self.assertNotEqual(pod["securityContext"]["runAsUser"], 0, kind)
            sc = c["securityContext"]
            self.assertTrue(sc["readOnlyRootFilesystem"], kind)
            self.assertFalse(sc["allowPrivilegeEscalation"], kind)
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            self.assertIn("/data/output", mounts)
            self.assertTrue(mounts["/etc/pstrain"]["readOnly"], kind)
            check_data_volume(self, pod, c)
            secret = [v for v in pod["volumes"] if "secret" in v][0]["secret"]
            self.assertEqual(secret["secretName"], "pstrain-tls")
            self.assertEqual(secret["defaultMode"], 0o400, kind)
        ps = self.replicas["PS"]["template"]["spec"]["containers"][0]["resources"]
        # The PS holds 1 MB of variables: a fraction of a worker's memory.
        self.assertLessEqual(quantity(ps["limits"]["memory"]), 512 * 2**20)

    def test_the_tf_configs_the_operator_writes_list_the_evaluator_and_parse(self):
        name = self.job["metadata"]["name"]
        cluster = {}
        for kind, spec in self.replicas.items():
            cluster[kind.lower()] = ["%s-%s-%d.default.svc:2222" % (name, kind.lower(), i)
                                     for i in range(spec["replicas"])]
        self.assertIn("evaluator", cluster)
        for kind, hosts in cluster.items():
            for i in range(len(hosts)):
                tf_config = json.dumps({"cluster": cluster, "task": {"type": kind, "index": i},
                                        "environment": "cloud"})
                code, out = describe(tf_config)
                self.assertEqual(code, 0, out)
                described = json.loads(out)
                self.assertEqual([t["address"] for t in described["cluster"]
                                  if t["type"] == "evaluator"], cluster["evaluator"])
                self.assertEqual(described["task"]["type"], kind)


class ComposeTest(unittest.TestCase):
    def setUp(self):
        self.compose = yaml.safe_load(load("deploy/docker-compose.yml"))
        self.services = self.compose["services"]

    def test_every_service_lists_the_evaluator_and_shares_image_args_and_restarts(self):
        self.assertEqual(sorted(self.services),
                         ["chief", "evaluator", "ps0", "ps1", "worker0", "worker1"])
        command = self.services["chief"]["command"]
        for name, s in self.services.items():
            check_image(self, s["image"])
            self.assertEqual(s["command"], command, name)
            check_compose_service(self, name, s)
            self.assertNotRegex(s["user"], r"^(0|root)\b", name)
            self.assertEqual(s["build"]["dockerfile"], "deploy/Dockerfile")
            cfg = json.loads(s["environment"]["TF_CONFIG"])
            self.assertEqual(cfg["cluster"]["evaluator"], ["evaluator:2222"], name)
            code, out = describe(s["environment"]["TF_CONFIG"])
            self.assertEqual(code, 0, out)
        for flag in ["--tls_cert=", "--tls_key=", "--tls_ca=", "--token_file="]:
            self.assertTrue([a for a in command if a.startswith(flag)], flag)

    def test_the_entrypoint_restarts_only_retryable_exits(self):
        entrypoint = self.services["worker0"]["entrypoint"]
        restarts = int(entrypoint[2].split("=")[1])
        # Ports 7-9 on loopback: nothing listens there.
        tf_config = json.dumps({"cluster": {"chief": ["127.0.0.1:7"], "ps": ["127.0.0.1:8"],
                                            "worker": ["127.0.0.1:9"]},
                                "task": {"type": "worker", "index": 0}})
        # A misspelt flag: permanent (2), the task run once.
        code, out = run_entrypoint(entrypoint, ["--epoch=2"], tf_config)
        self.assertEqual(code, 2, out)
        self.assertIn("unknown flag --epoch (did you mean --epochs?)", out)
        self.assertEqual(out.count("unknown flag --epoch"), 1, out)
        self.assertIn("exit 2 is permanent (bad configuration or data): not restarted", out)
        # A worker whose chief is not there: retryable (138), restarted in
        # place as many times as the entrypoint allows, then 138.
        code, out = run_entrypoint(entrypoint, ["--ps_wait_s=1", "--output_dir=" +
                                                os.environ.get("TEST_TMPDIR", "/tmp")], tf_config)
        self.assertEqual(code, 138, out)
        for n in range(1, restarts + 1):
            self.assertIn("exit 138 (retryable): restart %d of %d in " % (n, restarts), out)
        self.assertIn("exit 138 (retryable), and the %d restarts allowed are used up" % restarts,
                      out)
        self.assertEqual(out.count("worker:0: failed:"), restarts + 1, out)


class AllReduceTest(unittest.TestCase):
    """The layout without PS (chief + 2 workers): only Chief and Worker
    replicas, one argument list with the job's TLS and token (every link of
    the ring inside TLS), and every TF_CONFIG described as the all-reduce
    mode."""

    def check_args(self, args):
        for flag in ("--tls_cert=/etc/pstrain/cert.pem", "--tls_key=/etc/pstrain/key.pem",
                     "--tls_ca=/etc/pstrain/ca.pem", "--tls_server_name=pstrain",
                     "--token_file=/etc/pstrain/token"):
            self.assertIn(flag, args)
        self.assertTrue([a for a in args if a.startswith("--ps_wait_s=")], args)

    def check_described(self, tf_config):
        code, out = describe(tf_config)
        self.assertEqual(code, 0, out)
        self.assertEqual(json.loads(out)["mode"], "allreduce", out)

    def test_tfjob_has_only_a_chief_and_workers(self):
        job = yaml.safe_load(load("deploy/k8s/tfjob-allreduce.yaml"))
        replicas = job["spec"]["tfReplicaSpecs"]
        self.assertEqual(sorted(replicas), ["Chief", "Worker"])
        self.assertEqual(replicas["Worker"]["replicas"], 2)
        name = job["metadata"]["name"]
        cluster = {kind.lower(): ["%s-%s-%d.default.svc:2222" % (name, kind.lower(), i)
                                  for i in range(spec["replicas"])]
                   for kind, spec in replicas.items()}
        args = None
        for kind, spec in replicas.items():
            self.assertEqual(spec["restartPolicy"], "ExitCode", kind)
            pod = spec["template"]["spec"]
            c = pod["containers"][0]
            self.assertEqual(c["name"], "tensorflow", kind)
            check_image(self, c["image"])
            args = args or c["args"]
            self.assertEqual(c["args"], args, kind)
            self.assertTrue(pod["securityContext"]["runAsNonRoot"], kind)
            self.assertTrue(c["securityContext"]["readOnlyRootFilesystem"], kind)
            secret = [v for v in pod["volumes"] if "secret" in v][0]["secret"]
            self.assertEqual(secret["secretName"], "pstrain-tls")
            check_data_volume(self, pod, c)
            for i in range(spec["replicas"]):
                self.check_described(json.dumps({"cluster": cluster,
                                                 "task": {"type": kind.lower(), "index": i},
                                                 "environment": "cloud"}))
        self.check_args(args)
        self.assertIn("--bind=0.0.0.0:2222", args)

    def test_compose_runs_a_chief_and_two_workers(self):
        services = yaml.safe_load(load("deploy/docker-compose.allreduce.yml"))["services"]
        self.assertEqual(sorted(services), ["chief", "worker0", "worker1"])
        command = services["chief"]["command"]
        for name, s in services.items():
            check_image(self, s["image"])
            self.assertEqual(s["command"], command, name)
            check_compose_service(self, name, s)
            self.assertNotRegex(s["user"], r"^(0|root)\b", name)
            cfg = json.loads(s["environment"]["TF_CONFIG"])
            self.assertNotIn("ps", cfg["cluster"], name)
            self.check_described(s["environment"]["TF_CONFIG"])
        self.check_args(command)


class DockerfileTest(unittest.TestCase):
    def test_two_stages_on_a_pinned_base_dependencies_first_non_root(self):
        text = load("deploy/Dockerfile")
        lines = [l.strip() for l in text.splitlines() if l.strip() and not l.startswith("#")]
        base = [l for l in lines if l.startswith("ARG BASE=")][0].split("=", 1)[1]
        self.assertRegex(base, r"^docker\.io/library/debian:12\.[0-9]+-slim$")
        froms = [l for l in lines if l.startswith("FROM ")]
        self.assertEqual(len(froms), 2, froms)
        deps = lines.index("COPY deploy/install_deps.sh deploy/install_deps.sh")
        self.assertLess(deps, lines.index("COPY . ."))
        final = lines[lines.index(froms[1]):]
        self.assertIn("COPY --from=build /out/ /", final)
        user = [l for l in final if l.startswith("USER ")]
        self.assertTrue(user and not user[-1].split()[1].startswith(("0", "root")), user)
        self.assertIn('ENTRYPOINT ["/usr/local/bin/pstrain"]', final)


if __name__ == "__main__":
    unittest.main()

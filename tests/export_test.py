#!/usr/bin/python3
"""A model taken away: a job trained on a real cluster (`pstrain launch`),
its final checkpoint exported as NumPy's .npz (`pstrain export`), and the
test set scored from that file by NumPy alone (the MLP's two layers, ReLU,
softmax), which must give the probabilities `pstrain predict` writes for
the same checkpoint, to 1e-5.
"""
import gzip
import os
import subprocess
import tempfile
import unittest

import numpy as np

PSTRAIN = os.path.join(os.environ.get("TEST_SRCDIR", "."), "pstrain", "pstrain")
DATA = "/usr/share/datasets/fashion-mnist"


def run(*args):
    done = subprocess.run([PSTRAIN, *args], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"pstrain {' '.join(args)} exited {done.returncode}:\n"
                             f"{done.stdout}\n{done.stderr}")
    return done.stdout


def test_images():
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    count = int.from_bytes(raw[4:8], "big")
    return np.frombuffer(raw[16:], dtype=np.uint8).reshape(count, 784).astype(np.float32) / 255


class ExportTest(unittest.TestCase):
    def test_numpy_scores_the_export_as_predict_does(self):
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        job = os.path.join(out, "job")
        run("launch", "--ps=2", "--workers=1", "--max_steps=150", "--hidden=32",
            "--output_dir=" + job)
        said = run("export", "--checkpoint", job, "--hidden=32",
                   "--out", os.path.join(out, "model.npz"))
        self.assertRegex(said, r"wrote 4 arrays \(25450 floats\) of the checkpoint at step \d+")
        model = np.load(os.path.join(out, "model.npz"))
        self.assertEqual(sorted(model.files),
                         ["dense_0/bias", "dense_0/kernel", "dense_1/bias", "dense_1/kernel"])
        self.assertEqual(model["dense_0/kernel"].shape, (784, 32))
        self.assertEqual(model["dense_1/bias"].shape, (10,))
        self.assertEqual(model["dense_0/kernel"].dtype, np.float32)

        x = test_images()
        h = np.maximum(x @ model["dense_0/kernel"] + model["dense_0/bias"], 0)
        z = h @ model["dense_1/kernel"] + model["dense_1/bias"]
        z = np.exp(z - z.max(axis=1, keepdims=True))
        ours = z / z.sum(axis=1, keepdims=True)

        run("predict", "--checkpoint", job, "--hidden=32", "--out",
            os.path.join(out, "predictions.csv"))
        theirs = np.loadtxt(os.path.join(out, "predictions.csv"), delimiter=",", skiprows=1)
        self.assertEqual(theirs.shape, (10000, 13))
        np.testing.assert_allclose(theirs[:, 3:], ours, atol=1e-5)
        np.testing.assert_array_equal(theirs[:, 2], ours.argmax(axis=1))

    def test_another_model_or_format_is_refused(self):
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        done = subprocess.run([PSTRAIN, "export", "--checkpoint", out, "--format=onnx",
                               "--out", os.path.join(out, "m.onnx")],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertIn("--format=onnx: npz is the format written", done.stderr)


if __name__ == "__main__":
    unittest.main()

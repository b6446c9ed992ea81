#!/usr/bin/python3
"""A model taken away: a job trained on a real cluster (`pstrain launch`),
its final checkpoint exported as NumPy's .npz (`pstrain export`), and the
test set scored from that file by NumPy alone (the MLP's two layers, ReLU,
softmax), which must give the probabilities `pstrain predict` writes for
the same checkpoint, to 1e-5. The same for ONNX: the file passes the
checker of Debian's python3-onnx (shape inference included), and its graph,
run node by node by a NumPy interpreter of the operators written (MatMul,
Add, Relu, Conv, MaxPool, Transpose, Reshape, Softmax, ...), gives predict's
probabilities to 1e-5, for the MLP of a cluster and a CNN of train --local.
"""
import gzip
import os
import subprocess
import tempfile
import unittest

import numpy as np
import onnx
from onnx import numpy_helper

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


def same_upper_pads(size, kernel, stride):
    """ONNX's SAME_UPPER (Keras's "same"): padding before, after one axis."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def windows(x, kernel, strides, auto_pad, fill):
    """x [N, C, H, W] padded as auto_pad says, and each kernel offset's view
    [N, C, OH, OW] of it."""
    (kh, kw), (sh, sw) = kernel, strides
    _, _, h, w = x.shape
    if auto_pad == "SAME_UPPER":
        (t, b), (l, r) = same_upper_pads(h, kh, sh), same_upper_pads(w, kw, sw)
        x = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=fill)
    else:
        assert auto_pad in ("VALID", "NOTSET"), auto_pad
    oh = (x.shape[2] - kh) // sh + 1
    ow = (x.shape[3] - kw) // sw + 1
    for i in range(kh):
        for j in range(kw):
            yield i, j, x[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]


def run_onnx(model, x):
    """Runs `model`'s graph on x with NumPy, node by node; returns its outputs."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values[model.graph.input[0].name] = x
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        ins = [values[name] for name in node.input]
        op = node.op_type
        if op == "MatMul":
            out = ins[0] @ ins[1]
        elif op == "Add":
            out = ins[0] + ins[1]
        elif op == "Relu":
            out = np.maximum(ins[0], 0)
        elif op == "Reshape":
            shape = [x.shape[i] if d == 0 else d for i, d in enumerate(ins[1])]
            out = ins[0].reshape(shape)
        elif op == "Transpose":
            out = ins[0].transpose(attrs["perm"])
        elif op == "Conv":
            w = ins[1]
            out = 0
            for i, j, view in windows(ins[0], attrs["kernel_shape"], attrs["strides"],
                                      attrs["auto_pad"].decode(), 0.0):
                out = out + np.einsum("nchw,oc->nohw", view, w[:, :, i, j])
            out = out + ins[2].reshape(1, -1, 1, 1)
        elif op == "MaxPool":
            out = None
            for _, _, view in windows(ins[0], attrs["kernel_shape"], attrs["strides"],
                                      attrs["auto_pad"].decode(), -np.inf):
                out = view if out is None else np.maximum(out, view)
        elif op == "ReduceMean":
            out = ins[0].mean(axis=tuple(attrs["axes"]), keepdims=bool(attrs["keepdims"]))
        elif op == "Softmax":
            z = np.exp(ins[0] - ins[0].max(axis=attrs["axis"], keepdims=True))
            out = z / z.sum(axis=attrs["axis"], keepdims=True)
        elif op == "Sigmoid":
            out = 1 / (1 + np.exp(-ins[0]))
        else:
            raise AssertionError(f"operator {op} is not interpreted here")
        values[node.output[0]] = out.astype(np.float32)
    return [values[o.name] for o in model.graph.output]


class ExportTest(unittest.TestCase):
    def check_onnx(self, path, job, flags, examples):
        """The ONNX file passes the checker and scores `examples` of the test
        set as predict does."""
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        self.assertEqual([o.name for o in model.graph.output], ["logits", "probabilities"])
        x = test_images()[:examples]
        logits, probabilities = run_onnx(model, x)
        run("predict", "--checkpoint", job, *flags, "--out", path + ".csv")
        theirs = np.loadtxt(path + ".csv", delimiter=",", skiprows=1)[:examples]
        np.testing.assert_allclose(theirs[:, 3:], probabilities, atol=1e-5)
        np.testing.assert_array_equal(theirs[:, 2], logits.argmax(axis=1))

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

        said = run("export", "--checkpoint", job, "--hidden=32",
                   "--out", os.path.join(out, "model.onnx"))
        self.assertRegex(said, r"wrote the model of the checkpoint at step \d+ to .*model.onnx "
                               r"\(ONNX, opset 13")
        self.check_onnx(os.path.join(out, "model.onnx"), job, ["--hidden=32"], 10000)

    def test_a_cnn_trained_locally_exports_as_onnx(self):
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        job = os.path.join(out, "job")
        config = "--model_config=" + os.path.join(os.path.dirname(PSTRAIN), "configs",
                                                  "fashion_mnist_cnn.pbtxt")
        run("train", "--local", config, "--max_steps=60", "--output_dir=" + job)
        run("export", "--checkpoint", job, config, "--format=onnx",
            "--out", os.path.join(out, "cnn.onnx"))
        self.check_onnx(os.path.join(out, "cnn.onnx"), job, [config], 500)

    def test_another_model_or_format_is_refused(self):
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        done = subprocess.run([PSTRAIN, "export", "--checkpoint", out, "--format=pb",
                               "--out", os.path.join(out, "m.pb")],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertIn("--format=pb: the formats written are npz (NumPy's .npz) and onnx",
                      done.stderr)


if __name__ == "__main__":
    unittest.main()

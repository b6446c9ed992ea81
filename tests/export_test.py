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
import math
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


def run_onnx(model, feeds):
    """Runs `model`'s graph on `feeds` (input name -> array) with NumPy, node
    by node; returns its outputs."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values.update(feeds)
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
            shape = [ins[0].shape[i] if d == 0 else d for i, d in enumerate(ins[1])]
            out = ins[0].reshape(shape)
        elif op == "Transpose":
            out = ins[0].transpose(attrs["perm"])
        elif op == "Conv":
            w = ins[1]
            groups = attrs.get("group", 1)
            per_in, per_out = ins[0].shape[1] // groups, w.shape[0] // groups
            out = 0
            for i, j, view in windows(ins[0], attrs["kernel_shape"], attrs["strides"],
                                      attrs["auto_pad"].decode(), 0.0):
                out = out + np.concatenate([
                    np.einsum("nchw,oc->nohw", view[:, g * per_in:(g + 1) * per_in],
                              w[g * per_out:(g + 1) * per_out, :, i, j])
                    for g in range(groups)], axis=1)
            if len(ins) > 2:
                out = out + ins[2].reshape(1, -1, 1, 1)
        elif op == "MaxPool":
            out = None
            for _, _, view in windows(ins[0], attrs["kernel_shape"], attrs["strides"],
                                      attrs["auto_pad"].decode(), -np.inf):
                out = view if out is None else np.maximum(out, view)
        elif op == "ReduceMean":
            out = ins[0].mean(axis=tuple(attrs["axes"]), keepdims=bool(attrs["keepdims"]))
        elif op == "ReduceMax":
            out = ins[0].max(axis=tuple(attrs["axes"]), keepdims=bool(attrs["keepdims"]))
        elif op == "AveragePool":
            assert attrs.get("count_include_pad", 0) == 0, attrs
            ones = np.ones_like(ins[0])
            total = count = 0
            for (_, _, view), (_, _, inside) in zip(
                    windows(ins[0], attrs["kernel_shape"], attrs["strides"],
                            attrs["auto_pad"].decode(), 0.0),
                    windows(ones, attrs["kernel_shape"], attrs["strides"],
                            attrs["auto_pad"].decode(), 0.0)):
                total, count = total + view, count + inside
            out = total / count
        elif op == "Pad":
            pads = ins[1]
            half = len(pads) // 2
            out = np.pad(ins[0], list(zip(pads[:half], pads[half:])))
        elif op == "Clip":
            out = np.clip(ins[0], ins[1], ins[2])
        elif op == "Tanh":
            out = np.tanh(ins[0])
        elif op == "Elu":
            out = np.where(ins[0] > 0, ins[0], np.expm1(ins[0]))
        elif op == "Selu":
            out = 1.0507009873554805 * np.where(ins[0] > 0, ins[0],
                                                1.6732632423543772 * np.expm1(ins[0]))
        elif op == "Erf":
            out = np.vectorize(math.erf)(ins[0].astype(np.float64))
        elif op == "Softmax":
            z = np.exp(ins[0] - ins[0].max(axis=attrs["axis"], keepdims=True))
            out = z / z.sum(axis=attrs["axis"], keepdims=True)
        elif op == "Sigmoid":
            out = 1 / (1 + np.exp(-ins[0]))
        elif op == "Mul":
            out = ins[0] * ins[1]
        elif op == "Div":
            out = ins[0] / ins[1]
        elif op == "Min":
            out = np.minimum(ins[0], ins[1])
        elif op == "Max":
            out = np.maximum(ins[0], ins[1])
        elif op == "Floor":
            out = np.floor(ins[0])
        elif op == "Greater":
            out = ins[0] > ins[1]
        elif op == "Equal":
            out = ins[0] == ins[1]
        elif op == "Not":
            out = np.logical_not(ins[0])
        elif op == "Where":
            out = np.where(ins[0], ins[1], ins[2])
        elif op == "Cast":
            out = ins[0].astype({1: np.float32, 7: np.int64}[attrs["to"]])
        elif op == "Gather":
            out = np.take(ins[0], ins[1], axis=attrs.get("axis", 0))
        elif op == "Unsqueeze":
            out = np.expand_dims(ins[0], tuple(ins[1]))
        elif op == "ReduceSum":
            out = ins[0].sum(axis=tuple(ins[1]), keepdims=bool(attrs.get("keepdims", 1)))
        elif op == "Slice":
            index = [slice(None)] * ins[0].ndim
            for start, end, axis in zip(ins[1], ins[2], ins[3]):
                index[axis] = slice(start, end)
            out = ins[0][tuple(index)]
        elif op == "BatchNormalization":
            assert ins[0].shape[1] == ins[1].shape[0], (ins[0].shape, ins[1].shape)
            per = [1, -1] + [1] * (ins[0].ndim - 2)  # the channels at axis 1
            scale, bias, mean, var = (v.astype(np.float64).reshape(per) for v in ins[1:5])
            out = (ins[0] - mean) / np.sqrt(var + attrs.get("epsilon", 1e-5)) * scale + bias
        elif op == "Concat":
            out = np.concatenate(ins, axis=attrs["axis"])
        else:
            raise AssertionError(f"operator {op} is not interpreted here")
        if out.dtype == np.float64:
            out = out.astype(np.float32)
        values[node.output[0]] = out
    return [values[o.name] for o in model.graph.output]


class ExportTest(unittest.TestCase):
    def check_onnx(self, path, job, flags, examples, feeds=None, atol=1e-5):
        """The ONNX file passes the checker and scores `examples` of the test
        set (Fashion-MNIST's images, or `feeds`) as predict does. Returns
        the model."""
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        self.assertEqual([o.name for o in model.graph.output], ["logits", "probabilities"])
        if feeds is None:
            feeds = {"input": test_images()[:examples]}
        logits, probabilities = run_onnx(model, feeds)
        run("predict", "--checkpoint", job, *flags, "--out", path + ".csv")
        theirs = np.loadtxt(path + ".csv", delimiter=",", skiprows=1)[:examples]
        np.testing.assert_allclose(theirs[:, 3:], probabilities, atol=atol)
        np.testing.assert_array_equal(theirs[:, 2], logits.argmax(axis=1))
        return model

    def trained_export(self, out, config, name):
        """Trains the model of `config` (a model_config path) 40 steps locally
        in out/<name>, exports it to out/<name>.onnx and checks 300 test
        examples' scores (check_onnx). Returns the model."""
        job = os.path.join(out, name)
        run("train", "--local", "--model_config=" + config, "--max_steps=40",
            "--output_dir=" + job)
        run("export", job, "--format=onnx", "--out", os.path.join(out, name + ".onnx"))
        return self.check_onnx(os.path.join(out, name + ".onnx"), job, [], 300)

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
        # The run's config comes from its run.json: no flags repeated.
        run("export", job, "--format=onnx", "--out", os.path.join(out, "cnn.onnx"))
        model = self.check_onnx(os.path.join(out, "cnn.onnx"), job, [], 500, atol=1e-6)
        # Conv, ReLU and MaxPool run in NCHW between one Transpose in and
        # one out, not a pair around each (which cancel out).
        ops = [node.op_type for node in model.graph.node]
        self.assertEqual(ops.count("Transpose"), 2, ops)
        self.assertLess(ops.index("Transpose"), ops.index("Conv"))
        self.assertGreater(len(ops) - ops[::-1].index("Transpose"), ops.index("MaxPool"))

    def test_a_residual_graph_exports_as_onnx(self):
        """A graph (configs/fashion_mnist_resnet.pbtxt: a residual Add and a
        Concatenate of two branches) exports as the graph it is, in NCHW
        from the first convolution to the flatten."""
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        model = self.trained_export(
            out, os.path.join(os.path.dirname(PSTRAIN), "configs", "fashion_mnist_resnet.pbtxt"),
            "resnet")
        ops = [node.op_type for node in model.graph.node]
        self.assertEqual(ops.count("Concat"), 1, ops)
        self.assertEqual(ops.count("Conv"), 5, ops)
        self.assertEqual(ops.count("Transpose"), 2, ops)
        concat = next(n for n in model.graph.node if n.op_type == "Concat")
        self.assertEqual(onnx.helper.get_attribute_value(concat.attribute[0]), 1)

    def test_batch_normalization_exports_with_its_moving_statistics(self):
        """configs/fashion_mnist_mobile.pbtxt (convolutions each followed by a
        BatchNormalization, a residual add) trained a little, then a flat
        [N, C] and a [N, T, C] normalization: ONNX's BatchNormalization in
        inference, from the moving statistics training left, scores as
        predict does."""
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        model = self.trained_export(
            out, os.path.join(os.path.dirname(PSTRAIN), "configs", "fashion_mnist_mobile.pbtxt"),
            "mobile")
        ops = [node.op_type for node in model.graph.node]
        self.assertEqual(ops.count("BatchNormalization"), 5, ops)
        stats = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        moved = stats["bn_Conv1/moving_variance"]
        self.assertFalse(np.allclose(moved, 1.0), moved)  # training moved them
        config = os.path.join(out, "flat.pbtxt")
        with open(config, "w") as f:
            f.write("""input_dim: 784
input_shape: [28, 28]
layer { name: "bn_rows" batch_normalization {} }
layer { name: "rows" conv1d { filters: 4 kernel_size: 3 strides: 3 } }
layer { name: "flat_rows" flatten {} }
layer { name: "bn_flat" batch_normalization { center: false } }
layer { name: "hidden" dense { units: 16 activation: relu } }
layer { name: "bn_hidden" batch_normalization { scale: false momentum: 0.5 } }
layer { name: "predictions" dense { units: 10 } }
optimizer { name: "adam" learning_rate: 0.003 }
batch_size: 32
""")
        model = self.trained_export(out, config, "flat")
        self.assertEqual([n.op_type for n in model.graph.node].count("BatchNormalization"), 3)

    def test_image_layers_and_keras_activations_export_as_onnx(self):
        """ZeroPadding2D, a strided convolution with swish, ReLU(6.), a depthwise
        convolution (a Conv of one group per channel), a convolution without
        a bias, average
        pooling with "same" padding, an Activation layer (gelu), the global
        average and max, and a softmax last layer (the graph's Softmax, once)."""
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        config = os.path.join(out, "image.pbtxt")
        with open(config, "w") as f:
            f.write("""input_dim: 784
input_shape: [28, 28, 1]
layer { name: "rescale" rescaling { scale: 2.0 offset: -1.0 } }
layer { name: "pad" zero_padding2d { padding: [0, 1, 0, 1] } }
layer { name: "stem" conv2d { filters: 8 kernel_size: 3 strides: 2 activation: swish } }
layer { name: "stem_relu" relu { max_value: 6 } }
layer { name: "conv" conv2d { filters: 8 kernel_size: 3 padding: same activation: elu } }
layer { name: "dw" depthwise_conv2d { kernel_size: 3 padding: same depth_multiplier: 2 activation: relu6 } }
layer { name: "project" conv2d { filters: 8 kernel_size: 1 use_bias: false } }
layer { name: "avg" average_pool2d { pool_size: 3 strides: 2 padding: same } }
layer { name: "gelu" activation { activation: gelu } }
layer { name: "mean" global_average_pool2d {} inputs: "gelu" }
layer { name: "max" global_max_pool2d {} inputs: "gelu" }
layer { name: "both" concatenate {} inputs: ["mean", "max"] }
layer { name: "hidden" dense { units: 16 activation: selu } }
layer { name: "tanh" dense { units: 16 activation: tanh } }
layer { name: "predictions" dense { units: 10 activation: softmax } }
optimizer { name: "adam" learning_rate: 0.003 }
batch_size: 32
""")
        model = self.trained_export(out, config, "image")
        ops = [node.op_type for node in model.graph.node]
        self.assertEqual(ops.count("Softmax"), 1, ops)
        for op in ("Pad", "Clip", "AveragePool", "Erf", "ReduceMean", "ReduceMax", "Elu",
                   "Selu", "Tanh"):
            self.assertIn(op, ops)
        convs = {n.input[1]: n for n in model.graph.node if n.op_type == "Conv"}
        attrs = {a.name: onnx.helper.get_attribute_value(a)
                 for a in convs["dw/depthwise_kernel"].attribute}
        self.assertEqual(attrs["group"], 8)
        self.assertEqual(len(convs["project/kernel"].input), 2)  # no bias

    def test_a_bag_of_pixels_model_exports_as_onnx(self):
        """pixel_buckets ids computed in the graph from the input, each id's
        row gathered from the table, the bag's mean."""
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        job = os.path.join(out, "job")
        config = "--model_config=" + os.path.join(os.path.dirname(PSTRAIN), "configs",
                                                  "fashion_mnist_bag.pbtxt")
        run("train", "--local", config, "--max_steps=200", "--output_dir=" + job)
        run("export", "--checkpoint", job, config, "--out", os.path.join(out, "bag.onnx"))
        self.check_onnx(os.path.join(out, "bag.onnx"), job, [config], 1000)

    def test_id_features_export_as_onnx(self):
        """Id features read from a second input: two bags (sum and mean, id 0
        padding) side by side, and a masked sequence before a Conv1D, on CSV
        data written here."""
        out = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        data = os.path.join(out, "data")
        os.makedirs(data)
        rng = np.random.default_rng(7)
        splits = {}
        for split, n in (("train", 2000), ("test", 300)):
            a = rng.integers(1, 50, size=(n, 1))
            b = rng.integers(0, 30, size=(n, 3))  # 0: padding
            x = rng.random((n, 2)).round(3)
            label = (a[:, 0] + b[:, 0]) % 3
            with open(os.path.join(data, split + ".csv"), "w") as f:
                f.write("label,x0,x1,a,b0,b1,b2\n")
                for i in range(n):
                    f.write(",".join(str(v) for v in [label[i], *x[i], a[i, 0], *b[i]]) + "\n")
            splits[split] = (x.astype(np.float32), np.concatenate([a, b], axis=1))
        def input_block(with_a):
            return ("""input {
  format: "csv"  train_files: "train.csv"  test_files: "test.csv"
  feature { name: "x" type: "float" column: "x0" length: 2 }
""" + ('  feature { name: "a" type: "int64" vocabulary: 50 }\n' if with_a else "") +
                    """  feature { name: "b" type: "int64" column: "b0" length: 3 vocabulary: 30 }
  label: "label"
}
""")
        models = {
            "bags": """
layer { name: "a" embedding_bag { vocabulary: 50 dim: 4 ids_from: "feature:a" combiner: "sum" } }
layer { name: "b" embedding_bag { vocabulary: 30 dim: 3 ids_from: "feature:b" } }
layer { dense { units: 16 activation: "relu" } }
layer { dense { units: 3 } }
""",
            "sequence": """
layer { name: "b" embedding { vocabulary: 30 dim: 4 ids_from: "feature:b" mask_zero: true } }
layer { conv1d { filters: 5 kernel_size: 2 activation: "relu" } }
layer { global_average_pool1d {} }
layer { dense { units: 3 } }
""",
        }
        x, ids = splits["test"]
        for name, layers in models.items():
            with self.subTest(model=name):
                with_a = name == "bags"  # the sequence reads b alone
                config = os.path.join(out, name + ".pbtxt")
                with open(config, "w") as f:
                    f.write(input_block(with_a) + layers +
                            'optimizer { name: "adam" learning_rate: 0.01 }\nbatch_size: 32\n')
                flags = ["--model_config=" + config, "--data_dir=" + data]
                job = os.path.join(out, name)
                run("train", "--local", *flags, "--max_steps=120", "--output_dir=" + job)
                said = run("export", "--checkpoint", job, *flags,
                           "--out", os.path.join(out, name + ".onnx"))
                self.assertIn('and "ids" [batch, ids_width]', said)
                model = self.check_onnx(os.path.join(out, name + ".onnx"), job, flags, len(ids),
                                        {"input": x, "ids": ids if with_a else ids[:, 1:]})
                if name == "sequence":
                    ops = [node.op_type for node in model.graph.node]
                    self.assertEqual(ops.count("Transpose"), 2, ops)

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

"""Compiler options shared by packages."""

# The hot loops of the PS and of the update rules (optimizer steps,
# gradient checks) are element-wise;
# -O3 lets g++ vectorise them (g++ 12 at -O2 only does the cheapest cases).
# IEEE semantics are kept: no fast-math.
# -fno-math-errno: std::sqrt may then compile to a vector instruction (with
# errno semantics it needs a scalar call for negative inputs, which keeps
# Adagrad's and Adam's loops from vectorising: 15-30x slower).
HOT_COPTS = [
    "-O3",
    "-fno-math-errno",
]

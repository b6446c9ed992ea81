"""Compiler options shared by packages."""

# The hot loops of the PS and of the update rules (optimizer steps,
# gradient checks) are element-wise;
# -O3 lets g++ vectorise them (g++ 12 at -O2 only does the cheapest cases).
# IEEE semantics are kept: no fast-math.
# -fno-math-errno: std::sqrt may then compile to a vector instruction (with
# errno semantics it needs a scalar call for negative inputs, which keeps
# Adagrad's and Adam's loops from vectorising: 15-30x slower).
#
# Under the sanitizers (.bazelrc's asan and tsan configurations, which set
# //base:sanitized) these files compile at the level of the rest of that
# tree: the checks read the source's meaning, not its vectorised form, and
# -O3 with ASan's instrumentation doubled their compile time.
O3_COPTS = select({
    "//base:sanitized": [],
    "//conditions:default": ["-O3"],
})

HOT_COPTS = O3_COPTS + ["-fno-math-errno"]

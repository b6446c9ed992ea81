"""Fuzz targets: each one source defining LLVMFuzzerTestOneInput.

pstrain_fuzz(name, ...) makes
  - name + "_regression" (cc_test): the target's seed corpus and every input
    kept from a crash, replayed by replay_main.cc, in the normal test suite;
  - name (cc_binary, manual): the libFuzzer binary, built with
    `bazel build --config=fuzz //fuzz:name` (clang, ASan, coverage).
"""

def pstrain_fuzz(name, src, deps, corpus):
    native.cc_test(
        name = name + "_regression",
        size = "small",
        srcs = [src],
        # Run from the runfiles root, where the corpus lies under the package.
        args = ["%s/%s" % (native.package_name(), corpus)],
        data = native.glob([corpus + "/**"]),
        deps = deps + [":replay_main"],
    )
    native.cc_binary(
        name = name,
        srcs = [src],
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        deps = deps,
    )

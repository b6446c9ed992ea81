#!/usr/bin/env bash
# Installs the Debian 12 packages pstrain needs, only those that are missing
# (with --test, also those only the test command uses; with --bench, the
# peers bench/headline.py measures against). Safe to run any
# number of times. Needs root (or sudo) only when something
# is missing.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap          # Bazel 4.2.3, the build
  g++                      # the C++ compiler
  clang                    # thread-safety analysis (bazel build --config=clang)
  protobuf-compiler        # protoc
  libprotobuf-dev          # Protocol Buffers runtime
  protobuf-compiler-grpc   # grpc_cpp_plugin
  libgrpc++-dev            # gRPC C++
  libabsl-dev              # Abseil (20220623)
  libgtest-dev             # GoogleTest
  libgmock-dev             # GoogleMock
  libbenchmark-dev         # Google Benchmark
  libopenblas-dev          # CPU BLAS
  libdnnl-dev              # oneDNN: the CPU's convolutions
  zlib1g-dev               # gzip'd IDX files
  libpng-dev               # PNG images in TFRecord inputs (decode: "png")
  libturbojpeg0-dev        # JPEG images in TFRecord inputs (decode: "jpeg"), libjpeg-turbo
  libssl-dev               # checking TLS certificates and keys at start
  openssl                  # deploy/make_certs.sh (certificates, tokens)
  dataset-fashion-mnist    # the training data, in /usr/share/datasets
  gnuplot-nox              # `pstrain experiment` plots (PNG)
  python3                  # tests/count_results.py counts the test reports
  python3-yaml             # deploy/manifests_test.py reads the deployment files
  python3-numpy            # tests/export_test.py reads an exported model
  libonnx-dev              # ONNX's protocol buffers: `pstrain export --format=onnx`
  python3-onnx             # tests/export_test.py checks the ONNX file
  nlohmann-json3-dev       # JSON (TF_CONFIG, metrics, checkpoint index)
)
# With --test, what only the test command needs besides.
if [[ ${1:-} == --test ]]; then
  PACKAGES+=(
    qemu-system-x86        # tools/kernel_tls_check.sh: kernel TLS on Debian's own kernel
    busybox-static         # the same check's guest
  )
fi

# With --bench, the peers of bench/headline.py.
if [[ ${1:-} == --bench ]]; then
  PACKAGES+=(
    python3-torch          # PyTorch (training) and its gloo (all-reduce)
    iperf3                 # one TCP stream on loopback
  )
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo)
  else
    echo "install_deps: missing packages: ${missing[*]}" >&2
    echo "install_deps: run this script as root (or with passwordless sudo) to install them" >&2
    exit 1
  fi
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install_deps: done"

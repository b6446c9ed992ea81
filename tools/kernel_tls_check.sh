#!/usr/bin/env bash
# Runs the frame sockets' TLS tests, and TLS benches of the PS, on
# Debian's stock kernel, whose tls module (kTLS) a host kernel may lack:
# boots that kernel under QEMU with an initramfs holding the test binaries,
# the libraries they load, bash, openssl and busybox, loads the module and
# runs the tests with PSTRAIN_EXPECT_KERNEL_TLS=1, so that a connection the
# kernel does not take fails them instead of falling back to OpenSSL.
#
#   tools/kernel_tls_check.sh [OUT [BAZEL_ARGS...]]
#
# OUT defaults to /tmp/pstrain-kernel-tls; BAZEL_ARGS (the build's
# configuration) to -c opt. With FRAME_TLS_TEST and PS_BENCH naming built
# binaries (the test command passes its clang tree's frame_tls_test, built
# with ASan and UBSan, and its g++ tree's ps_bench), nothing is built.
# `tools/kernel_tls_check.sh --kernel-package` prints the kernel package
# the check boots and exits. QEMU and busybox come from Debian's
# qemu-system-x86 and busybox-static (deploy/install_deps.sh); the kernel
# is the package linux-image-amd64 names, downloaded from Debian's archive
# once (not installed) into ~/.cache/pstrain-kernel-tls. The guest runs
# under QEMU's emulation (TCG): its timings say nothing of real hardware,
# so the bench here checks that TLS frames flow through the kernel, not
# how fast. Ends with "kernel TLS check: ok" (exit 0) or names what failed
# (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/pstrain-kernel-tls}
shift || true
build_args=("$@")
[[ ${#build_args[@]} -gt 0 ]] || build_args=(-c opt)
cache=${PSTRAIN_KERNEL_TLS_CACHE:-$HOME/.cache/pstrain-kernel-tls}
[[ $out == --kernel-package ]] || mkdir -p "$out"
mkdir -p "$cache"
for tool in qemu-system-x86_64 /bin/busybox; do
  command -v "$tool" >/dev/null ||
    { echo "kernel_tls_check: $tool is missing: run deploy/install_deps.sh" >&2; exit 1; }
done

kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
image=$(kernel_package)
if [[ -z $image ]]; then  # apt's lists not fetched yet on this machine
  apt-get update -qq >/dev/null 2>&1 || true
  image=$(kernel_package)
fi
[[ -n $image ]] || { echo "kernel_tls_check: apt knows no linux-image-amd64" >&2; exit 1; }
if [[ $out == --kernel-package ]]; then echo "$image"; exit 0; fi
kernel_dir="$cache/$image"
if [[ ! -d $kernel_dir/boot ]]; then
  echo "kernel_tls_check: downloading $image"
  (cd "$cache" && apt-get download "$image" >/dev/null 2>&1)
  rm -rf "$kernel_dir"
  dpkg-deb -x "$cache/${image}"_*.deb "$kernel_dir"
fi
vmlinuz=$(ls "$kernel_dir"/boot/vmlinuz-*)
# The tls module, and the modules of AES-GCM it asks the kernel's crypto
# for (a guest without modprobe loads nothing by itself), in load order.
modules=(tls gf128mul ghash-generic ctr gcm cryptd crypto_simd aesni-intel ghash-clmulni-intel)

if [[ -n ${FRAME_TLS_TEST:-} && -n ${PS_BENCH:-} ]]; then
  ours=("$FRAME_TLS_TEST" "$PS_BENCH")
else
  bazel build "${build_args[@]}" //transport:frame_tls_test //bench:ps_bench \
    >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
  bin=$(bazel info "${build_args[@]}" bazel-bin 2>/dev/null)
  ours=("$bin/transport/frame_tls_test" "$bin/bench/ps_bench")
fi

root="$out/root"
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp,pstrain/deploy,etc/ssl,lib64}
cp /bin/busybox "$root/bin/"
for tool in $("$root/bin/busybox" --list); do
  [[ -e $root/bin/$tool ]] || ln -s busybox "$root/bin/$tool"
done
tools=(/bin/bash /usr/bin/openssl)  # deploy/make_certs.sh's
cp "${ours[@]}" "$root/pstrain/"
rm -f "$root/bin/bash" "$root/bin/openssl"
cp "${tools[@]}" "$root/bin/"
binaries=("${ours[@]}" "${tools[@]}")
# Every library: the system's (glibc's included) at the path the loader
# looks in, the build's own in /pstrain/lib.
mkdir -p "$root/pstrain/lib"
ldd "${binaries[@]}" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u |
  while read -r lib; do
    case $lib in
      /lib/* | /lib64/* | /usr/lib/*) mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib" ;;
      *) cp -L "$lib" "$root/pstrain/lib/" ;;
    esac
  done
cp -L /etc/ssl/openssl.cnf "$root/etc/ssl/openssl.cnf"
mkdir -p "$root/usr/lib/ssl"
ln -sf /etc/ssl/openssl.cnf "$root/usr/lib/ssl/openssl.cnf"
cp deploy/make_certs.sh "$root/pstrain/deploy/"
mkdir -p "$root/modules"
for m in "${modules[@]}"; do
  ko=$(find "$kernel_dir/lib/modules" -name "$m.ko*" | head -1)
  [[ -n $ko ]] || { echo "kernel_tls_check: $image has no module $m" >&2; exit 1; }
  cp "$ko" "$root/modules/"
  [[ $ko != *.xz ]] || xz -d "$root/modules/$(basename "$ko")"
done
echo "${modules[*]}" >"$root/modules/order"

cat >"$root/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
ip link set lo up
export LD_LIBRARY_PATH=/pstrain/lib:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu PATH=/bin
echo "kernel: $(uname -r)"
for m in $(cat /modules/order); do insmod /modules/$m.ko || echo "module $m: not loaded"; done
echo "tcp_available_ulp: $(cat /proc/sys/net/ipv4/tcp_available_ulp)"
cd /pstrain
export TEST_TMPDIR=/tmp/t PSTRAIN_EXPECT_KERNEL_TLS=1
mkdir -p $TEST_TMPDIR
./frame_tls_test >/tmp/test.log 2>&1
rc=$?
tail -40 /tmp/test.log
echo "RESULT frame_tls_test exit $rc"
bash deploy/make_certs.sh /tmp/certs >/dev/null
# Push-then-pull (1 PS x 1 client, each transport), then pipelined pushes
# over TLS frames from 1 and from 2 clients (a PS serving two kernel ends
# at once).
rc=0
./ps_bench --scenario=push_pull --ps=1 --clients=1 --bytes=1048576 --seconds=1 --repeat=1 \
  --certs=/tmp/certs >/tmp/bench.log 2>&1 || rc=1
./ps_bench --scenario=pipelined --transport=tls --bytes=1048576 --seconds=1 --repeat=1 \
  --certs=/tmp/certs >>/tmp/bench.log 2>&1 || rc=1
grep -E 'median|sealed' /tmp/bench.log
echo "RESULT ps_bench exit $rc"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$out/initramfs.gz")

echo "kernel_tls_check: booting $image under QEMU (emulated; about a minute)"
start=$(date +%s)
timeout 600 qemu-system-x86_64 -cpu max -smp 2 -m 3072 -kernel "$vmlinuz" \
  -initrd "$out/initramfs.gz" -append "console=ttyS0 quiet panic=-1" \
  -nographic -no-reboot </dev/null 2>&1 | tr -d '\r' | tee "$out/console.log" |
  grep -E '^(kernel:|module |tcp_available_ulp|RESULT|\[  (PASSED|FAILED) |.*sealed|ps tls|  median)' || true
echo "kernel_tls_check: the guest ran $(( $(date +%s) - start )) s; console in $out/console.log"
results=$(grep -c '^RESULT .* exit 0$' "$out/console.log" || true)
# Every TLS figure of the bench (push-then-pull, pipelined with 1 and 2
# clients) with its records sealed by the kernel.
tls_lines=$(grep -c -E '(ps over tls|pipelined over tls).*records sealed by the kernel \(kTLS\)' \
  "$out/console.log" || true)
if [[ $tls_lines -ne 3 ]]; then
  echo "kernel_tls_check: $tls_lines of the bench's 3 TLS figures went through the kernel's TLS"
  results=$((results - 1))
fi
if [[ $results -eq 2 ]]; then
  echo "kernel TLS check: ok"
else
  echo "kernel TLS check: FAILED ($results of 2 steps passed)"
  exit 1
fi

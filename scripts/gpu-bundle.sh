#!/usr/bin/env bash
# Packs what `bash scripts/validate-gpu.sh` needs into one folder, for a GPU machine that has the
# NVIDIA driver, CUDA's libraries and NCCL but not ppsim's build dependencies (Boost, fmt, CLI11,
# nlohmann-json): the GPU build's `ppsim` and `ppsim_gpu_tests` (stripped), the shared libraries
# they need beyond the C/C++ runtime and CUDA's (libfmt), ctest's files, and run.sh.
# Usage: bash scripts/gpu-bundle.sh [BUILD_DIR] [BUNDLE_DIR]   (default build-gpu, gpu-bundle;
#        BUILD_DIR: a Release build with -DPPSIM_BUILD_TESTS=ON whose GPU targets were built)
# Then, on the GPU machine, in a checkout of the same commit with the bundle copied into it:
#   bash gpu-bundle/run.sh            # validate-gpu.sh with PPSIM set; writes docs/VALIDATION.md
#   LOGS=DIR bash gpu-bundle/run.sh   # also keeps every run's config, JSON and stderr in DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build-gpu}" && pwd)
bundle=${2:-$src/gpu-bundle}
for t in cli/ppsim real/gpu/ppsim_gpu_tests; do
  [ -x "$build/$t" ] || { echo "gpu-bundle: $build/$t is missing: build the GPU targets first" >&2; exit 2; }
done
rm -rf "$bundle"
mkdir -p "$bundle/lib" "$bundle/build/cli" "$bundle/build/real/gpu"
strip -o "$bundle/build/cli/ppsim" "$build/cli/ppsim"
strip -o "$bundle/build/real/gpu/ppsim_gpu_tests" "$build/real/gpu/ppsim_gpu_tests"
# Shared libraries other than the C/C++ runtime (every Linux has it) and CUDA's (the GPU machine's
# own must be used: they match its driver).
ldd "$build/cli/ppsim" "$build/real/gpu/ppsim_gpu_tests" | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  grep -vE '/(libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
# ctest's files, with the paths of this build and checkout left as placeholders for run.sh.
(cd "$build" && find . -name CTestTestfile.cmake -o -name '*_include-*.cmake') | while read -r f; do
  mkdir -p "$bundle/build/$(dirname "$f")"
  sed -e "s|$build|@BUILD@|g" -e "s|$src|@SRC@|g" "$build/$f" >"$bundle/build/$f"
done
cat >"$bundle/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs scripts/validate-gpu.sh with this bundle's binaries (see scripts/gpu-bundle.sh).
set -euo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$bundle/.." && pwd)
[ -f "$src/scripts/validate-gpu.sh" ] || { echo "run.sh: copy the bundle into a ppsim checkout" >&2; exit 2; }
# CUDA's libraries where this machine has them (cuBLAS and NCCL are opened by soname).
dirs=""
for l in libcublas.so.13 libcublas.so.12 libnccl.so.2; do
  f=$(ls /usr/local/cuda/lib64/$l /usr/local/cuda/lib/$l 2>/dev/null | head -1 || true)
  [ -n "$f" ] || f=$(find / -xdev -name "$l" -not -path '/proc/*' 2>/dev/null | head -1 || true)
  [ -n "$f" ] && dirs="$dirs:$(dirname "$f")"
done
export LD_LIBRARY_PATH="$bundle/lib$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PPSIM_SOURCE_DIR="$src"
find "$bundle/build" -name '*.cmake' -exec sed -i -e "s|@BUILD@|$bundle/build|g" -e "s|@SRC@|$src|g" {} +
cd "$src"
PPSIM="$bundle/build/cli/ppsim" bash scripts/validate-gpu.sh
RUN
chmod +x "$bundle/run.sh"
du -sh "$bundle"

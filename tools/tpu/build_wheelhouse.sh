#!/usr/bin/env bash
# Build what a bare TPU host needs to run maxkernel, into one folder to carry there (default .tpu/):
#   wheels/  this project's distributions (pip wheel --no-deps) and the pure-Python dependencies the host lacks
#            (it has jax, jaxlib, libtpu, numpy and ml_dtypes), for its Python and platform;
#   bin/, lib/  bubblewrap's binary from Debian's package and the libraries it links beyond glibc, so candidates
#            can run in bwrap where the host allows unprivileged user namespaces (else maxkernel says it uses the
#            weaker fallback, and every verdict records which).
# Then tools/tpu/run.sh installs them on the host and runs a command (docs/tpu.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-.tpu}
PYTHON=${PYTHON:-python3}
PY_VERSION=${TPU_PYTHON_VERSION:-3.11}
# The host's pure-Python needs, at the versions installed beside $PYTHON (pyyaml is compiled: the host's platform).
PURE="pluggy attrs cattrs click rich markdown-it-py mdurl pygments platformdirs typing_extensions flatbuffers
pytest iniconfig packaging"  # pytest: make test-tpu there
COMPILED="pyyaml"
DISTS="./ ./backends/pallas_judge ./backends/tpu_pallas ./backends/gpu_pallas ./synthesizers/synthesis ./synthesizers/tpu_offline
./synthesizers/gpu_offline ./llm_providers ./strategies ./jaxbench"

rm -rf "$OUT" && mkdir -p "$OUT/wheels" "$OUT/bin" "$OUT/lib"
# Built without isolation (seconds, not a fresh build environment per distribution), so the build requirement
# the pyprojects name must be here: a fresh venv's setuptools predates their SPDX license strings.
"$PYTHON" -m pip install --quiet "setuptools>=77"
for dist in $DISTS; do
  "$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation -w "$OUT/wheels" "$dist"
  rm -rf "$dist/build"  # setuptools' scratch, left in the source folder
done
pinned() {  # NAME==VERSION as installed beside $PYTHON, else the bare name
  for name in "$@"; do
    version=$("$PYTHON" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')
    echo "$name${version:+==$version}"
  done
}
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$OUT/wheels" $(pinned $PURE)
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
  --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$OUT/wheels" \
  $(pinned $COMPILED)

# bubblewrap: Debian's binary and the libraries it needs beyond glibc (libselinux, libcap, pcre2)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if (cd "$scratch" && apt-get download bubblewrap libcap2 libselinux1 libpcre2-8-0 >/dev/null 2>&1); then
  for deb in "$scratch"/*.deb; do dpkg-deb -x "$deb" "$scratch/root"; done
  cp "$scratch/root/usr/bin/bwrap" "$OUT/bin/bwrap.real"
  for lib in libcap.so.2 libselinux.so.1 libpcre2-8.so.0; do
    cp -L "$(find "$scratch/root" -name "$lib" | head -1)" "$OUT/lib/"
  done
  # a wrapper that finds the carried libraries; maxkernel looks for `bwrap` on PATH
  cat > "$OUT/bin/bwrap" <<'WRAP'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/bwrap.real" "$@"
WRAP
  chmod +x "$OUT/bin/bwrap" "$OUT/bin/bwrap.real"
else
  echo "note: apt-get download bubblewrap failed here: the host will use the fallback sandbox" >&2
fi
(cd "$OUT/wheels" && sha256sum ./*.whl > ../wheels.sha256)
du -sh "$OUT" | awk '{print "wheelhouse: " $1 " in '"$OUT"'"}'

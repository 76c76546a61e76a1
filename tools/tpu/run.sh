#!/usr/bin/env bash
# On a TPU host without network or root: install the wheelhouse that `make tpu-wheels` built (.tpu/, carried with
# the checkout) into a private folder, then run a command with it, e.g.
#   tools/tpu/run.sh maxkernel doctor
#   tools/tpu/run.sh maxkernel run --task tests/tpu_pallas/tasks/matmul_bias_gelu --provider offline
# The host's own jax, jaxlib, libtpu and numpy are used; nothing is installed system-wide. The install is kept
# (and skipped next time) while the wheels are unchanged.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
house=${MAXKERNEL_WHEELHOUSE:-$root/.tpu}
site=${MAXKERNEL_TPU_SITE:-${TMPDIR:-/tmp}/maxkernel-site-$(id -u)}
if [ ! -d "$house/wheels" ]; then
  echo "tools/tpu/run.sh: no wheelhouse in $house: build it with \`make tpu-wheels\` and carry .tpu to the host" >&2
  exit 2
fi
# A site another user made (or could write to) is never trusted: it goes first on the import path.
if [ -e "$site" ] && { [ ! -O "$site" ] || [ -n "$(find "$site" -maxdepth 0 -perm /022)" ]; }; then
  echo "tools/tpu/run.sh: $site is not this user's own: set MAXKERNEL_TPU_SITE to a folder of yours" >&2
  exit 2
fi
if ! cmp -s "$house/wheels.sha256" "$site/.wheels.sha256" 2>/dev/null; then
  rm -rf "$site" && mkdir -m 700 -p "$site"
  python3 -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$house"/wheels/*.whl
  cp "$house/wheels.sha256" "$site/.wheels.sha256"
fi
# Add to the import path, never replace it: the host's PYTHONPATH names its own jax.
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/bin:$house/bin:$PATH"
exec "$@"

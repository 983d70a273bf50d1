#!/usr/bin/env bash
# The Ascend runtime's headers (acl/acl.h and the ge/ ones it includes) as torch_npu's
# wheel ships them: downloaded once (the wheel from the package index, without
# its dependencies) and unpacked into build/acl-headers/<version>; prints the
# include directory on stdout, nothing else. memtool builds its ACL backend and
# hooks against them (collectors/ascend/AclDecls.h); without them it builds on
# the declarations made from the documentation.
#   scripts/acl-headers.sh
# Environment: MEMTOOL_ACL_HEADERS_DIR (build/acl-headers); MEMTOOL_TORCH_NPU
# (2.6.0.post5: ACL 1.15.0); MEMTOOL_ACL_PYTHON (python3): a Python with pip.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${MEMTOOL_TORCH_NPU:-2.6.0.post5}
root=${MEMTOOL_ACL_HEADERS_DIR:-$PWD/build/acl-headers}
include=$root/torch_npu-$version/include
if [ -f "$include/acl/acl_rt.h" ]; then
    echo "$include"
    exit 0
fi
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
echo "acl-headers: downloading torch_npu $version's wheel for its ACL headers" >&2
python=${MEMTOOL_ACL_PYTHON:-python3}
"$python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux2014_x86_64 -d "$download" "torch-npu==$version" >&2
wheel=$(ls "$download"/torch_npu-*.whl)
"$python" - "$wheel" "$include" <<'PY'
import os, sys, zipfile
prefix = "torch_npu/include/third_party/acl/inc/"
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = [n for n in wheel.namelist() if n.startswith(prefix) and n.endswith(".h")]
    if not any(n.endswith("acl/acl_rt.h") for n in names):
        sys.exit("acl-headers: the wheel has no acl/acl_rt.h")
    for name in names:
        target = os.path.join(sys.argv[2], name[len(prefix):])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with wheel.open(name) as src, open(target, "wb") as dst:
            dst.write(src.read())
PY
echo "$include"

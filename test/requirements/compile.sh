#!/usr/bin/env bash
# Regenerates the hash-pinned requirement files the tests install from (moto.txt, cfn-lint.txt, and pip-tools.txt,
# which this script runs) from their .in files: every package of the resolution, pinned with ==, with the SHA-256
# of each file PyPI has for it. install-venv.sh installs them with --require-hashes --only-binary=:all:, so a file
# that differs from the one hashed here is refused. Run after changing a .in file; review the diff.
# Resolved with the python3 on PATH (each file's header names its version): markers for other versions are not in them.
set -euo pipefail
cd "$(dirname "$0")"
venv=$(bash install-venv.sh pip-tools bin/pip-compile --version)
for name in pip-tools moto cfn-lint; do
  PIP_FIND_LINKS= CUSTOM_COMPILE_COMMAND=test/requirements/compile.sh "$venv/bin/pip-compile" --quiet --generate-hashes \
    --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links --output-file "$name.txt" "$name.in"
done

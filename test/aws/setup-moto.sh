#!/usr/bin/env bash
# Installs moto's server (a local AWS emulator, Apache-2.0, from PyPI) with test/requirements/install-venv.sh:
# exactly test/requirements/moto.txt, every file checked against its pinned SHA-256, into a venv under
# ${XDG_CACHE_HOME:-~/.cache}/vault-rollout/moto-<version>-<hash>/, like the other test components. The tests start
# `bin/moto_server` on 127.0.0.1 as the STS endpoint of Vault's `aws` auth method. Idempotent. Prints the path of
# moto_server.
#
#   PYTHON  default python3
set -euo pipefail
venv=$(bash "$(dirname "${BASH_SOURCE[0]}")/../requirements/install-venv.sh" moto bin/moto_server --help)
echo "$venv/bin/moto_server"

# The Vault (or OpenBao) policy of `vault-rollout reconcile` and `status`: read and list KV v2 METADATA — the current
# version of each key and when each version was created, deleted or destroyed — and nothing else. No capability on
# data/: vault-rollout never reads a secret value, and this policy makes sure it cannot.
#
#   vault policy write vault-rollout-reconcile infra/vault/reconcile-policy.hcl
#
# `+` matches any one mount. To narrow it, replace `+` with your KV v2 mounts (one block each), e.g. "secret/metadata/*".

# The root namespace (and OSS Vault / OpenBao).
path "+/metadata/*" {
  capabilities = ["read", "list"]
}

# Vault Enterprise namespaces, written in the root namespace: one and two levels below it. (Alternatively write the
# first block in each namespace.) Remove these where there are no namespaces.
path "+/+/metadata/*" {
  capabilities = ["read", "list"]
}

path "+/+/+/metadata/*" {
  capabilities = ["read", "list"]
}

# Vault policy for `vault-rollout relay --events` (Vault Enterprise 1.16+ event notifications).
#
# Subscribing needs two grants (Vault's "Event notifications" docs, "Policies"):
#   1. `read` on the subscribe endpoint for the event types, and
#   2. `list` and `subscribe` on the data paths the events are about, with the event types allowed in
#      `subscribe_event_types`. Vault re-checks both while the WebSocket is open (every few minutes, and per event),
#      so a policy change takes effect without a reconnect.
#
# Replace `secret/` and `legacy/` with your KV mounts. For Enterprise namespaces, attach this policy in each
# namespace you subscribe to (`--vault-namespace`), or use a token with these grants across them.
#
#   vault policy write vault-rollout-relay infra/vault/events-policy.hcl
#   vault write auth/approle/role/vault-rollout-relay token_policies=vault-rollout-relay \
#       token_ttl=1h token_max_ttl=24h secret_id_ttl=0
#   (then give the relay VAULT_ROLE_ID and VAULT_SECRET_ID; it renews its token and logs in again as needed)

# The WebSocket endpoint, for KV v1 and v2 event types (kv-v1/*, kv-v2/*).
path "sys/events/subscribe/kv*" {
  capabilities = ["read"]
}

# KV v2 mount `secret/`: events carry data paths like secret/data/<key> and secret/metadata/<key>.
path "secret/*" {
  capabilities          = ["list", "subscribe"]
  subscribe_event_types = ["kv-v2/*"]
}

# KV v1 mount `legacy/`.
path "legacy/*" {
  capabilities          = ["list", "subscribe"]
  subscribe_event_types = ["kv-v1/*"]
}

# Token renewal (auth/token/renew-self) and lookup-self are granted by Vault's `default` policy; keep it attached.

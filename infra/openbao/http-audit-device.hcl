# OpenBao (2.5+) declarative audit device: POST every audit entry to the vault-rollout function.
# Goes into the OpenBao server configuration on every node (created on the active node at start and on SIGHUP).
#
# The header value goes through OpenBao's ParsePath: `env://NAME` reads it from the server's environment, so the
# token stays out of this file. Set VAULT_ROLLOUT_AUTHORIZATION="Bearer <VAULT_ROLLOUT_WEBHOOK_TOKEN>".
# Replace FUNCTION_URL (https://abc123.lambda-url.eu-west-1.on.aws).

audit "http" "vault-rollout" {
  description = "KV changes to vault-rollout (not the only audit device: see the file device below)"
  options {
    uri     = "FUNCTION_URL/v1/vault/audit"
    headers = "{\"Authorization\": [\"env://VAULT_ROLLOUT_AUTHORIZATION\"], \"Content-Type\": [\"application/json\"]}"
    format  = "json"
  }
}

# OpenBao counts a request as successful when at least one audit device logged it, and fails it when none could:
# always keep a local device next to the http one.
audit "file" "local" {
  description = "the local audit log"
  options {
    file_path = "/var/log/openbao/audit.log"
  }
}

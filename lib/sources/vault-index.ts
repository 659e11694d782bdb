/**
 * Vault Enterprise's storage index, as event notifications carry it since 1.16 (`metadata.vault_index`) and as a
 * write's `X-Vault-Index` response header returns it: standard base64 of `v1:<cluster id>:<local index>:<replicated
 * index>:<HMAC hex>` (`hashicorp/vault` api/client.go `ParseReplicationState`; the Events docs: "in the same format
 * as the X-Vault-Index header"). Sent back as the `X-Vault-Index` request header, it makes a performance standby (or
 * a performance secondary) that has not yet applied that index answer 412 instead of a stale read.
 *
 * It is not secret, but it comes from the feed, so it is untrusted: it is accepted only as bounded base64 (no byte
 * that could end or split a header), never decoded or interpreted here — Vault checks its HMAC. Its inner layout is
 * Vault's business and may change; its alphabet is what keeps a header safe.
 */

/** The docs' example is 160 characters; a cluster id and two 64-bit indexes never come near this. */
export const MAX_VAULT_INDEX_LENGTH = 512;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** True when `value` may be sent as an `X-Vault-Index` header: non-empty standard base64, at most 512 characters. */
export function isVaultIndex(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_VAULT_INDEX_LENGTH && BASE64.test(value);
}

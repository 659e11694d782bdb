/**
 * Which redirects a request carrying the relay's Vault token (or its AppRole secret ID) may follow. A Vault standby
 * answers 307 with the active node's address, on the same scheme; anything else is either a misconfiguration or
 * someone collecting tokens. So: the same host (any port) or a host the operator named (`--vault-redirect-hosts`),
 * and never from TLS to plain text.
 */
export interface VaultRedirectPolicy {
  /** Host names (no port) besides the --vault-addr host that a redirect may lead to: the cluster's other nodes. */
  allowedHosts?: readonly string[];
}

const SECURE = new Set(['https:', 'wss:']);

/** The redirect target, or why it is refused (names hosts and schemes, never the token). */
export function checkVaultRedirect(
  from: string | URL,
  location: string,
  policy: VaultRedirectPolicy = {},
): { ok: true; url: URL } | { ok: false; reason: string } {
  const origin = new URL(from);
  let to: URL;
  try {
    to = new URL(location, origin);
  } catch {
    return { ok: false, reason: 'refused a redirect to an invalid URL' };
  }
  if (SECURE.has(origin.protocol) && !SECURE.has(to.protocol))
    return {
      ok: false,
      reason: `refused a redirect from ${origin.protocol}//${origin.host} to ${to.protocol}//${to.host}: it would send the Vault token unencrypted`,
    };
  const sameHost = to.hostname.toLowerCase() === origin.hostname.toLowerCase();
  const allowed = (policy.allowedHosts ?? []).some((h) => h.toLowerCase() === to.hostname.toLowerCase());
  if (!sameHost && !allowed)
    return {
      ok: false,
      reason: `refused a redirect from ${origin.host} to another host, ${to.host}: the Vault token goes only to the --vault-addr host (name Vault's other nodes with --vault-redirect-hosts)`,
    };
  return { ok: true, url: to };
}

/** Redirects followed in a row at most (Vault needs one: standby to active). */
export const MAX_VAULT_REDIRECTS = 5;

/**
 * TLS is verified unless the routing table itself says `insecureSkipTLSVerify: true` for the cluster; a kubeconfig's
 * own `insecure-skip-tls-verify` is ignored, so a fetched kubeconfig cannot quietly turn verification off.
 */
import type { ClusterConfig } from '../../routing/schema.ts';

/** Where credential code reports what operators should know; never given secret content. */
export interface WarningLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
}

/** Whether to skip TLS verification for this cluster; warns once per call when it does. */
export function skipTLSVerifyFor(name: string, config: ClusterConfig, logger: WarningLogger): boolean {
  const skip = config.insecureSkipTLSVerify === true;
  if (skip) {
    logger.warn(`cluster ${name}: TLS verification is disabled (insecureSkipTLSVerify: true in the routing table)`, {
      cluster: name,
    });
  }
  return skip;
}

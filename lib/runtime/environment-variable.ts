/**
 * The shape of an entry of the environment-variable registry (environment-variables.ts): who reads a variable, what
 * it means, whether it holds a secret, its default; and the groups of readers entries share.
 */
/** Who reads a variable: the CLI commands that run as processes, the Lambda functions, or any command of the CLI. */
export type EnvironmentReader = 'serve' | 'worker' | 'relay' | 'cli' | 'lambda';

export interface EnvironmentVariable {
  name: string;
  readBy: readonly EnvironmentReader[];
  description: string;
  /** Holds a secret (or points at one): never logged, never put in a routing table. */
  secret: boolean;
  /** What applies when it is unset, in words; undefined: nothing (the feature is off, or the variable is required). */
  default?: string;
}

export const LOCAL: readonly EnvironmentReader[] = ['serve', 'worker', 'cli'];
export const VAULT_CLIENTS: readonly EnvironmentReader[] = ['serve', 'relay', 'cli', 'lambda'];

import {
  admissionPolicy,
  admissionPolicyYaml,
  AdmissionPolicyError,
  DEFAULT_IDENTITY,
} from '../deploy/admission-policy.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';
import { parseCommand } from './spec.ts';
import { admissionPolicy as spec } from './specs.ts';

/**
 * `vault-rollout admission-policy`: prints the ValidatingAdmissionPolicy and binding that bound the vault-rollout
 * identity to restart writes, for the routing table's kinds and in the namespaces its targets reach (a warning on
 * stderr for each kind some target reaches in every namespace). Without --user/--group: the shipped identities.
 */
export async function admissionPolicyCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  if (values.routes === undefined)
    return usageError(io, 'admission-policy', 'missing --routes FILE (or VAULT_ROLLOUT_ROUTES)');
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  const named = values.user.length > 0 || values.group.length > 0;
  const identity = named ? { users: values.user, groups: values.group } : DEFAULT_IDENTITY;
  try {
    const manifests = admissionPolicy(table, identity);
    // The output carries the same warning as a comment; stderr is where a person running it looks.
    for (const warning of manifests.warnings)
      io.stderr(
        `vault-rollout admission-policy: warning: ${warning}; the policy bounds its fields, not its namespaces\n`,
      );
    io.stdout(admissionPolicyYaml(manifests, values.routes));
  } catch (e) {
    if (e instanceof AdmissionPolicyError) return usageError(io, 'admission-policy', e);
    throw e;
  }
  return EXIT.ok;
}

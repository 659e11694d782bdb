/** The RFC 6902 operations vault-rollout sends (`test`, `add`), applied as the API server does, for the in-memory fakes. */
import { isDeepStrictEqual } from 'node:util';
import { ApiException } from '@kubernetes/client-node';
import type { JsonPatchOperation } from '../../../lib/kube/kube-api.ts';

const unescape = (token: string): string => token.replaceAll('~1', '/').replaceAll('~0', '~');

/** The patched copy; a failed `test` or a missing parent is the API server's 422. */
export function applyJsonPatch<T>(object: T, operations: readonly JsonPatchOperation[]): T {
  const out = structuredClone(object) as unknown;
  const rejected = () =>
    new ApiException(
      422,
      'HTTP 422',
      {
        kind: 'Status',
        reason: 'Invalid',
        code: 422,
        message: 'the server rejected our request due to an error in our request',
      },
      {},
    );
  for (const op of operations) {
    const tokens = op.path.split('/').slice(1).map(unescape);
    const last = tokens.pop() as string;
    let parent: unknown = out;
    for (const t of tokens)
      parent = typeof parent === 'object' && parent !== null ? (parent as Record<string, unknown>)[t] : undefined;
    if (typeof parent !== 'object' || parent === null) throw rejected();
    const record = parent as Record<string, unknown>;
    if (op.op === 'test' && !isDeepStrictEqual(record[last], op.value)) throw rejected();
    if (op.op === 'add') record[last] = structuredClone(op.value);
  }
  return out as T;
}

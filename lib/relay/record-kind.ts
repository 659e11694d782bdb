/** What a relayed line is: an audit-device entry or an event notification. Each goes to its own intake route. */
export type RecordKind = 'audit' | 'events';

export const RECORD_KINDS: readonly RecordKind[] = ['audit', 'events'];

/** The function's route for each kind (lib/http/app.ts). */
export const INTAKE_PATHS: Readonly<Record<RecordKind, string>> = {
  audit: '/v1/vault/audit',
  events: '/v1/vault/events',
};

/**
 * Approvals of waves (`rollout.gate.approval`), kept in the rotation store beside the halts. A gate whose wave passed
 * the rest of its checks records a request (rotation, the wave that waits, since when); `vault-rollout approve`
 * records who approved it and when, on a request only; the gate reads the approval back from the store, never from
 * a message, so a queue sender cannot approve anything. The first request's time and the first approval stay.
 *
 * Stores: each rotation store carries one (`RotationStore.approvals`): SQLite (lib/rotations/sqlite-approvals.ts),
 * DynamoDB (dynamodb-approvals.ts), memory (here, for tests and dry runs).
 */

/** A wave that waits for someone to approve it. */
export interface ApprovalRequest {
  /** The change set's key, as `halts` and `status` name it. */
  rotation: string;
  route: string;
  /** The changes as people read them: `secret/app/db version 2`. */
  secrets: string[];
  /** 1-based: the wave that waits to start (its gate is the wave before it), and how many waves there are. */
  wave: number;
  waves: number;
  /** ISO time the wait began (the first request's). */
  since: string;
}

/** A request, with who approved it and when once someone did. */
export interface ApprovalRecord extends ApprovalRequest {
  approvedBy?: string;
  approvedAt?: string;
}

export interface ApprovalStore {
  /** Records a request unless one is there (the first `since` stays); returns what the store holds afterwards. */
  request(request: ApprovalRequest): Promise<ApprovalRecord>;
  /** The request (and its approval) of this wave of the rotation, if any. */
  get(rotation: string, wave: number): Promise<ApprovalRecord | undefined>;
  /** Every request of the rotation, by wave (at most one per wave). */
  ofRotation(rotation: string): Promise<ApprovalRecord[]>;
  /**
   * Approves a request: only one the store holds (undefined: none), and the first approval stays (a second
   * `approve` changes nothing). Returns what the store holds afterwards.
   */
  approve(rotation: string, wave: number, by: string, at: string): Promise<ApprovalRecord | undefined>;
  /** The requests nobody approved yet, oldest first (at most MAX_LISTED_APPROVALS). */
  pending(): Promise<ApprovalRecord[]>;
  /** Forgets the rotation's requests and approvals (`halts clear`: it starts again from wave 1, asking again). */
  forget(rotation: string): Promise<void>;
}

/** A bound on what `pending()` returns. */
export const MAX_LISTED_APPROVALS = 1000;

/** Who approves: a name of 1 to 128 printable characters without control characters or quotes. */
export const APPROVER = /^[A-Za-z0-9._@+-][A-Za-z0-9 ._@+:\\/-]{0,127}$/;

/** The exact command that approves a waiting wave. */
export const approveCommand = (rotation: string, wave: number): string =>
  `vault-rollout approve ${rotation} --wave ${wave}`;

/** Reads a stored request back; a record that is not one (a hand-edited table) is skipped, never trusted half-way. */
export function parseStoredApproval(text: string, by?: string, at?: string): ApprovalRecord | undefined {
  try {
    const v = JSON.parse(text) as Partial<ApprovalRecord>;
    const strings = [v.rotation, v.route, v.since].every((x) => typeof x === 'string');
    if (!strings || typeof v.wave !== 'number' || typeof v.waves !== 'number' || !Array.isArray(v.secrets))
      return undefined;
    const record: ApprovalRecord = {
      rotation: v.rotation as string,
      route: v.route as string,
      secrets: v.secrets.map(String),
      wave: v.wave,
      waves: v.waves,
      since: v.since as string,
    };
    if (by !== undefined && at !== undefined) Object.assign(record, { approvedBy: by, approvedAt: at });
    return record;
  } catch {
    return undefined;
  }
}

/** The stored form of a request (without its approval, which has columns or attributes of its own). */
export const storedRequest = (r: ApprovalRequest): string =>
  JSON.stringify({
    rotation: r.rotation,
    route: r.route,
    secrets: r.secrets,
    wave: r.wave,
    waves: r.waves,
    since: r.since,
  });

/** Tests and dry runs: one process's memory. */
export class MemoryApprovalStore implements ApprovalStore {
  readonly #records = new Map<string, ApprovalRecord>();

  request(request: ApprovalRequest): Promise<ApprovalRecord> {
    const k = approvalKey(request.rotation, request.wave);
    if (!this.#records.has(k)) this.#records.set(k, structuredClone(request));
    return Promise.resolve(structuredClone(this.#records.get(k) as ApprovalRecord));
  }

  get(rotation: string, wave: number): Promise<ApprovalRecord | undefined> {
    const r = this.#records.get(approvalKey(rotation, wave));
    return Promise.resolve(r && structuredClone(r));
  }

  ofRotation(rotation: string): Promise<ApprovalRecord[]> {
    const mine = [...this.#records.values()].filter((r) => r.rotation === rotation);
    return Promise.resolve(structuredClone(mine.sort((a, b) => a.wave - b.wave)));
  }

  approve(rotation: string, wave: number, by: string, at: string): Promise<ApprovalRecord | undefined> {
    const r = this.#records.get(approvalKey(rotation, wave));
    if (r && r.approvedAt === undefined) Object.assign(r, { approvedBy: by, approvedAt: at });
    return Promise.resolve(r && structuredClone(r));
  }

  pending(): Promise<ApprovalRecord[]> {
    const open = [...this.#records.values()].filter((r) => r.approvedAt === undefined);
    return Promise.resolve(
      structuredClone(open.sort((a, b) => a.since.localeCompare(b.since)).slice(0, MAX_LISTED_APPROVALS)),
    );
  }

  forget(rotation: string): Promise<void> {
    for (const [k, r] of this.#records) if (r.rotation === rotation) this.#records.delete(k);
    return Promise.resolve();
  }
}

const approvalKey = (rotation: string, wave: number): string => `${rotation}\u0000${wave}`;

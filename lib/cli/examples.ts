/**
 * Two or three examples per command, as kubectl and helm print them under `--help`: what it does, then the command
 * line. Shown in each command's `--help` and in the CLI reference (docs/reference/cli.md). Kept beside the specs,
 * not in them, so an example changes without touching a flag list. test/unit/cli/specs.test.ts checks every
 * command has some, and that each one parses.
 */

/** An example: what it does, and the command line (after `vault-rollout`). */
export type Example = readonly [what: string, line: string];

export const EXAMPLES: Readonly<Record<string, readonly Example[]>> = {
  plan: [
    ['Which workloads would the changes in an audit log restart?', 'plan --routes routes.yaml --input vault-audit.log'],
    [
      'The same from standard input, as JSON',
      'tail -n 100 vault-audit.log | vault-rollout plan --routes routes.yaml -o json',
    ],
  ],
  apply: [
    [
      'Restart what the changes route to, and follow each rollout to its end',
      'apply --routes routes.yaml --input changes.ndjson --wait',
    ],
    [
      'Try it first: a server-side dry-run of every patch',
      'apply --routes routes.yaml --input changes.ndjson --dry-run',
    ],
    ['Follow each rollout for at most 5 minutes', 'apply --routes routes.yaml --input changes.ndjson --timeout 5m'],
  ],
  doctor: [
    ['Check credentials, reachability and permissions in every cluster of the table', 'doctor --routes routes.yaml'],
    ['The same, quietly (only problems on stderr)', 'doctor --routes routes.yaml -q'],
  ],
  import: [
    [
      'Turn what two clusters already use (VSO, ESO, Reloader) into a routing table',
      'import --cluster prod-eu=eu.kubeconfig --cluster prod-us=us.kubeconfig --file routes.yaml',
    ],
    [
      'Only the External Secrets of one namespace, printed as JSON',
      'import --cluster dev=dev.kubeconfig --from eso -n payments -o json',
    ],
  ],
  serve: [
    ['Receive the change feed and restart, on this machine', 'serve --routes routes.yaml'],
    [
      'Listen on every address, with the status page',
      'serve --routes routes.yaml --host 0.0.0.0 --port 8787 --status-page',
    ],
    ['Plan and patch nothing (server-side dry-run), to watch what it would do', 'serve --routes routes.yaml --dry-run'],
  ],
  worker: [
    [
      'Take rollout messages from an SQS queue',
      'worker --routes routes.yaml --queue-url https://sqs.eu-west-1.amazonaws.com/123456789012/vault-rollout.fifo',
    ],
    [
      'Four pollers, with Prometheus metrics on port 9090',
      'worker --routes routes.yaml --queue-url "$QUEUE_URL" --concurrency 4 --metrics-port 9090',
    ],
  ],
  relay: [
    [
      'Follow a file audit device and send its changes to serve',
      'relay --audit-file /var/log/vault/audit.log --to http://127.0.0.1:8787',
    ],
    [
      'Subscribe to KV events of one Vault namespace (Vault Enterprise, OpenBao)',
      'relay --vault-addr "$VAULT_ADDR" --events "kv-v2/*" --vault-namespace team-a --to "$FUNCTION_URL"',
    ],
  ],
  'reset-version': [
    [
      "Record Vault's current version 7 on every workload the path's routes target",
      'reset-version --routes routes.yaml --path secret/payments/db --version 7',
    ],
    [
      'See first what it would change',
      'reset-version --routes routes.yaml --path secret/payments/db --version 7 --dry-run',
    ],
  ],
  status: [
    [
      'May the old credential be revoked? Every routed path, from what the clusters record',
      'status --routes routes.yaml',
    ],
    [
      "One path, against Vault's current version, waiting up to 10 minutes until all is current",
      'status --routes routes.yaml --vault-addr "$VAULT_ADDR" --path secret/payments/db --wait --timeout 10m',
    ],
    ['The status page, written whole to a file', 'status --routes routes.yaml -o html --file status.html'],
  ],
  notify: [
    ['Send a test notification to every sink of the table', 'notify test --routes routes.yaml'],
    [
      "The same with the sinks' secrets from a file of environment variables",
      'env $(cat sinks.env) vault-rollout notify test --routes routes.yaml',
    ],
  ],
  approve: [
    ['The waves waiting for approval', 'approve --list'],
    ['Approve wave 2 of a rotation, as the request names it', 'approve 3f9a1c2b7d4e5f60 --wave 2'],
  ],
  halts: [
    ["The rotations a wave's gate halted", 'halts'],
    ['Clear a halt once its cause is fixed', 'halts clear 3f9a1c2b7d4e5f60'],
  ],
  reconcile: [
    [
      "Restart whatever is behind Vault's current versions",
      'reconcile --routes routes.yaml --vault-addr https://vault.example.com:8200',
    ],
    [
      'See first what it would restart',
      'reconcile --routes routes.yaml --vault-addr https://vault.example.com:8200 --dry-run',
    ],
  ],
  validate: [
    ['Check a routing table', 'validate routes.yaml'],
    ['The problems as JSON, for a script or an editor (exit 1 when there are some)', 'validate routes.yaml -o json'],
  ],
  schema: [
    ['The JSON Schema, for an editor', 'schema > routing-table.schema.json'],
    ['The same as YAML', 'schema -o yaml'],
  ],
  'admission-policy': [
    ['The policy for a table, applied with kubectl', 'admission-policy --routes routes.yaml | kubectl apply -f -'],
    [
      'Bound another user than the shipped identities',
      'admission-policy --routes routes.yaml --user system:serviceaccount:ops:vault-rollout',
    ],
  ],
  completion: [
    ['Complete vault-rollout in this bash', 'source <(vault-rollout completion bash)'],
    ['Install the zsh completion', 'vault-rollout completion zsh > "${fpath[1]}/_vault-rollout"'],
  ],
};

/** The full command line of an example, as typed (a line that names vault-rollout itself is kept as it is). */
export const exampleLine = (l: string): string => (/(^|\s|<\()vault-rollout /.test(l) ? l : `vault-rollout ${l}`);

/** A command's examples as `--help` prints them: `  # what` then `  vault-rollout line`. */
export function examplesText(command: string): string {
  const examples = EXAMPLES[command] ?? [];
  if (examples.length === 0) return '';
  return `\nExamples:\n${examples.map(([what, l]) => `  # ${what}\n  ${exampleLine(l)}`).join('\n\n')}\n`;
}

#!/usr/bin/env node
/** `vault-rollout <command>`: the CLI entry. Each command is a function of (argv, io) returning an exit code. */
import { EXIT, type CliIo, nodeIo } from './io.ts';
import { VERSION } from './version.ts';

type Command = (argv: string[], io: CliIo) => Promise<number>;

/**
 * Each command's module is imported when it runs, not before: `serve` starts without loading the AWS SDK clients
 * that `reconcile` or `import` need (seconds of start-up on a small machine, paid again at every restart).
 */
const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  plan: async () => (await import('./plan-command.ts')).planCommand,
  apply: async () => (await import('./apply-command.ts')).applyCommand,
  doctor: async () => (await import('./doctor-command.ts')).doctorCommand,
  validate: async () => (await import('./validate-command.ts')).validateCommand,
  schema: async () => (await import('./schema-command.ts')).schemaCommand,
  serve: async () => (await import('./serve-command.ts')).serveCommand,
  relay: async () => (await import('./relay-command.ts')).relayCommand,
  worker: async () => (await import('./worker-command.ts')).workerCommand,
  'reset-version': async () => (await import('./reset-version-command.ts')).resetVersionCommand,
  status: async () => (await import('./status-command.ts')).statusCommand,
  halts: async () => (await import('./halts-command.ts')).haltsCommand,
  notify: async () => (await import('./notify-command.ts')).notifyCommand,
  'admission-policy': async () => (await import('./admission-policy-command.ts')).admissionPolicyCommand,
  import: async () => (await import('./import-command.ts')).importCommand,
  reconcile: async () => (await import('./reconcile-command.ts')).reconcileCommand,
};

export const USAGE = `Usage: vault-rollout <command> [options]
       vault-rollout --version

Commands:
  plan      --routes FILE [--input FILE|-] [--format auto|audit|event|cloudwatch|fluent-bit|vector] [--json]
            Read Vault change records and show which workloads would restart. Exit 0 when every record was
            understood, 2 when some could not be parsed (the others are still planned), 1 on a bad routing table.
  apply     --routes FILE [--input FILE|-] [--format ...] [--dry-run] [--json] [--wait|--no-wait] [--timeout 10m]
            Plan, then restart the targets in every cluster (server-side dry-run with --dry-run). Prints a result
            per workload: restarted, unchanged, skipped, dry-run or failed with its reason. With --wait (the default
            on a terminal and when the table has rollout.waves) follows each rollout to complete, failed or timeout
            (deadline: --timeout, else the routing table's, else 10m), with live progress on stderr. Waves run one
            after another here, each gate decided as the queue's gates decide it; a failed gate halts the rotation
            (see halts). --no-wait refuses a rotation with waves. Exit 0 when all is well, 3 when a restart failed
            or a halt refused the rotation, 4 when a rollout failed or timed out or a gate halted, 2 when some
            record could not be parsed.
  doctor    --routes FILE [--json]
            Per cluster: credentials, reachability and version, who we are, and whether we may get, list and
            patch each targeted kind in each targeted namespace and create events; whether the admission policy
            (admission-policy) is installed, enforced and covers the table. Exit 1 on any problem.
  import    --cluster NAME=KUBECONFIG... [--label NAME:KEY=VALUE]... [--from vso,eso,reloader] [-o FILE]
            [--vault-addr URL] [--namespace NS]... [--vso-operator-namespace vault-secrets-operator-system]
            Read, with list permission only, the VaultStaticSecrets, ExternalSecrets (Vault stores) and Reloader
            annotations of the clusters and write a routing table doing the same job in all of them; what cannot
            be mapped is listed on stderr and as comments. Exit 1 when a cluster cannot be read, two objects read
            one mount with different KV versions, or the table written does not validate.
  serve     [--routes FILE] [--port 8787] [--host 127.0.0.1] [--insecure-no-auth] [--dry-run] [--request-timeout 30]
            [--queue-file PATH] [--max-connections 256] [--loops 4] [--i-understand-unauthenticated-access]
            [--status-page [--status-refresh 30]]
            The HTTP intake of the Lambda function on this machine, with a durable local queue and worker: 202 once
            the change is on disk (SQLite; default $VAULT_ROLLOUT_QUEUE_FILE, else
            $XDG_STATE_HOME or ~/.local/state, /vault-rollout/serve-queue.sqlite).
            Authentication from VAULT_ROLLOUT_WEBHOOK_SECRET (HMAC) and/or VAULT_ROLLOUT_WEBHOOK_TOKEN (bearer);
            without either it refuses to start unless told --insecure-no-auth, and on a --host other than loopback
            it refuses that too unless also told --i-understand-unauthenticated-access. --loops: workers side by
            side (1-32). Rollouts are followed out of line (VAULT_ROLLOUT_FOLLOW=off only patches), a watch waking
            each held continuation when its rollout ends (VAULT_ROLLOUT_WATCH=off: seen at the next look).
            GET /metrics: Prometheus, no authentication (counts, cluster and enum labels only).
            --status-page: GET /status, the fleet status page (status's data as HTML, refreshed every
            --status-refresh seconds), behind the webhook's authentication (bearer token, also as a browser's
            Basic password; or a signed empty body). Off without the flag.
  worker    --routes FILE --queue-url URL [--dlq-url URL] [--concurrency 4] [--batch-size auto] [--dry-run]
            [--metrics-port PORT [--metrics-host 127.0.0.1]]
            The SQS queue consumer outside Lambda: receive, restart, delete what succeeded; failures come back after
            the visibility timeout and end in the dead-letter queue. AWS_ENDPOINT_URL_SQS overrides the endpoint.
            --metrics-port: GET /metrics for Prometheus there (no authentication; loopback unless --metrics-host).
  relay     [--audit-file PATH [--from-start]] [--audit-listen unix:///PATH|tcp://HOST:PORT [--audit-listen-mode 0600]]
            [--vault-addr URL --events kv-v1/*,kv-v2/* [--namespaces a,b] [--filter EXPR] [--vault-redirect-hosts H,…]]
            --to FUNCTION-URL|SQS-QUEUE-URL [--to-auth auto|app|iam] [--to-sqs] [--routes FILE] [--spool DIR]
            [--spool-max-mb N] [--grace-seconds 10] [--batch-wait-ms 1000] [--i-understand-unauthenticated-access]
            [--metrics-port PORT [--metrics-host 127.0.0.1]]
            Ship Vault's change feed (file or socket audit device, event notifications) to the function, signed
            with VAULT_ROLLOUT_WEBHOOK_SECRET (and/or bearer VAULT_ROLLOUT_WEBHOOK_TOKEN), or plan here with
            --routes and queue on SQS. Every batch is spooled on disk first and delivered in order; runs until
            SIGTERM/SIGINT. Vault token: VAULT_TOKEN, or VAULT_ROLE_ID + VAULT_SECRET_ID (AppRole).
  reset-version --routes FILE --path MOUNT/KEY --version N [--namespace VAULT-NS] [--cluster NAME]... [--dry-run] [--json]
            Repair a poisoned record: record version N (Vault's current_version of the path) on every workload the
            path's routes target, replacing a higher recorded version. Each workload whose record changes restarts
            once. Exit 0, or 3 when a target failed.
  status    --routes FILE [--path PATTERN] [--cluster NAME]... [--vault-addr URL] [--output text|json|html]
            [--file F] [--wait [--timeout 15m]]
            May the old credential be revoked? Per routed path recorded in the clusters: Vault's current version
            (with --vault-addr or VAULT_ADDR; token VAULT_TOKEN or VAULT_ROLE_ID + VAULT_SECRET_ID), and per cluster
            and workload the recorded version, rollout state and pods on the new template; BEHIND, FAILED, HALTED,
            POISONED stand out. Exit 0 when every consumer is current and complete, 1 otherwise. --wait polls until
            then (live on a terminal) or the timeout. --json is --output json; --output html is the status page
            that serve --status-page serves; --file writes the output there (whole, by rename) instead of stdout.
  notify    test --routes FILE [--json]
            Send a sample notification to each sink of the routing table's notifications (secrets from the
            environment) and report per sink: sent, failed, or not usable. Exit 0 when every sink took it.
  halts     [list] [--json] | clear ROTATION
            The rotations a wave's gate halted (apply, serve, worker and Lambda record them in one store:
            VAULT_ROLLOUT_STATE_TABLE, VAULT_ROLLOUT_STATE_DB, else $XDG_STATE_HOME or ~/.local/state,
            /vault-rollout/rotations.sqlite). While halted, no path restarts those versions anywhere: not the queue,
            not reconcile, not apply. clear resumes it: the next change or reconcile starts again from wave 1.
  reconcile --routes FILE [--dry-run] [--vault-addr URL] [--queue-url URL] [--max-paths N] [--json]
            Expand every route against Vault's KV v2 metadata (never data/), compare each path's current version
            with what each workload records, and restart what is behind through the queue (SQS with --queue-url or
            VAULT_ROLLOUT_QUEUE_URL, else worked here). Workloads whose pods started after the version was created
            are recorded, never restarted. KV v1 routes are reported: reconcile cannot see their changes. Vault
            auth: VAULT_TOKEN[_FILE|_SSM], VAULT_ROLE_ID + VAULT_SECRET_ID (AppRole, also *_SSM), or VAULT_AWS_ROLE
            (AWS IAM). Exit 0, 1 when a path, route or workload could not be read, 3 when a restart failed.
  validate  FILE
            Check a routing table. Exit 0, or 1 with every problem (file:line:column: field: message).
  schema    Print the routing table's JSON Schema (infra/routes/routing-table.schema.json is this output).
  admission-policy --routes FILE [--user NAME]... [--group NAME]...
            Print the ValidatingAdmissionPolicy (and binding) that lets the identity change only what a restart
            writes, only in the namespaces the routes target each kind in (a warning on stderr for a kind some
            target reaches in every namespace). infra/rbac/admission-policy.yaml is this output for
            infra/routes/example.yaml.
`;

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(USAGE);
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  if (name === '--version' || name === 'version') {
    io.stdout(`vault-rollout ${VERSION}\n`);
    return EXIT.ok;
  }
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) {
    io.stderr(`vault-rollout: unknown command "${name}"\n\n${USAGE}`);
    return EXIT.usage;
  }
  return (await load())(rest, io);
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2), nodeIo());
}

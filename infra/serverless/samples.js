// The sample values serverless.yml and infra/routes/ ship with, refused at packaging: a stack deployed with them has
// a reconcile that fails every 15 minutes against a Vault at example.com, alarms that go to an account that is not
// yours, and a routing table of clusters that do not exist. Each refusal names the param and the --param that sets
// it (docs/how-to/deploy-to-lambda.md, "Before the first deploy"). `--param samples=allow` packages the samples
// knowingly: the packaging tests and benchmarks, or a look at the template before anything is real.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { URL } from 'node:url';

const SERVICE_DIR = resolve(import.meta.dirname, '..', '..');

/** The AWS account id of every sample ARN (AWS's own documentation uses it). */
export const SAMPLE_ACCOUNT = '123456789012';
/** The line that marks a routing table under infra/routes/ as a sample; removing it says the table is yours. */
export const SAMPLE_TABLE_MARKER = '# vault-rollout sample table';

/** RFC 2606 names: example.com, .org, .net, any subdomain of them, and the .example top-level domain. */
const EXAMPLE_HOST = /(^|\.)example\.(com|org|net)$|\.example$/i;

const hostOf = (value) => {
  try {
    return new URL(value).hostname;
  } catch {
    return String(value)
      .replace(/^[^@]*@/, '')
      .replace(/[:/].*$/, '');
  }
};

export const isExampleHost = (value) => EXAMPLE_HOST.test(hostOf(value));

/** Whether `--param samples=allow` was given (default: refuse). */
export async function samplesAllowed(resolveVariable) {
  const value = String((await resolveVariable('param:samples')) || 'refuse');
  if (value !== 'allow' && value !== 'refuse')
    throw new Error(`param samples "${value}": give refuse (the default) or allow`);
  return value === 'allow';
}

/** One refusal: which param, why, and the --param that sets it without editing serverless.yml. */
export function sampleRefusal(param, value, why, example) {
  return new Error(`param ${param}: ${value} is ${why}; set yours with --param "${param}=${example}"`);
}

/** vaultAddr (and the aws login's header value): reconcile logs in there every 15 minutes. */
export function vaultSampleProblems({ vaultAddr, vaultAuth, vaultAwsHeaderValue }) {
  const problems = [];
  if (isExampleHost(vaultAddr))
    problems.push(
      sampleRefusal(
        'vaultAddr',
        vaultAddr,
        'the sample address (example.com), where reconcile would log in every 15 minutes',
        'https://vault.your-domain:8200',
      ),
    );
  if (vaultAuth === 'aws' && vaultAwsHeaderValue && isExampleHost(vaultAwsHeaderValue)) {
    problems.push(
      sampleRefusal(
        'vaultAwsHeaderValue',
        vaultAwsHeaderValue,
        "the sample name (example.com), not your aws auth mount's iam_server_id_header_value",
        'vault.your-domain',
      ),
    );
  }
  return problems;
}

/** alarmTarget: an SNS topic of the sample account, or an address at example.com. */
export function alarmSampleProblems(alarmTarget) {
  const target = String(alarmTarget);
  if (target.split(':')[4] === SAMPLE_ACCOUNT)
    return [
      sampleRefusal(
        'alarmTarget',
        target,
        `an SNS topic of the sample account ${SAMPLE_ACCOUNT}`,
        'arn:aws:sns:REGION:ACCOUNT:TOPIC',
      ),
    ];
  if (target.includes('@') && isExampleHost(target))
    return [sampleRefusal('alarmTarget', target, 'the sample address (example.com)', 'oncall@your-domain')];
  return [];
}

/** routes: a table still marked as a sample, or naming the sample account (line numbers from 1). */
export function routesSampleProblems(routes, text) {
  const lines = String(text).split('\n');
  const marked = lines.findIndex((line) => line.startsWith(SAMPLE_TABLE_MARKER));
  if (marked >= 0) {
    return [
      sampleRefusal(
        'routes',
        routes,
        `the sample routing table (its line ${marked + 1} says "${SAMPLE_TABLE_MARKER}": once the clusters and routes there are yours, delete that line)`,
        'path/to/your-routes.yaml',
      ),
    ];
  }
  const account = lines.findIndex((line) => !line.trimStart().startsWith('#') && line.includes(`:${SAMPLE_ACCOUNT}:`));
  if (account >= 0)
    return [
      sampleRefusal(
        'routes',
        routes,
        `a routing table whose line ${account + 1} names the sample account ${SAMPLE_ACCOUNT}`,
        'path/to/your-routes.yaml',
      ),
    ];
  return [];
}

/** Every sample value of the stage: the Vault params given, alarmTarget, and the routing table (read here). */
export async function sampleValueProblems(resolveVariable, vault) {
  const [alarmTarget, routes] = await Promise.all([
    resolveVariable('param:alarmTarget'),
    resolveVariable('param:routes'),
  ]);
  const text = await readFile(resolve(SERVICE_DIR, String(routes)), 'utf8');
  return [
    ...vaultSampleProblems(vault),
    ...alarmSampleProblems(alarmTarget),
    ...routesSampleProblems(String(routes), text),
  ];
}

/** Throws every problem at once, one per line, unless the samples are allowed. */
export async function refuseSamples(resolveVariable, problems) {
  if (problems.length === 0 || (await samplesAllowed(resolveVariable))) return;
  throw new Error(
    `the stage still has sample values:\n${problems.map((p) => `    - ${p.message}`).join('\n')}\n` +
      '  Give each for this stage with --param NAME=VALUE on the npm run package (and osls deploy) command line, no edit of ' +
      'serverless.yml needed (docs/how-to/deploy-to-lambda.md, "Before the first deploy"); --param samples=allow packages the samples knowingly.',
  );
}

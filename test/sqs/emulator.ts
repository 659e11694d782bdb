/**
 * A local SQS for the tests: ElasticMQ, reached over real AWS SDK calls on 127.0.0.1.
 *
 * Why ElasticMQ: it implements what the rollout queue relies on — FIFO message groups (a group with a message in
 * flight is blocked, the others are not), explicit and content-based deduplication that also holds after the
 * first copy was deleted, RedrivePolicy to a FIFO dead-letter queue after maxReceiveCount, SendMessageBatch
 * (10-entry limit enforced) and ChangeMessageVisibility. moto 5.2.5 was tried too and queues a re-sent
 * deduplication id again once the first copy is deleted, which is the case that matters here.
 * ElasticMQ does not enforce the 256 KiB total of a batch call; the tests check that split on the calls made.
 *
 * Installed once into ${XDG_CACHE_HOME:-~/.cache}/vault-rollout/elasticmq-<version>/lib (its jars from Maven
 * Central through `mvn dependency:copy-dependencies`, each checked against the SHA-256 pinned in
 * test/maven/elasticmq-server_2.13-<version>.sha256; needs java >= 11 and mvn on PATH), reused while its
 * stamp is there and its jars still match. Started on a free loopback port; `stop()` ends the JVM's process group. Fails loudly —
 * never skips — when it cannot be installed or started.
 */
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  closeSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient, type SQSClientConfig } from '@aws-sdk/client-sqs';
import { pinProblems, pinsFileOf, readPins } from '../maven/pinned-artifacts.ts';

export const ELASTICMQ_VERSION = '1.7.1';
const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1';
export const EMULATOR_REGION = 'us-east-1';
export const EMULATOR_ACCOUNT = '000000000000';

export interface SqsEmulator {
  /** e.g. http://127.0.0.1:40123 */
  endpoint: string;
  /** Time spent installing (0 when the cache was warm) and starting, in ms. */
  installMs: number;
  startMs: number;
  stop(): Promise<void>;
}

export const emulatorCacheDir = (): string =>
  join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'vault-rollout', `elasticmq-${ELASTICMQ_VERSION}`);

/** Installs ElasticMQ into the per-user cache unless it is there already; returns its jar directory. */
export const installElasticMq = (): Promise<string> =>
  installFromMaven(
    emulatorCacheDir(),
    { groupId: 'org.elasticmq', artifactId: 'elasticmq-server_2.13', version: ELASTICMQ_VERSION },
    `ElasticMQ ${ELASTICMQ_VERSION}`,
  );

/**
 * Installs a Maven artifact and its runtime dependencies into `dir`/lib (also used for DynamoDB Local), unless its
 * `complete` stamp is there; returns the lib directory. Every file is checked against the SHA-256 pins in
 * test/maven/<artifactId>-<version>.sha256 (test/maven/pin.sh writes them): after the download, before anything
 * runs it, and again each time a cached copy is used. Maven itself runs with strict checksums.
 */
export async function installFromMaven(
  dir: string,
  artifact: { groupId: string; artifactId: string; version: string },
  what: string,
): Promise<string> {
  const pinsFile = pinsFileOf(artifact);
  if (!existsSync(pinsFile))
    throw new Error(
      `${what}: no pinned checksums in ${pinsFile}; write them with test/maven/pin.sh ${artifact.groupId}:${artifact.artifactId}:${artifact.version}`,
    );
  const pins = readPins(pinsFile);
  const lib = join(dir, 'lib');
  if (existsSync(join(dir, 'complete'))) {
    const problems = pinProblems(lib, pins, 'flat');
    if (problems.length > 0)
      throw new Error(
        `${what} cached in ${dir} does not match ${pinsFile}; delete ${dir} to install it again:\n${problems.slice(0, 20).join('\n')}`,
      );
    return lib;
  }

  // Build in a private directory and rename it into place, so a concurrent or interrupted install never leaves
  // a half-filled cache that looks complete.
  mkdirSync(join(dir, '..'), { recursive: true });
  // A directory without the stamp is a leftover of an older layout or a manual copy: replace it.
  rmSync(dir, { recursive: true, force: true });
  const work = mkdtempSync(`${dir}.install-`);
  try {
    writeFileSync(
      join(work, 'pom.xml'),
      `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.vault-rollout</groupId>
  <artifactId>${artifact.artifactId}-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>${artifact.groupId}</groupId><artifactId>${artifact.artifactId}</artifactId><version>${artifact.version}</version></dependency>
  </dependencies>
</project>
`,
    );
    // Repository layout: each file keeps its group's path, so the pins name it unambiguously.
    const download = join(work, 'download');
    const { code, output } = await run('mvn', [
      '-B',
      '-q',
      '--strict-checksums',
      '-f',
      join(work, 'pom.xml'),
      `${DEPENDENCY_PLUGIN}:copy-dependencies`,
      `-DoutputDirectory=${download}`,
      '-DincludeScope=runtime',
      '-Dmdep.useRepositoryLayout=true',
    ]);
    if (code !== 0) throw new Error(`installing ${what} with Maven failed (exit ${code}):\n${output.slice(-4000)}`);
    const problems = pinProblems(download, pins, 'repository');
    if (problems.length > 0)
      throw new Error(
        `${what} as downloaded does not match ${pinsFile}; not installed:\n${problems.slice(0, 20).join('\n')}`,
      );
    mkdirSync(join(work, 'lib'));
    for (const pin of pins) renameSync(join(download, ...pin.path.split('/')), join(work, 'lib', basename(pin.path)));
    rmSync(download, { recursive: true, force: true });
    writeFileSync(join(work, 'complete'), `${new Date().toISOString()}\n`);
    try {
      renameSync(work, dir);
    } catch (error) {
      // Another install finished first: use it.
      if (!existsSync(join(dir, 'complete'))) throw error;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return lib;
}

/** Installs (when needed) and starts ElasticMQ on a free 127.0.0.1 port, resolving once it answers. */
export async function startSqsEmulator(): Promise<SqsEmulator> {
  const installStarted = performance.now();
  const lib = await installElasticMq();
  const installMs = performance.now() - installStarted;

  const started = performance.now();
  let lastError: unknown;
  // A free port can be taken between probing and binding; try a few.
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const port = await freeLoopbackPort();
      const { endpoint, stop } = await launch(lib, port);
      return { endpoint, stop, installMs, startMs: performance.now() - started };
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError instanceof Error ? lastError : new Error('ElasticMQ did not start');
}

async function launch(lib: string, port: number): Promise<{ endpoint: string; stop(): Promise<void> }> {
  const runDir = mkdtempSync(join(tmpdir(), 'vault-rollout-elasticmq-'));
  const config = join(runDir, 'elasticmq.conf');
  const logFile = join(runDir, 'elasticmq.log');
  writeFileSync(
    config,
    `include classpath("application.conf")
node-address { protocol = http, host = "127.0.0.1", port = ${port}, context-path = "" }
generate-node-address = false
rest-sqs { enabled = true, bind-port = ${port}, bind-hostname = "127.0.0.1", sqs-limits = strict }
rest-stats { enabled = false }
aws { region = ${EMULATOR_REGION}, accountId = "${EMULATOR_ACCOUNT}" }
`,
  );
  const log = openSync(logFile, 'w');
  // detached: its own process group, so stop() ends the JVM and anything it started.
  const child = spawn(
    'java',
    [
      '-Xmx256m',
      '-XX:+UseSerialGC',
      '-XX:TieredStopAtLevel=1',
      `-Dconfig.file=${config}`,
      '-cp',
      join(lib, '*'),
      'org.elasticmq.server.Main',
    ],
    {
      detached: true,
      stdio: ['ignore', log, log],
    },
  );
  closeSync(log);
  let exited = false;
  let spawnError: Error | undefined;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    child.once('error', (error) => {
      spawnError = error;
      exited = true;
      resolve();
    });
  });
  // If the test process ends without afterAll (a crash, Ctrl-C), leave no JVM behind.
  const killOnExit = (): void => killGroup(child.pid, 'SIGKILL');
  process.once('exit', killOnExit);

  const stop = async (): Promise<void> => {
    process.removeListener('exit', killOnExit);
    if (!exited) {
      killGroup(child.pid, 'SIGTERM');
      const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), 5000);
      await exit;
      clearTimeout(timer);
    }
    rmSync(runDir, { recursive: true, force: true });
  };

  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  while (!(await answers(endpoint))) {
    if (exited || Date.now() > deadline) {
      const output = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4000) : '';
      await stop();
      const why = spawnError
        ? `could not run java: ${spawnError.message}`
        : exited
          ? 'exited'
          : 'did not answer within 60 s';
      throw new Error(`ElasticMQ ${ELASTICMQ_VERSION} on ${endpoint} ${why}\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { endpoint, stop };
}

export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    /* already gone */
  }
}

/** True once the emulator answers an SQS query-protocol ListQueues with 200. */
function answers(endpoint: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(`${endpoint}/?Action=ListQueues`, { timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** A loopback port nothing listens on right now (also used by the tests as a closed port). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function run(command: string, args: readonly string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (error) =>
      reject(
        new Error(`could not run ${command} (needed to install a test emulator from Maven Central): ${error.message}`, {
          cause: error,
        }),
      ),
    );
    child.once('close', (code) => resolve({ code, output }));
  });
}

/** The SQSClient options that point the AWS SDK at the emulator: dummy credentials, no real AWS reached. */
export function emulatorClientConfig(endpoint: string): SQSClientConfig {
  return {
    endpoint,
    region: EMULATOR_REGION,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 2,
    requestHandler: { connectionTimeout: 1000, requestTimeout: 5000 },
  };
}

export const emulatorClient = (endpoint: string, overrides: SQSClientConfig = {}): SQSClient =>
  new SQSClient({ ...emulatorClientConfig(endpoint), ...overrides });

export interface FifoQueuePair {
  queueUrl: string;
  deadLetterQueueUrl: string;
  deadLetterQueueArn: string;
}

/** A FIFO queue whose RedrivePolicy sends a message to its own FIFO dead-letter queue after maxReceiveCount receives. */
export async function createFifoQueueWithDlq(
  client: SQSClient,
  options: { name: string; maxReceiveCount?: number; visibilityTimeoutSeconds?: number },
): Promise<FifoQueuePair> {
  const dlq = await client.send(
    new CreateQueueCommand({ QueueName: `${options.name}-dlq.fifo`, Attributes: { FifoQueue: 'true' } }),
  );
  const deadLetterQueueUrl = required(dlq.QueueUrl, 'dead-letter QueueUrl');
  const attributes = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: deadLetterQueueUrl, AttributeNames: ['QueueArn'] }),
  );
  const deadLetterQueueArn = required(attributes.Attributes?.QueueArn, 'dead-letter QueueArn');
  const queue = await client.send(
    new CreateQueueCommand({
      QueueName: `${options.name}.fifo`,
      Attributes: {
        FifoQueue: 'true',
        VisibilityTimeout: String(options.visibilityTimeoutSeconds ?? 30),
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: deadLetterQueueArn,
          maxReceiveCount: options.maxReceiveCount ?? 3,
        }),
      },
    }),
  );
  return { queueUrl: required(queue.QueueUrl, 'QueueUrl'), deadLetterQueueUrl, deadLetterQueueArn };
}

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`the emulator's answer has no ${what}`);
  return value;
}

/**
 * A local DynamoDB for the tests: Amazon's DynamoDB Local, reached over real AWS SDK calls on 127.0.0.1.
 *
 * Installed once into ${XDG_CACHE_HOME:-~/.cache}/vault-rollout/dynamodb-local-<version>/lib from Maven Central
 * (com.amazonaws:DynamoDBLocal and its dependencies, with sqlite4java's native libraries, through
 * `mvn dependency:copy-dependencies`; needs java >= 17 and mvn on PATH), like ElasticMQ (test/sqs/emulator.ts), and
 * reused while its stamp is there and its files match test/maven/DynamoDBLocal-<version>.sha256. Started `-inMemory`
 * on a free loopback port with its telemetry off (`-disableTelemetry` and DDB_LOCAL_TELEMETRY=0: it would otherwise
 * report usage to AWS from every test run); `stop()` ends the JVM's process group. Fails loudly — never skips —
 * when it cannot be installed or started.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DynamoDBClient,
  ListTablesCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { freeLoopbackPort, installFromMaven, killGroup } from '../sqs/emulator.ts';

export const DYNAMODB_LOCAL_VERSION = '2.6.1';

export interface DynamoDbLocal {
  endpoint: string;
  client(): DynamoDBClient;
  stop(): Promise<void>;
}

const cacheDir = (): string =>
  join(
    process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'),
    'vault-rollout',
    `dynamodb-local-${DYNAMODB_LOCAL_VERSION}`,
  );

/** Installs DynamoDB Local into the per-user cache unless it is there already; returns its jar directory. */
export const installDynamoDbLocal = (): Promise<string> =>
  installFromMaven(
    cacheDir(),
    { groupId: 'com.amazonaws', artifactId: 'DynamoDBLocal', version: DYNAMODB_LOCAL_VERSION },
    `DynamoDB Local ${DYNAMODB_LOCAL_VERSION}`,
  );

const clientFor = (endpoint: string): DynamoDBClient =>
  new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 2,
    requestHandler: { connectionTimeout: 1000, requestTimeout: 5000 },
  });

/** The java command line and environment that run DynamoDB Local from `lib` on `port`: in memory, telemetry off. */
export function dynamoDbLocalCommand(
  lib: string,
  port: number,
  env: NodeJS.ProcessEnv = process.env,
): { args: string[]; env: NodeJS.ProcessEnv } {
  return {
    args: [
      '-Xmx256m',
      '-XX:+UseSerialGC',
      '-XX:TieredStopAtLevel=1',
      `-Djava.library.path=${lib}`,
      '-cp',
      join(lib, '*'),
      'com.amazonaws.services.dynamodbv2.local.main.ServerRunner',
      '-inMemory',
      '-disableTelemetry',
      '-port',
      String(port),
    ],
    env: { ...env, DDB_LOCAL_TELEMETRY: '0' },
  };
}

/** Installs (when needed) and starts DynamoDB Local on a free 127.0.0.1 port, resolving once it answers. */
export async function startDynamoDbLocal(): Promise<DynamoDbLocal> {
  const lib = await installDynamoDbLocal();
  const port = await freeLoopbackPort();
  const runDir = mkdtempSync(join(tmpdir(), 'vault-rollout-dynamodb-'));
  const logFile = join(runDir, 'dynamodb.log');
  const log = openSync(logFile, 'w');
  const command = dynamoDbLocalCommand(lib, port);
  // Its own directory as the working directory: DynamoDB Local writes dynamodb-local-metadata.json there.
  const child = spawn('java', command.args, {
    cwd: runDir,
    detached: true,
    stdio: ['ignore', log, log],
    env: command.env,
  });
  closeSync(log);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => ((exited = true), resolve()));
    child.once('error', () => ((exited = true), resolve()));
  });
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
  const probe = clientFor(endpoint);
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await probe.send(new ListTablesCommand({}));
      break;
    } catch {
      if (exited || Date.now() > deadline) {
        const output = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(-4000) : '';
        await stop();
        throw new Error(
          `DynamoDB Local ${DYNAMODB_LOCAL_VERSION} on ${endpoint} ${exited ? 'exited' : 'did not answer within 60 s'}\n${output}`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  probe.destroy();
  return { endpoint, client: () => clientFor(endpoint), stop };
}

/** Creates a slot table as serverless.yml declares it (key pk/sk, TTL on `ttl`). */
export async function createSlotTable(client: DynamoDBClient, name: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: name,
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
      ],
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  await client.send(
    new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true } }),
  );
}

/**
 * Creates a rotation-state table as serverless.yml declares RotationStateTable: key pk/sk, TTL on `ttl`, and the
 * sparse index `outbox-due` (outboxDue, dueAt; keys only) that `vault-rollout worker`'s notification loop queries.
 */
export async function createRotationStateTable(client: DynamoDBClient, name: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: name,
      AttributeDefinitions: [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
        { AttributeName: 'outboxDue', AttributeType: 'S' },
        { AttributeName: 'dueAt', AttributeType: 'N' },
      ],
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      GlobalSecondaryIndexes: [
        {
          IndexName: 'outbox-due',
          KeySchema: [
            { AttributeName: 'outboxDue', KeyType: 'HASH' },
            { AttributeName: 'dueAt', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'KEYS_ONLY' },
        },
      ],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  await client.send(
    new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true } }),
  );
}

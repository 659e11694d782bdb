// A local AWS emulator for the tests: moto's server (PyPI `moto[server]`, installed by test/aws/setup-moto.sh into a
// venv under ~/.cache/vault-rollout/moto-<version>-<hash>/) on a free 127.0.0.1 port. Vault's `aws` auth method is
// pointed at it as its STS endpoint. If the install or the start fails, this throws: the test fails, never skips.
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { REPO_ROOT } from '../vault/server.ts';

export interface MotoServer {
  url: string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => ok(port));
    });
  });
}

export async function startMotoServer(): Promise<MotoServer> {
  const setup = spawnSync('bash', [join(REPO_ROOT, 'test/aws/setup-moto.sh')], { encoding: 'utf8', timeout: 600_000 });
  if (setup.status !== 0)
    throw new Error(
      `test/aws/setup-moto.sh failed (exit ${setup.status ?? setup.signal}):\n${(setup.stderr ?? '').slice(-4000)}`,
    );
  const bin = setup.stdout.trim().split('\n').at(-1) ?? '';
  const port = await freePort();
  const child = spawn(bin, ['-H', '127.0.0.1', '-p', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString('utf8')).slice(-8000)));
  const kill = (signal: NodeJS.Signals) => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  };
  const onExit = () => kill('SIGKILL');
  process.once('exit', onExit);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`moto_server exited (${child.exitCode}):\n${stderr}`);
    const up = await fetch(`${url}/moto-api/`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) {
      kill('SIGKILL');
      throw new Error(`moto_server did not answer on ${url} within 30 s:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    stop: async () => {
      process.removeListener('exit', onExit);
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      kill('SIGTERM');
      const timer = setTimeout(() => kill('SIGKILL'), 5000);
      await gone;
      clearTimeout(timer);
    },
  };
}

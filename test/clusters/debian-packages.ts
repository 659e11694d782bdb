// The Debian packages the real node and the registry run on (test/clusters/real-node.ts, registry.ts), installed by
// `clusters:up` when missing, as root with apt-get (as test/integration/chromium.ts does for chromium). When that is
// impossible it throws and says what to run: the clusters never start without them, and no test skips.
import { spawnSync } from 'node:child_process';

/** containerd 1.6 and runc 1.1 (CRI), the CNI plugins (bridge, host-local, loopback), iptables and conntrack for
 * kube-proxy, ipset for kube-router's NetworkPolicy firewall, socat for the host side of the node's link,
 * Distribution's registry, and the static busybox the test images are made of. */
export const NODE_PACKAGES = [
  'containerd',
  'runc',
  'containernetworking-plugins',
  'iptables',
  'conntrack',
  'ipset',
  'socat',
  'docker-registry',
  'busybox-static',
] as const;

function run(command: string, args: string[]): { ok: boolean; output: string } {
  const r = spawnSync(command, args, {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: 600_000,
  });
  return { ok: r.status === 0, output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error?.message ?? ''}` };
}

const installed = (name: string): boolean =>
  run('dpkg-query', ['-W', '-f=${Status}', name]).output.trim() === 'install ok installed';

/** Installs the missing ones of `names`; returns the ones it installed. */
export function ensureDebianPackages(names: readonly string[] = NODE_PACKAGES): string[] {
  const missing = names.filter((n) => !installed(n));
  if (missing.length === 0) return [];
  const steps: string[] = [];
  for (const [command, args] of [
    ['apt-get', ['update']],
    ['apt-get', ['install', '-y', '--no-install-recommends', ...missing]],
  ] as const) {
    const { ok, output } = run(command, [...args]);
    steps.push(`$ ${command} ${args.join(' ')}\n${output.slice(-800)}`);
    if (!ok) break;
  }
  const still = missing.filter((n) => !installed(n));
  if (still.length > 0) {
    throw new Error(
      `the real test node needs Debian's ${still.join(', ')} and could not install them; run ` +
        `\`apt-get install -y ${still.join(' ')}\` as root.\n${steps.join('\n')}`,
    );
  }
  return missing;
}

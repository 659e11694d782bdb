/**
 * Secrets hygiene, over everything the test suites printed (test/hygiene/capture.ts collects it): no webhook
 * secret, bearer token, EKS token, private key or kubeconfig key data may appear in any log line or error. The
 * check runs after all suites and fails the run, naming the file and line — never the secret.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CAPTURE_MARKER, OUTPUT_DIR } from './hygiene/capture.ts';
import { TEST_SECRETS } from './secrets.ts';
import { CLUSTERS_DIR } from './clusters/kube-http.ts';

interface Needle {
  what: string;
  test: (line: string) => boolean;
}

/** Distinctive pieces of every private key and kubeconfig the test clusters and suites created. */
function keyMaterial(root: string): Needle[] {
  const needles: Needle[] = [];
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.key')) {
        const body = readFileSync(path, 'utf8')
          .split('\n')
          .find((l) => /^[A-Za-z0-9+/]{40,}/.test(l));
        if (body) needles.push({ what: `private key ${path}`, test: (line) => line.includes(body.slice(0, 40)) });
      } else if (entry.name.endsWith('.kubeconfig')) {
        const data = /client-key-data:\s*(\S{40})/.exec(readFileSync(path, 'utf8'))?.[1];
        if (data) needles.push({ what: `client-key-data of ${path}`, test: (line) => line.includes(data) });
      }
    }
  };
  walk(root);
  return needles;
}

const PATTERNS: Needle[] = [
  { what: 'a PEM private key', test: (line) => /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(line) },
  { what: 'an EKS bearer token', test: (line) => /k8s-aws-v1\.[A-Za-z0-9_-]{40,}/.test(line) },
  { what: 'kubeconfig key data', test: (line) => /client-key-data:\s*[A-Za-z0-9+/]{40,}/.test(line) },
];

export default function setup(): () => void {
  rmSync(OUTPUT_DIR, { recursive: true, force: true });
  mkdirSync(OUTPUT_DIR, { recursive: true });
  return () => {
    const needles = [
      ...TEST_SECRETS.map((s) => ({
        what: 'a test secret from test/secrets.ts',
        test: (line: string) => line.includes(s),
      })),
      ...PATTERNS,
      ...keyMaterial(CLUSTERS_DIR),
    ];
    const files = readdirSync(OUTPUT_DIR).filter((f) => f.endsWith('.log'));
    const found: string[] = [];
    let lines = 0;
    let captured = 0;
    for (const f of files) {
      const text = readFileSync(join(OUTPUT_DIR, f), 'utf8');
      if (text.startsWith(CAPTURE_MARKER)) captured++;
      text.split('\n').forEach((line, i) => {
        lines++;
        for (const n of needles) if (n.test(line)) found.push(`${f}:${i + 1}: ${n.what}`);
      });
    }
    if (captured === 0)
      throw new Error(
        `secrets hygiene: no test worker captured its output into ${OUTPUT_DIR}; the capture in test/hygiene/capture.ts is not working`,
      );
    if (found.length > 0)
      throw new Error(
        `secrets hygiene: secret material in the test output (${OUTPUT_DIR}):\n${found.slice(0, 50).join('\n')}`,
      );
    process.stdout.write(
      `secrets hygiene: ${lines} lines of test output from ${files.length} workers checked against ${needles.length} secrets and patterns: none found\n`,
    );
  };
}

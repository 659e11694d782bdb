import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import {
  parseChallenge,
  parseImageReference,
  registryBaseUrl,
  registryCredentials,
} from '../../../tools/image/push.ts';

describe('npm run image -- --push: the reference', () => {
  it.each([
    ['127.0.0.1:5000/vault-rollout:dev', { registry: '127.0.0.1:5000', repository: 'vault-rollout', tag: 'dev' }],
    [
      'registry.example.com/team/vault-rollout:0.1.0',
      { registry: 'registry.example.com', repository: 'team/vault-rollout', tag: '0.1.0' },
    ],
    ['localhost/vault-rollout', { registry: 'localhost', repository: 'vault-rollout', tag: 'latest' }],
    ['[::1]:5000/a/b:v1', { registry: '[::1]:5000', repository: 'a/b', tag: 'v1' }],
  ])('%s', (text, expected) => {
    expect(parseImageReference(text)).toEqual(expected);
  });

  it.each([
    ['vault-rollout:dev', /name the registry/],
    ['docker.io', /name the registry/],
    ['127.0.0.1:5000/Vault-Rollout:dev', /not a repository name/],
    ['127.0.0.1:5000/vault-rollout:bad tag', /not a tag/],
    ['127.0.0.1:5000/vault-rollout@sha256:00', /needs a tag, not a digest/],
    [`127.0.0.1:5000/${'a'.repeat(600)}`, /longer than 512/],
  ])('rejects %s, saying why', (text, why) => {
    expect(() => parseImageReference(text)).toThrow(why);
  });

  it('speaks plain HTTP to a loopback registry only', () => {
    expect(registryBaseUrl('127.0.0.1:16442')).toBe('http://127.0.0.1:16442');
    expect(registryBaseUrl('localhost:5000')).toBe('http://localhost:5000');
    expect(registryBaseUrl('[::1]:5000')).toBe('http://[::1]:5000');
    expect(registryBaseUrl('127.example.com')).toBe('https://127.example.com');
    expect(registryBaseUrl('registry.example.com:443')).toBe('https://registry.example.com:443');
  });
});

describe('npm run image -- --push: credentials', () => {
  it('reads the Bearer challenge', () => {
    expect(
      parseChallenge(
        'Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a:pull"',
      ),
    ).toEqual({
      scheme: 'bearer',
      params: { realm: 'https://auth.example.com/token', service: 'registry.example.com', scope: 'repository:a:pull' },
    });
    expect(parseChallenge('Basic realm="Registry"').scheme).toBe('basic');
  });

  it("takes the registry's entry from docker login's file, and none for another registry", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'push-test-'));
    writeFileSync(
      join(dir, 'config.json'),
      JSON.stringify({ auths: { 'registry.example.com': { auth: Buffer.from('ci:pw').toString('base64') } } }),
    );
    const env = { DOCKER_CONFIG: dir, HOME: dir };
    expect(await registryCredentials('registry.example.com', env)).toBe('ci:pw');
    expect(await registryCredentials('other.example.com', env)).toBeUndefined();
  });
});

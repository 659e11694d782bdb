/** Which keys a consumer uses: the Secret keys its pod template reads, and the Vault keys behind them. */
import { describe, expect, it } from 'vitest';
import { agentTemplateKeys, secretKeysRead, vaultKeysOf } from '../../../lib/workloads/consumed-keys.ts';

const env = (name: string, key?: string) => ({
  name: 'E',
  valueFrom: { secretKeyRef: { name, ...(key === undefined ? {} : { key }) } },
});

describe('secretKeysRead', () => {
  it.each([
    [
      'secretKeyRef keys of containers and init containers',
      { containers: [{ env: [env('db', 'PASS'), env('other', 'X')] }], initContainers: [{ env: [env('db', 'USER')] }] },
      ['PASS', 'USER'],
    ],
    [
      'items of a secret volume and a projected source',
      {
        volumes: [
          { secret: { secretName: 'db', items: [{ key: 'a', path: 'a' }] } },
          { projected: { sources: [{ secret: { name: 'db', items: [{ key: 'b', path: 'b' }] } }] } },
        ],
      },
      ['a', 'b'],
    ],
    [
      'envFrom: every key',
      { containers: [{ envFrom: [{ secretRef: { name: 'db' } }], env: [env('db', 'PASS')] }] },
      'all',
    ],
    ['a mount without items: every key', { volumes: [{ secret: { secretName: 'db' } }] }, 'all'],
    [
      'a projected source without items: every key',
      { volumes: [{ projected: { sources: [{ secret: { name: 'db' } }] } }] },
      'all',
    ],
    ['a secretKeyRef without a key: every key', { containers: [{ env: [env('db')] }] }, 'all'],
    [
      'nothing of this Secret: every key (never a skip on no evidence)',
      { containers: [{ env: [env('other', 'X')] }] },
      'all',
    ],
  ])('%s', (_name, spec, expected) => {
    expect(secretKeysRead(spec, 'db')).toEqual(expected);
  });
});

describe('vaultKeysOf', () => {
  const es = (spec: Record<string, unknown>) => ({ spec });
  const data = [
    { secretKey: 'PASS', remoteRef: { key: 'app/db', property: 'password' } },
    { secretKey: 'CFG', remoteRef: { key: 'app/db', property: 'config.port' } },
    { secretKey: 'RAW', remoteRef: { key: 'app/db' } },
  ];
  it.each([
    ['ESO: each Secret key through its remoteRef.property', 'ExternalSecret', es({ data }), ['PASS'], ['password']],
    [
      'ESO: a gjson property names its first segment',
      'ExternalSecret',
      es({ data }),
      ['CFG', 'PASS'],
      ['config', 'password'],
    ],
    ['ESO: no property = the whole secret', 'ExternalSecret', es({ data }), ['RAW'], 'all'],
    ['ESO: a Secret key no data entry writes', 'ExternalSecret', es({ data }), ['NOPE'], 'all'],
    ['ESO: dataFrom', 'ExternalSecret', es({ data, dataFrom: [{ extract: { key: 'app/db' } }] }), ['PASS'], 'all'],
    [
      'ESO: a target template',
      'ExternalSecret',
      es({ data, target: { template: { data: { x: '{{ .password }}' } } } }),
      ['PASS'],
      'all',
    ],
    [
      'VSO: one to one',
      'VaultStaticSecret',
      es({ destination: { name: 'db' } }),
      ['password', 'username'],
      ['password', 'username'],
    ],
    ['VSO: _raw is the whole secret', 'VaultStaticSecret', es({ destination: { name: 'db' } }), ['_raw'], 'all'],
    [
      'VSO: a transformation',
      'VaultStaticSecret',
      es({ destination: { name: 'db', transformation: { templates: { x: { text: '{{ .Secrets.password }}' } } } } }),
      ['x'],
      'all',
    ],
    ['every Secret key stays every key', 'ExternalSecret', es({ data }), 'all', 'all'],
  ] as const)('%s', (_name, kind, object, secretKeys, expected) => {
    expect(vaultKeysOf(kind, object, secretKeys === 'all' ? 'all' : [...secretKeys])).toEqual(expected);
  });
});

describe('agentTemplateKeys (Vault Agent injector annotations)', () => {
  const A = 'vault.hashicorp.com/';
  const inject = (name: string, path: string, template?: string) => ({
    [`${A}agent-inject-secret-${name}`]: path,
    ...(template === undefined ? {} : { [`${A}agent-inject-template-${name}`]: template }),
  });
  it.each([
    [
      '.Data.data.<key> of a template naming the path (data/ form)',
      inject(
        'db',
        'secret/data/app/db',
        '{{ with secret "secret/data/app/db" }}{{ .Data.data.password }}:{{ index .Data.data "api-key" }}{{ end }}',
      ),
      ['api-key', 'password'],
    ],
    [
      'every template of the pod counts (one may read the path with secret "…")',
      {
        ...inject('db', 'secret/data/app/db', '{{ with secret "secret/data/app/db" }}{{ .Data.data.user }}{{ end }}'),
        ...inject('other', 'secret/data/x', '{{ with secret "secret/data/app/db" }}{{ .Data.data.token }}{{ end }}'),
      },
      ['token', 'user'],
    ],
    ['no template: the whole secret', inject('db', 'secret/data/app/db'), 'all'],
    [
      'a range over the data',
      inject(
        'db',
        'secret/data/app/db',
        '{{ with secret "secret/data/app/db" }}{{ range $k, $v := .Data.data }}{{ $k }}{{ end }}{{ end }}',
      ),
      'all',
    ],
    [
      'toJSON of the data',
      inject('db', 'secret/data/app/db', '{{ with secret "secret/data/app/db" }}{{ .Data.data | toJSON }}{{ end }}'),
      'all',
    ],
    [
      'a key name the dot form cannot end at',
      inject('db', 'secret/data/app/db', '{{ with secret "secret/data/app/db" }}{{ .Data.data.a.b }}{{ end }}'),
      'all',
    ],
    [
      'a Vault namespace annotation',
      { ...inject('db', 'secret/data/app/db', '{{ .Data.data.password }}'), [`${A}namespace`]: 'team-a' },
      'all',
    ],
    [
      'a template file',
      {
        ...inject('db', 'secret/data/app/db', '{{ .Data.data.password }}'),
        [`${A}agent-inject-template-file-db`]: '/vault/t.ctmpl',
      },
      'all',
    ],
    ['no annotation names the path', inject('db', 'secret/data/other', '{{ .Data.data.password }}'), undefined],
  ])('%s', (_name, annotations, expected) => {
    expect(agentTemplateKeys(annotations, 'secret/app/db')).toEqual(expected);
  });
});

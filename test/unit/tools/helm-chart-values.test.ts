// The chart's values as a user meets them: README.md's table of values is what tools/helm/readme.ts writes from
// values.yaml's comments (every key described), and values.schema.json knows exactly the keys of values.yaml, accepts
// its defaults and refuses a misspelt key. Helm itself applies the schema in test/integration/helm-chart.test.ts.
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { documented, valueKeys, withValuesTable } from '../../../tools/helm/readme.ts';
import { readRepoFile } from '../../helpers.ts';

const valuesText = readRepoFile('infra/helm/vault-rollout/values.yaml');
const readme = readRepoFile('infra/helm/vault-rollout/README.md');
interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
}
const schema = JSON.parse(readRepoFile('infra/helm/vault-rollout/values.schema.json')) as Schema;

/** The schema's closed objects' keys, as dotted paths (Helm's `global` aside). */
function schemaKeys(s: Schema, prefix: string[] = []): string[] {
  if (s.additionalProperties !== false || !s.properties) return [];
  return Object.entries(s.properties)
    .filter(([k]) => !(prefix.length === 0 && k === 'global'))
    .flatMap(([k, child]) => [[...prefix, k].join('.'), ...schemaKeys(child, [...prefix, k])]);
}

describe('infra/helm/vault-rollout values', () => {
  it('README.md holds the table of values that values.yaml gives (node tools/helm/readme.ts)', () => {
    expect(readme).toBe(withValuesTable(readme, valuesText));
    expect(readme).toContain('| `image.repository` | `""` | Where you pushed the image');
  });

  it('describes every key of values.yaml', () => {
    expect(() => documented(valuesText)).not.toThrow();
  });

  it('values.schema.json lists exactly the keys of values.yaml, and closes every object values.yaml describes', () => {
    const fromValues = valueKeys(valuesText).map((k) => k.path.join('.'));
    expect(schemaKeys(schema).sort()).toEqual(fromValues.sort());
  });

  it('values.schema.json accepts the defaults and refuses a misspelt key or a wrong type', () => {
    const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
    const defaults = parse(valuesText) as Record<string, Record<string, unknown>>;
    expect(validate(defaults), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...defaults, image: { ...defaults.image, respository: 'r' } })).toBe(false);
    expect(validate.errors?.[0]).toMatchObject({
      instancePath: '/image',
      params: { additionalProperty: 'respository' },
    });
    expect(validate({ ...defaults, networkPolicy: { enabled: 'yes' } })).toBe(false);
    expect(validate({ ...defaults, statusPage: { refreshSeconds: 2 } })).toBe(false);
  });
});

describe('tools/helm/readme.ts', () => {
  it.each([
    [
      'a comment above, and one after the value',
      '# The a.\na:\n  # Its b.\n  b: 1 # in units\n',
      [
        ['a', 'The a.', false],
        ['a.b', 'Its b. in units', true],
      ],
    ],
    [
      'a map whose keys have no comment is one value',
      '# R.\nr:\n  requests: { cpu: 1 }\n  limits: {}\n',
      [['r', 'R.', true]],
    ],
    [
      'a blank line ends a comment block',
      '# header\n\n# K.\nk: 1\n#  - example\n\n# L.\nl: 2\n',
      [
        ['k', 'K.', true],
        ['l', 'L.', true],
      ],
    ],
  ])('%s', (_, text, keys) => {
    expect(valueKeys(text).map((k) => [k.path.join('.'), k.description, k.leaf])).toEqual(keys);
  });

  it('refuses a key without a description, naming it', () => {
    expect(() => documented('# A.\na:\n  # B.\n  b: 1\n  c: 2\n')).toThrow('values.yaml: no comment above a.c');
  });

  it('refuses a README without its markers', () => {
    expect(() => withValuesTable('# chart\n', '# K.\nk: 1\n')).toThrow('markers');
  });
});

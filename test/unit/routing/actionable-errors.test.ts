/**
 * Routing-table errors a person can act on, from "first contact works as written": kubectl's words (unknown field,
 * required field, unsupported value, did you mean) at the line and column of what is wrong, one problem per typo,
 * YAML syntax errors on their own line, and the CLI's duration grammar.
 */
import { describe, expect, it } from 'vitest';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { problemsOf } from './problems.ts';

const cluster = '  a: { kubeconfig: { env: A } }\n';
/** A table whose one route's match and target lines are given; the target is line 6. */
const table = (match: string, target: string): string =>
  `clusters:\n${cluster}routes:\n  - name: app\n    match: ${match}\n    targets:\n      - ${target}\n`;
const target = '{ clusters: [a], namespace: ns, kind: Deployment, name: app }';

describe('routing-table errors', () => {
  it.each([
    [
      'a misspelt cluster field, with the field meant',
      'clusters:\n  a: { kubeconfig: { env: A }, lables: { env: prod } }\n',
      ['routes.yaml:2:32: clusters.a.lables: unknown field "lables" (did you mean "labels"?)'],
    ],
    [
      'a misspelt required field as one problem, at the key',
      table('{ paht: "secret/app" }', target),
      ['routes.yaml:5:14: routes[0].match.paht: unknown field "paht" (did you mean "path"?)'],
    ],
    [
      'a misspelt name as one problem, not also "give exactly one of name, selector…"',
      table('{ path: "secret/app" }', '{ clusters: [a], namespace: ns, kind: Deployment, nmae: app }'),
      ['routes.yaml:7:59: routes[0].targets[0].nmae: unknown field "nmae" (did you mean "name"?)'],
    ],
    [
      'a misspelt kind field as one problem, judged against workload targets (not sync or resource ones)',
      table('{ path: "secret/app" }', '{ clusters: [a], namespace: ns, knid: Deployment, name: app }'),
      ['routes.yaml:7:41: routes[0].targets[0].knid: unknown field "knid" (did you mean "kind"?)'],
    ],
    [
      'a misspelt field of a sync target',
      table('{ path: "secret/app" }', '{ clusters: [a], namespace: ns, sync: { kind: ExternalSecret, nme: x } }'),
      ['routes.yaml:7:71: routes[0].targets[0].sync.nme: unknown field "nme" (did you mean "name"?)'],
    ],
    [
      'a misspelt patch of a resource target',
      table(
        '{ path: "secret/app" }',
        '{ clusters: [a], resource: { apiVersion: v1, kind: X, name: y }, pach: { a: 1 } }',
      ),
      ['routes.yaml:7:74: routes[0].targets[0].pach: unknown field "pach" (did you mean "patch"?)'],
    ],
    [
      'an unknown field near no known one, without a guess',
      `clusters:\n${cluster}colour: blue\n`,
      ['routes.yaml:3:1: colour: unknown field "colour"'],
    ],
    [
      'a required field left out',
      table('{ operations: [write] }', target),
      ['routes.yaml:5:12: routes[0].match.path: required field "path" is missing'],
    ],
    [
      'a kind misspelt, with the nearest kind',
      table('{ path: "secret/app" }', '{ clusters: [a], namespace: ns, kind: Deployement, name: app }'),
      [
        'routes.yaml:7:47: routes[0].targets[0].kind: unsupported value "Deployement" (did you mean "Deployment"?); supported values: "Deployment", "StatefulSet", "DaemonSet", "Rollout", "CronJob"',
      ],
    ],
    [
      'a value of the wrong type',
      table('{ path: "secret/app" }', '{ clusters: [a], namespace: 7, kind: Deployment, name: app }'),
      ['routes.yaml:7:37: routes[0].targets[0].namespace: expected a string, got a number'],
    ],
    [
      'a misspelt cluster name, with the cluster meant',
      table('{ path: "secret/app" }', '{ clusters: [aa], namespace: ns, kind: Deployment, name: app }'),
      ['routes.yaml:7:21: routes[0].targets[0].clusters: unknown cluster "aa" (did you mean "a"?); defined: a'],
    ],
    [
      'a tab on line 4 at line 4',
      'clusters:\n  a:\n    kubeconfig: { env: A }\n\tlabels: {}\n',
      ['routes.yaml:4:1: YAML syntax: Tabs are not allowed as indentation'],
    ],
    [
      'a duplicate key at its line',
      'clusters:\n  a: { kubeconfig: { env: A } }\nroutes: []\nroutes: []\n',
      ['routes.yaml:4:1: YAML syntax: Map keys must be unique'],
    ],
    [
      'a duration without a unit as one problem, with the unit to add',
      'clusters:\n  a: { kubeconfig: { env: A }, rolloutTimeout: 90 }\n',
      ['routes.yaml:2:48: clusters.a.rolloutTimeout: use a unit: 90s'],
    ],
    [
      'a duration that is not one as one problem',
      'clusters:\n  a: { kubeconfig: { env: A }, rolloutTimeout: 1.5m }\n',
      ['routes.yaml:2:48: clusters.a.rolloutTimeout: must be a duration such as 500ms, 30s, 10m, 1h or 1m30s'],
    ],
    [
      'a duration out of range as one problem',
      'clusters:\n  a: { kubeconfig: { env: A }, rolloutTimeout: 25h }\n',
      ['routes.yaml:2:48: clusters.a.rolloutTimeout: must be between 1s and 24h'],
    ],
  ])('reports %s', (_name, text, expected) => {
    expect(problemsOf(text)).toEqual(expected);
  });

  it('lists problems in the order of the text', () => {
    const text = `clusters:\n  a: { kubeconfig: { env: A }, lables: {} }\n  b: { kubeconfig: { env: B }, rolloutTimeout: 1x }\n`;
    expect(problemsOf(text)).toEqual([
      'routes.yaml:2:32: clusters.a.lables: unknown field "lables" (did you mean "labels"?)',
      'routes.yaml:3:48: clusters.b.rolloutTimeout: must be a duration such as 500ms, 30s, 10m, 1h or 1m30s',
    ]);
  });

  it('takes the durations the CLI takes: 1m30s, 1h30m, 500ms', () => {
    const loaded = loadRoutingTable(
      `clusters:\n  a: { kubeconfig: { env: A }, rolloutTimeout: 1m30s }\nrollout: { timeout: 1h30m, settle: 500ms }\n`,
    );
    expect(loaded.rolloutTimeoutMs).toBe(5_400_000);
    expect(loaded.clusters.get('a')?.rolloutTimeout).toBe('1m30s');
  });
});

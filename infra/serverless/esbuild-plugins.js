// esbuild plugins for the Lambda bundles (serverless.yml custom.esbuild.plugins). They keep each bundle under the
// 1.5 MB goal without changing any code path vault-rollout takes:
// - @kubernetes/client-node's modules are declared free of side effects, so esbuild keeps only what is imported
//   (KubeConfig, ApiException, PatchStrategy) instead of the whole generated API (its package.json declares no
//   "sideEffects", so esbuild must assume every module has some);
// - `undici`, imported by client-node for code paths vault-rollout never takes, becomes shims/undici.js;
// - zod's 60-odd error-message locales become the one it configures, English;
// - the routing table's YAML loader gets shims/yaml-routing.js for `yaml`: the functions load the compiled table, so
//   the intake functions carry no YAML parser (the worker keeps it, for kubeconfigs).
import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

const SHIMS = resolve(import.meta.dirname, 'shims');

const CLIENT_NODE = /[\\/]node_modules[\\/]@kubernetes[\\/]client-node[\\/]/;

const isFile = (path) => {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

export const clientNodeTreeShaking = {
  name: 'vault-rollout:client-node-side-effect-free',
  setup(build) {
    // The package entry, resolved by esbuild itself (package.json "exports"), then marked.
    build.onResolve({ filter: /^@kubernetes\/client-node$/ }, async (args) => {
      if (args.pluginData?.clientNode) return undefined;
      const result = await build.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: { clientNode: true },
      });
      return result.errors.length > 0 ? { errors: result.errors } : { ...result, sideEffects: false };
    });
    // Its modules import each other by relative file paths ("./config.js"); anything else is left to esbuild.
    build.onResolve({ filter: /^\.\.?\// }, (args) => {
      if (!CLIENT_NODE.test(args.importer)) return undefined;
      const path = resolve(dirname(args.importer), args.path);
      return isFile(path) ? { path, sideEffects: false } : undefined;
    });
  },
};

export const undiciShim = {
  name: 'vault-rollout:undici-shim',
  setup(build) {
    build.onResolve({ filter: /^undici$/ }, () => ({ path: resolve(SHIMS, 'undici.js') }));
  },
};

export const zodEnglishOnly = {
  name: 'vault-rollout:zod-english-only',
  setup(build) {
    build.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]node_modules[\\/]zod[\\/]/.test(args.importer) ? { path: resolve(SHIMS, 'zod-locales.js') } : undefined,
    );
  },
};

const ROUTING_YAML_LOADER = /[\\/]lib[\\/]routing[\\/]table-problems\.ts$/;

export const routingYamlShim = {
  name: 'vault-rollout:routing-yaml-shim',
  setup(build) {
    build.onResolve({ filter: /^yaml$/ }, (args) =>
      ROUTING_YAML_LOADER.test(args.importer) ? { path: resolve(SHIMS, 'yaml-routing.js') } : undefined,
    );
  },
};

export default [clientNodeTreeShaking, undiciShim, zodEnglishOnly, routingYamlShim];

// Bundle-time stand-in for the `undici` package inside the Lambda bundles (see esbuild-plugins.js).
//
// @kubernetes/client-node 2.x imports undici (about 750 KB minified, much of it WebAssembly) for its fetch-based
// generated clients, watches and proxies. vault-rollout uses none of them: it takes the TLS material and credentials
// from KubeConfig.applyToHTTPSOptions and sends its requests with node:https (lib/kube/kube-api.ts). What remains
// reachable, KubeConfig's dispatcher factory, fails loudly here instead of silently behaving differently.
const unavailable = (what) =>
  class {
    constructor() {
      throw new Error(
        `undici ${what} is not bundled in vault-rollout's Lambda functions; use KubeConfig.applyToHTTPSOptions with node:https (infra/serverless/shims/undici.js)`,
      );
    }
  };

export const Agent = unavailable('Agent');
export const ProxyAgent = unavailable('ProxyAgent');
export const EnvHttpProxyAgent = unavailable('EnvHttpProxyAgent');
export const Pool = unavailable('Pool');
export const Client = unavailable('Client');
export const Dispatcher = unavailable('Dispatcher');
// Node's own fetch (undici inside Node) serves any plain fetch. Nothing here touches Node's fetch globals while the
// bundle loads: the first access makes Node load its internal undici, about 10 ms of every cold start.
export const fetch = (...args) => globalThis.fetch(...args);

/**
 * The kubeconfig document of a kubeconfig source, checked before client-node sees it: parsed as YAML, stripped of
 * every user's token file, loaded, then the one context, its user and its server picked and checked, and reduced to a
 * KubeConfig holding only them. Errors are KubeconfigSourceError: the caller puts the cluster and source in front.
 */
import { KubeConfig } from '@kubernetes/client-node';
import type { Cluster, Context, User } from '@kubernetes/client-node';
import { LineCounter, parseDocument } from 'yaml';

/** What failed, said once by the caller with the cluster and source in front. */
export class KubeconfigSourceError extends Error {
  override readonly name = 'KubeconfigSourceError';
}

/** The user's raw entry as written, before client-node normalised (and dropped) fields. */
export type RawUser = Record<string, unknown>;

export const TOKEN_FILE_FIELDS = ['tokenFile', 'token-file'] as const;

/**
 * The kubeconfig is parsed here, checked, and only then handed to client-node, as JSON of exactly what was checked:
 * client-node's loadFromString reads each user's `token-file` while loading, before any later check could refuse it,
 * and handing it the checked document (not the text again) leaves no room for two YAML parsers to disagree.
 */
export function parseKubeconfig(text: string): { kubeConfig: KubeConfig; users: Map<string, RawUser> } {
  const lineCounter = new LineCounter();
  // Merge keys (`<<: *base`) as client-node's js-yaml reads them, so nothing hides behind one.
  const doc = parseDocument(text, { lineCounter, merge: true, prettyErrors: false });
  const yamlError = doc.errors[0];
  if (yamlError !== undefined) {
    // Position only: the parser's message quotes the offending line, which may hold a key or a token.
    const { line, col } = lineCounter.linePos(yamlError.pos[0]);
    throw new KubeconfigSourceError(`is not valid YAML (line ${line}, column ${col}); fix the YAML`);
  }
  let document: unknown;
  try {
    document = doc.toJS();
  } catch {
    // e.g. more aliases than the parser's bound (a "billion laughs" document)
    throw new KubeconfigSourceError(NOT_A_KUBECONFIG);
  }
  const users = withoutTokenFiles(document);
  const kubeConfig = new KubeConfig();
  try {
    kubeConfig.loadFromString(JSON.stringify(document ?? null));
  } catch (error) {
    // No cause on purpose: a parser's error may quote the offending lines, which may hold keys or tokens.
    throw new KubeconfigSourceError(describeLoadFailure(error));
  }
  // loadFromString accepts any YAML (a list, a scalar, nothing) and just finds no entries in it.
  if (kubeConfig.getClusters().length === 0 && kubeConfig.getContexts().length === 0)
    throw new KubeconfigSourceError(NOT_A_KUBECONFIG);
  return { kubeConfig, users };
}

/**
 * Takes `token-file` (client-node's spelling) and `tokenFile` (kubectl's) out of every user, in place, so client-node
 * opens no file while loading; returns each user's entry as written (with them), for the selected user's checks.
 */
function withoutTokenFiles(document: unknown): Map<string, RawUser> {
  const raw = new Map<string, RawUser>();
  const users = (document as { users?: unknown } | null)?.users;
  if (!Array.isArray(users)) return raw;
  for (const entry of users as unknown[]) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { name, user } = entry as { name?: unknown; user?: unknown };
    if (typeof user !== 'object' || user === null) continue;
    if (typeof name === 'string' && !raw.has(name)) raw.set(name, { ...(user as RawUser) });
    for (const field of TOKEN_FILE_FIELDS) delete (user as RawUser)[field];
  }
  return raw;
}

const NOT_A_KUBECONFIG = 'is not a valid kubeconfig; expected a YAML mapping with clusters, contexts and users';
const MISSING_FIELD = /^(clusters|contexts|users)\[\d+\]\.[a-z.]+ is missing$/;

function describeLoadFailure(error: unknown): string {
  if (error instanceof Error && MISSING_FIELD.test(error.message)) return `is not a valid kubeconfig: ${error.message}`;
  return NOT_A_KUBECONFIG;
}

export function selectContext(kubeConfig: KubeConfig, wanted: string | undefined): Context {
  const contextName = wanted ?? kubeConfig.getCurrentContext();
  if (contextName === undefined || contextName === '') {
    throw new KubeconfigSourceError(
      'names no context; set `context` for the cluster in the routing table or current-context in the kubeconfig',
    );
  }
  const context = kubeConfig.getContextObject(contextName);
  if (context === null) {
    const known =
      kubeConfig
        .getContexts()
        .map((c) => c.name)
        .join(', ') || 'none';
    const where = wanted === undefined ? 'current-context' : "the routing table's context";
    throw new KubeconfigSourceError(`${where} ${contextName} is not in the kubeconfig (its contexts: ${known})`);
  }
  return context;
}

export function selectUser(kubeConfig: KubeConfig, context: Context): User {
  if (context.user === undefined || context.user === '') {
    throw new KubeconfigSourceError(
      `context ${context.name} names no user, so the cluster would be called anonymously; name a user with a token, client certificate or exec plugin`,
    );
  }
  const user = kubeConfig.getUser(context.user);
  if (user === null)
    throw new KubeconfigSourceError(
      `context ${context.name} names user ${context.user}, which the kubeconfig does not define`,
    );
  return user;
}

export function checkServer(server: string, skipTLSVerify: boolean): string {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new KubeconfigSourceError(
      'the cluster server is not a URL; set clusters[].cluster.server to https://host:port',
    );
  }
  if (url.username !== '' || url.password !== '') {
    throw new KubeconfigSourceError('the cluster server URL carries credentials; put them in the user entry instead');
  }
  const allowed = skipTLSVerify ? ['https:', 'http:'] : ['https:'];
  if (!allowed.includes(url.protocol)) {
    throw new KubeconfigSourceError(
      `the cluster server must be an https URL (got ${url.protocol}); TLS is required unless the routing table says insecureSkipTLSVerify: true`,
    );
  }
  return server;
}

/** A KubeConfig holding only the selected context, so no other user's credentials travel further. */
export function reducedKubeConfig(context: Context, cluster: Cluster, user: User): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [cluster],
    users: [user],
    contexts: [context],
    currentContext: context.name,
  });
  return kubeConfig;
}

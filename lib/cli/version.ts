/**
 * The version `vault-rollout --version` prints: package.json's, imported (not read from disk at run time) so that the
 * bundled CLI of the container image (tools/image/) carries it without a package.json beside it.
 */
import packageJson from '../../package.json' with { type: 'json' };

export const VERSION: string = packageJson.version;

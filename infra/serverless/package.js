// `npm run package -- --stage <dev|staging|prod> [--package DIR]`: osls package, offline.
// Writes the CloudFormation template and one zip per function (default .serverless/), with no AWS credentials
// and no network: packaging resolves no AWS-backed variables (no ${aws:…}, ${ssm:…}, ${cf:…}; account-specific ARNs
// are CloudFormation pseudo parameters), and the settings below keep the framework and the AWS SDK from reaching out.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';

const require = createRequire(import.meta.url);
const serviceDir = resolve(import.meta.dirname, '..', '..');
const osls = resolve(dirname(require.resolve('osls/package.json')), 'bin', 'serverless.js');

const env = {
  ...process.env,
  // osls 4 sends no telemetry and checks no updates; these keep older or patched Serverless builds quiet too.
  SLS_TELEMETRY_DISABLED: '1',
  SLS_TRACKING_DISABLED: '1',
  SLS_NOTIFICATIONS_MODE: 'off',
  SLS_INTERACTIVE_SETUP_DISABLE: '1',
  // Should anything build an AWS client anyway, it must not probe the EC2 metadata endpoint (a 1 s+ hang).
  AWS_EC2_METADATA_DISABLED: 'true',
  AWS_SDK_LOAD_CONFIG: '0',
};

const args = process.argv.slice(2);
const result = spawnSync(process.execPath, [osls, 'package', ...args], { cwd: serviceDir, env, stdio: 'inherit' });
if (result.error) throw result.error;
process.exit(result.status ?? 1);

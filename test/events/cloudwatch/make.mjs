// Generates the CloudWatch Logs subscription vectors (Lambda event shape):
//   {"awslogs":{"data":"<base64(gzip(JSON))>"}}
// Decoded payload shape: AWS CloudWatch Logs docs, "Using CloudWatch Logs subscription filters"
// (messageType, owner, logGroup, logStream, subscriptionFilters, logEvents[{id,timestamp,message}]).
// Each logEvents[].message is one raw Vault audit line (the file device's JSON line).
// Run from the repository root:  node test/events/cloudwatch/make.mjs
// Output is deterministic (gzip header mtime is 0 in Node's zlib).
import { gzipSync } from 'node:zlib';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');

const payloads = {
  'cloudwatch/data-message.json': {
    messageType: 'DATA_MESSAGE',
    owner: '123456789012',
    logGroup: '/vault/audit',
    logStream: 'i-0abc123def4567890',
    subscriptionFilters: ['vault-rollout'],
    logEvents: [
      {
        id: '17048545402230048216618249507670737589212572651317322215',
        timestamp: 1730988193512,
        message:
          '{"time":"2024-11-07T14:03:13.512357790Z","auth":{"accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","display_name":"approle","entity_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","metadata":{"role_name":"ci-deployer"},"policies":["default","ci-deployer"],"policy_results":{"allowed":true,"granting_policies":[{"name":"ci-deployer","namespace_id":"root","type":"acl"}]},"token_policies":["default","ci-deployer"],"token_issue_time":"2024-11-07T13:58:02Z","token_ttl":3600,"token_type":"service"},"request":{"client_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","client_token_accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","data":{"data":{"password":"hmac-sha256:f531e24c44d99eedd13c91f94df692f86bf493f27b16c67c98b727f3f86ee190","username":"hmac-sha256:edb675a106f8322f0af5bdc674d2cd9f112ee237befe13cffd8841870b18517f"}},"headers":{"user-agent":["vault-rollout-e2e/1.0 (+https://github.com/hashicorp/vault-client-go)"]},"id":"57924ac3-720f-483b-abc6-c4129929de7b","mount_accessor":"kv_efd09f28","mount_class":"secret","mount_point":"secret/","mount_running_version":"v0.20.0+builtin","mount_type":"kv","namespace":{"id":"root"},"operation":"update","path":"secret/data/payments/db","remote_address":"10.42.3.17","remote_port":53214},"response":{"data":{"created_time":"hmac-sha256:cbf1083a8fe7e6c0f86ab0cfa9759511915e08eb8099c0146fef118d9eec0881","custom_metadata":null,"deletion_time":"hmac-sha256:a7f684719d6c259de49a796a6eb7d12c6b296d825b2af4be5eec8e41ae0a4ac7","destroyed":false,"version":4},"mount_accessor":"kv_efd09f28","mount_class":"secret","mount_point":"secret/","mount_running_plugin_version":"v0.20.0+builtin","mount_type":"kv"},"type":"response"}',
      },
      {
        id: '33169865757789600288700046100222698413647461246588017177',
        timestamp: 1730988194512,
        message:
          '{"time":"2024-11-07T14:03:14.512365709Z","auth":{"accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","display_name":"approle","entity_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","metadata":{"role_name":"ci-deployer"},"policies":["default","ci-deployer"],"policy_results":{"allowed":true,"granting_policies":[{"name":"ci-deployer","namespace_id":"root","type":"acl"}]},"token_policies":["default","ci-deployer"],"token_issue_time":"2024-11-07T13:58:02Z","token_ttl":3600,"token_type":"service"},"request":{"client_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","client_token_accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","headers":{"user-agent":["vault-rollout-e2e/1.0 (+https://github.com/hashicorp/vault-client-go)"]},"id":"46198b06-b1e6-147c-befa-ecc1edc64d71","mount_accessor":"kv_efd09f28","mount_class":"secret","mount_point":"secret/","mount_running_version":"v0.20.0+builtin","mount_type":"kv","namespace":{"id":"root"},"operation":"read","path":"secret/data/payments/db","remote_address":"10.42.3.17","remote_port":53214},"response":{"data":{"data":{"password":"hmac-sha256:7a5c62c65297d8e9d5248f69e5a99909ed42832b8911f01e0076103250c01fe6"},"metadata":{"created_time":"hmac-sha256:c37f785ae7a4117aa91f2e0224b734e18c0aa7df2322b62d18ea3fd34a55c602","custom_metadata":null,"deletion_time":"hmac-sha256:a7f684719d6c259de49a796a6eb7d12c6b296d825b2af4be5eec8e41ae0a4ac7","destroyed":false,"version":4}},"mount_accessor":"kv_efd09f28","mount_class":"secret","mount_point":"secret/","mount_running_plugin_version":"v0.20.0+builtin","mount_type":"kv"},"type":"response"}',
      },
      {
        id: '11544228419731405571386999003418925811452311895921943349',
        timestamp: 1730988196512,
        message:
          '{"time":"2024-11-07T14:03:16.512373628Z","auth":{"accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","display_name":"approle","entity_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","metadata":{"role_name":"ci-deployer"},"policies":["default","ci-deployer"],"policy_results":{"allowed":true,"granting_policies":[{"name":"ci-deployer","namespace_id":"root","type":"acl"}]},"token_policies":["default","ci-deployer"],"token_issue_time":"2024-11-07T13:58:02Z","token_ttl":3600,"token_type":"service"},"request":{"client_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","client_token_accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","data":{"data":{"password":"hmac-sha256:d0ded7220f3d6e5510bda47bdfb4674eb9e3dcbe00d03af86181dace989b9cf2","username":"hmac-sha256:068f0f96011e32ac9f1ebba48d8bd9645c9c9fdf6f4e2d52885b5a610306c298"}},"headers":{"user-agent":["vault-rollout-e2e/1.0 (+https://github.com/hashicorp/vault-client-go)"]},"id":"e2d918ec-9c87-4c7a-43cf-3c52e30bad8b","mount_accessor":"kv_efd09f28","mount_class":"secret","mount_point":"secret/","mount_running_version":"v0.20.0+builtin","mount_type":"kv","namespace":{"id":"root"},"operation":"update","path":"secret/data/payments/db","remote_address":"10.42.3.17","remote_port":53214},"type":"request"}',
      },
    ],
  },
  'cloudwatch/control-message.json': {
    messageType: 'CONTROL_MESSAGE',
    owner: 'CloudwatchLogs',
    logGroup: '',
    logStream: '',
    subscriptionFilters: [],
    logEvents: [
      {
        id: '',
        timestamp: 1731000000000,
        message: 'CWL CONTROL MESSAGE: Checking health of destination Firehose.',
      },
    ],
  },
  'cloudwatch/namespace-mixed.json': {
    messageType: 'DATA_MESSAGE',
    owner: '123456789012',
    logGroup: '/vault/audit',
    logStream: 'vault-1/audit.log',
    subscriptionFilters: ['vault-rollout'],
    logEvents: [
      {
        id: '33471266444984675171531717987886226887411517363566327058',
        timestamp: 1730988197512,
        message:
          '{"time":"2024-11-07T14:03:17.512381547Z","auth":{"accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","display_name":"approle","entity_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","metadata":{"role_name":"ci-deployer"},"policies":["default","ci-deployer"],"policy_results":{"allowed":true,"granting_policies":[{"name":"ci-deployer","namespace_id":"abc12","namespace_path":"team-a/","type":"acl"}]},"token_policies":["default","ci-deployer"],"token_issue_time":"2024-11-07T13:58:02Z","token_ttl":3600,"token_type":"service"},"request":{"client_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","client_token_accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","data":{"versions":[3,4]},"headers":{"user-agent":["vault-rollout-e2e/1.0 (+https://github.com/hashicorp/vault-client-go)"]},"id":"6850ccb5-8ba4-2c24-4e85-4073b2e49b53","mount_accessor":"kv_6d3b3d83","mount_class":"secret","mount_point":"team-a/secret/","mount_running_version":"v0.20.0+builtin","mount_type":"kv","namespace":{"id":"abc12","path":"team-a/"},"operation":"update","path":"secret/delete/payments/db","remote_address":"10.42.3.17","remote_port":53214},"response":{"mount_accessor":"kv_6d3b3d83","mount_class":"secret","mount_point":"team-a/secret/","mount_running_plugin_version":"v0.20.0+builtin","mount_type":"kv"},"type":"response"}',
      },
      {
        id: '33816244795120296223523920683092436434823607182755054792',
        timestamp: 1730988198512,
        message:
          '{"time":"2024-11-07T14:03:18.512389466Z","auth":{"accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","display_name":"approle","entity_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","metadata":{"role_name":"ci-deployer"},"policies":["default","ci-deployer"],"policy_results":{"allowed":true,"granting_policies":[{"name":"ci-deployer","namespace_id":"root","type":"acl"}]},"token_policies":["default","ci-deployer"],"token_issue_time":"2024-11-07T13:58:02Z","token_ttl":3600,"token_type":"service"},"request":{"client_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","client_token_accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","headers":{"user-agent":["vault-rollout-e2e/1.0 (+https://github.com/hashicorp/vault-client-go)"]},"id":"2b6383c9-6ebf-3ecb-1bd2-575d9f7674bf","mount_accessor":"kv_1148a502","mount_class":"secret","mount_point":"legacy/","mount_running_version":"v0.20.0+builtin","mount_type":"kv","namespace":{"id":"root"},"operation":"delete","path":"legacy/app/old-token","remote_address":"10.42.3.17","remote_port":53214},"response":{"mount_accessor":"kv_1148a502","mount_class":"secret","mount_point":"legacy/","mount_running_plugin_version":"v0.20.0+builtin","mount_type":"kv"},"type":"response"}',
      },
      {
        id: '15840900101633586467395069387129658355581090380256895885',
        timestamp: 1730988200512,
        message:
          '{"time":"2024-11-07T14:03:20.512397385Z","auth":{"accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","display_name":"approle","entity_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","metadata":{"role_name":"ci-deployer"},"policies":["default","ci-deployer"],"policy_results":{"allowed":true,"granting_policies":[{"name":"ci-deployer","namespace_id":"root","type":"acl"}]},"token_policies":["default","ci-deployer"],"token_issue_time":"2024-11-07T13:58:02Z","token_ttl":3600,"token_type":"service"},"request":{"client_id":"b15082dd-b8ee-1d98-94f4-af89c5166a1c","client_token":"hmac-sha256:7ad04df1a4baea0059e527a7ff5fabfd3224a2040544e4d1d1510768e7e8fbaa","client_token_accessor":"hmac-sha256:cb3596de7b0034b95a19f03101d6806197882d310699e3cd435708e03f9bafe7","data":{"versions":[4]},"headers":{"user-agent":["vault-rollout-e2e/1.0 (+https://github.com/hashicorp/vault-client-go)"]},"id":"7c56bab4-c061-9221-ba41-c21225d54921","mount_accessor":"kv_efd09f28","mount_class":"secret","mount_point":"secret/","mount_running_version":"v0.20.0+builtin","mount_type":"kv","namespace":{"id":"root"},"operation":"update","path":"secret/undelete/payments/db","remote_address":"10.42.3.17","remote_port":53214},"response":{"mount_accessor":"kv_efd09f28","mount_class":"secret","mount_point":"secret/","mount_running_plugin_version":"v0.20.0+builtin","mount_type":"kv"},"type":"response"}',
      },
    ],
  },
};

const envelope = (json) =>
  JSON.stringify({ awslogs: { data: gzipSync(Buffer.from(JSON.stringify(json))).toString('base64') } });

for (const [file, payload] of Object.entries(payloads)) {
  writeFileSync(join(root, file), envelope(payload) + '\n');
}

// Malformed: valid base64, but the decoded bytes are not gzip.
writeFileSync(
  join(root, 'malformed/cloudwatch-not-gzip.json'),
  JSON.stringify({
    awslogs: { data: Buffer.from('{"messageType":"DATA_MESSAGE","logEvents":[]} (not gzipped)').toString('base64') },
  }) + '\n',
);

/** Lambda: the HTTP intake (Function URL or HTTP API) — the Hono app of lib/http through hono/aws-lambda. */
import { handle } from 'hono/aws-lambda';
import { buildApp } from '../lib/http/app.ts';
import { lambdaRuntime } from '../lib/runtime/lambda.ts';

const runtime = lambdaRuntime(process.env);
export const handler = handle(buildApp(runtime.appDeps()));

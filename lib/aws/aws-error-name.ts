/**
 * The name of an AWS SDK error (AccessDeniedException, ParameterNotFound, ...): enough to say what went wrong in a
 * message, without the SDK's own message, which can be long and name the caller's ARN.
 */
export function awsErrorName(error: unknown): string {
  return error instanceof Error ? error.name : 'unknown error';
}

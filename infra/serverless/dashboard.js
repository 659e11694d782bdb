// osls variable resolver: the stage's CloudWatch dashboard body (lib/deploy/cloudwatch-dashboard.ts), from the
// namespace and service its functions write their EMF metrics with. Used as
// ${file(./infra/serverless/dashboard.js):dashboardBody}; returns { "Fn::Sub": <JSON> } naming this stack's
// functions, queues and alarms. Nothing here touches the network or AWS.

export async function dashboardBody({ resolveVariable }) {
  const [namespace, service, stage] = await Promise.all([
    resolveVariable('param:metricsNamespace'),
    resolveVariable('self:provider.environment.POWERTOOLS_SERVICE_NAME'),
    resolveVariable('sls:stage'),
  ]);
  const { dashboardBodySub } = await import('../../lib/deploy/cloudwatch-dashboard.ts');
  return dashboardBodySub({ namespace: String(namespace), service: String(service), stage: String(stage) });
}

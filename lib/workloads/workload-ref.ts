/** One workload (or operator resource) in the fleet: what results, reports, halts and slots name it by. */
export interface WorkloadRef {
  cluster: string;
  namespace: string;
  kind: string;
  name: string;
}

/**
 * @agentloop/bench — benchmarks of agentloop against peer agent loops (pi-agent-core, the Vercel
 * AI SDK) and a minimal hand-written loop, and a fault-injection soak. Not part of the test run:
 * `npm run bench` and `npm run soak` (see README.md).
 *
 * The modules are exported for reuse (another contender, another workload); running them is the
 * job of `bench.ts` and `soak.ts`.
 *
 * @since 0.1.0
 */
export * from "./breakdown.ts"
export * from "./cell.ts"
export * from "./chart.ts"
export { agentloop, streamDeltasAsyncSource } from "./contenders/agentloop.ts"
export { aisdk } from "./contenders/aisdk.ts"
export { floor, floorLoop } from "./contenders/floor.ts"
export { pi, piFilter } from "./contenders/pi.ts"
export * from "./measure.ts"
export * from "./workloads.ts"

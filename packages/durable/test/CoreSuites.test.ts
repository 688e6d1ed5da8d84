/**
 * Core's compaction, structured-output and sub-agent suites, run again on the durable loop: every run they
 * make through the testkit's `runScripted` runs on `WorkflowEngine.layerMemory` here, with the
 * same assertions (their runs made with `startScripted` or `runAgentLoop` directly stay in memory).
 */
import { useScriptedEngine } from "@agentloop/testkit"
import { durableEngine } from "./engine.ts"

useScriptedEngine(durableEngine())
await import("../../core/test/Compaction.test.ts")
await import("../../core/test/Output.test.ts")
await import("../../core/test/SubAgent.test.ts")

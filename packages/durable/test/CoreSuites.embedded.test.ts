/**
 * Core's compaction, structured-output and sub-agent suites, run again on the durable loop on the
 * embedded engine: every run they make through the testkit's `runScripted` runs on a SQLite file
 * of its own here, with the same assertions (as `CoreSuites.test.ts` runs them on
 * `WorkflowEngine.layerMemory`).
 */
import { useScriptedEngine } from "@agentloop/testkit"
import { durableEngine } from "./engine.ts"

useScriptedEngine(durableEngine({}, "embedded"))
await import("../../core/test/Compaction.test.ts")
await import("../../core/test/Output.test.ts")
await import("../../core/test/SubAgent.test.ts")

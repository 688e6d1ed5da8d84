/** Shared pieces of provider test setups. */
import type { Usage } from "@agentloop/core"
import { modelInfo, usageCost } from "@agentloop/providers"
import type { TimeoutOptions } from "@agentloop/providers"

/** No time limits: the only sleeps of a run are its retry delays. */
export const noTimeouts: TimeoutOptions = { firstByte: "Infinity", idle: "Infinity", request: "Infinity" }

/** `usage` with the cost the price table gives `model`, when it knows the model. */
export const withCost = (usage: Usage, model: string): Usage => {
  const prices = modelInfo(model).prices
  return prices === undefined ? usage : { ...usage, cost: usageCost(usage, prices) }
}

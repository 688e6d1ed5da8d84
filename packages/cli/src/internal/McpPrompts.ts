/**
 * What the CLI answers when an MCP server asks something of the user, on the same terminal path as
 * approvals: an elicitation (`elicitation/create`: a message and a form of fields with defaults)
 * becomes a question, answered, declined or cancelled; a sampling request (`sampling/createMessage`)
 * is answered by the session's own model, after the user allows it (in the `yes` mode it is
 * allowed), its usage counted in the session's; and the servers' roots are the workspace.
 *
 * The terminal is not there when the MCP client starts (the servers are connected before the
 * session's screen is set up): `McpUi` is filled in once it is, and until then (or without a
 * terminal) an elicitation is cancelled and a sampling request denied, saying why.
 */
import type { McpRequestRecord, Model, Usage } from "@agentloop/core"
import type { ElicitationAnswer, ElicitationField, ElicitationRequest, ElicitationValue } from "@agentloop/mcp"
import type { McpTools as McpToolsService, SamplingDecision, SamplingRequest } from "@agentloop/mcp"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { CliError } from "../CliError.ts"
import { stripControl } from "../Sanitize.ts"

/** What the MCP servers' questions need of the session: filled in once the terminal is ready. */
export interface McpUi {
  /** Asks a line on the terminal (undefined: nobody to ask). */
  ask: ((question: string) => Effect.Effect<string | undefined>) | undefined
  print: (line: string) => Effect.Effect<void>
  /** Sampling requests are allowed without asking (the `yes` mode). */
  allowSampling: () => boolean
  /** Adds a sampling answer's usage to the session's. */
  addUsage: (usage: Usage) => void
  /** Records what came of a question in the session (the values given are not in it). */
  record: (record: McpAnswerRecord) => Effect.Effect<void>
}

/** What `McpUi.record` is given: an `mcp_request` record but its type, time and run. */
export type McpAnswerRecord = Omit<McpRequestRecord, "type" | "at" | "runId">

/** A UI that cannot ask yet. */
export const makeMcpUi = (): McpUi => ({
  ask: undefined,
  print: () => Effect.void,
  allowSampling: () => false,
  addUsage: () => {},
  record: () => Effect.void
})

const clip = (text: string, max: number) => {
  const flat = stripControl(text).replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/** The option of a choice `word` names: its value, its title (any case), or its number in the list. */
const optionNamed = (field: ElicitationField, word: string) => {
  const options = field.options ?? []
  return options.find((o) => o.value === word) ??
    options.find((o) => o.title.toLowerCase() === word.toLowerCase()) ??
    options.find((_, i) => String(i + 1) === word)
}

/** The choices of a field as the answer may name them: `1. red, 2. green`, a title after its value. */
const choicesOf = (field: ElicitationField) =>
  (field.options ?? []).map((o, i) =>
    `${i + 1}. ${clip(o.value, 40)}${o.title === o.value ? "" : ` (${clip(o.title, 40)})`}`
  ).join(", ")

/** What a field takes, as its line under the question shows it. */
const describeField = (field: ElicitationField) =>
  field.kind === "choice"
    ? `one of ${choicesOf(field)}`
    : field.kind === "choices"
    ? `some of ${choicesOf(field)} (comma-separated)`
    : field.kind

/** How the prompt for a field asks for it. */
const askFor = (field: ElicitationField) =>
  `  ${field.name}${
    field.kind === "choice"
      ? " (a name or number)"
      : field.kind === "choices"
      ? " (names or numbers, comma-separated)"
      : ""
  }${field.default === undefined ? "" : " [Enter: default]"}: `

/** A typed answer to one field, or why it is not one. */
const valueOf = (
  field: ElicitationField,
  line: string
): { readonly value: ElicitationValue } | { readonly problem: string } => {
  const text = line.trim()
  const values = () => (field.options ?? []).map((o) => clip(o.value, 40)).join(", ")
  switch (field.kind) {
    case "number":
    case "integer": {
      const n = Number(text)
      if (text.length === 0 || !Number.isFinite(n) || (field.kind === "integer" && !Number.isInteger(n))) {
        return { problem: `${field.name}: a ${field.kind} please` }
      }
      return { value: n }
    }
    case "boolean":
      if (/^(y|yes|true)$/i.test(text)) return { value: true }
      if (/^(n|no|false)$/i.test(text)) return { value: false }
      return { problem: `${field.name}: y or n please` }
    case "choice": {
      const picked = optionNamed(field, text)
      return picked === undefined
        ? { problem: `${field.name}: one of ${values()} (its name or number)` }
        : { value: picked.value }
    }
    case "choices": {
      const parts = text.split(",").map((p) => p.trim()).filter((p) => p.length > 0)
      const picked = parts.map((p) => optionNamed(field, p)?.value)
      return picked.some((v) => v === undefined) || (field.required && picked.length === 0)
        ? { problem: `${field.name}: some of ${values()} (names or numbers, comma-separated)` }
        : { value: picked as Array<string> }
    }
    default:
      return { value: text }
  }
}

/**
 * The terminal's answer to an elicitation: accept (each field asked, Enter keeps its default),
 * decline, cancel; recorded in the session (`mcp_request`).
 */
export const askElicitation = (ui: McpUi) => (request: ElicitationRequest): Effect.Effect<ElicitationAnswer> =>
  Effect.gen(function*() {
    const askedAt = yield* Clock.currentTimeMillis
    const answer = yield* elicitationAnswer(ui, request)
    yield* ui.record({
      server: request.server,
      request: "elicitation",
      message: clip(request.message, 400),
      fields: request.fields.map((f) => f.name),
      answer: answer.action,
      by: ui.ask === undefined ? "no-terminal" : "user",
      askedAt
    })
    return answer
  })

const elicitationAnswer = (ui: McpUi, request: ElicitationRequest): Effect.Effect<ElicitationAnswer> =>
  Effect.gen(function*() {
    const ask = ui.ask
    if (ask === undefined) {
      yield* ui.print(`⊘ MCP server ${request.server} asked a question; no terminal to answer on: cancelled`)
      return { action: "cancel" }
    }
    yield* ui.print(`? MCP server ${stripControl(request.server)} asks: ${clip(request.message, 400)}`)
    for (const f of request.fields) {
      const default_ = f.default === undefined ? "" : ` (default ${clip(JSON.stringify(f.default), 60)})`
      yield* ui.print(
        `    ${f.name}${f.required ? "" : " (optional)"}: ${describeField(f)}${default_}${
          f.description === undefined ? "" : ` — ${clip(f.description, 100)}`
        }`
      )
    }
    while (true) {
      const line = yield* ask("  answer? [y]es (fill in) / [n]o (decline) / [c]ancel ")
      if (line === undefined) return { action: "cancel" }
      const word = stripControl(line).trim().toLowerCase()
      if (word === "n" || word === "no") return { action: "decline" }
      if (word === "c" || word === "cancel") return { action: "cancel" }
      if (word === "y" || word === "yes") break
    }
    const content: Record<string, ElicitationValue> = {}
    for (const f of request.fields) {
      while (true) {
        const line = yield* ask(askFor(f))
        if (line === undefined) return { action: "cancel" }
        if (line.trim().length === 0 && (f.default !== undefined || !f.required)) break
        const answer = valueOf(f, line)
        if ("problem" in answer) {
          yield* ui.print(`    ${answer.problem}`)
          continue
        }
        content[f.name] = answer.value
        break
      }
    }
    return { action: "accept", content }
  })

/** The terminal's decision on a sampling request: allowed in the `yes` mode, else asked; recorded in the session. */
export const askSampling = (ui: McpUi) => (request: SamplingRequest): Effect.Effect<SamplingDecision> =>
  Effect.gen(function*() {
    const askedAt = yield* Clock.currentTimeMillis
    const last = request.messages[request.messages.length - 1]
    const text = last === undefined ? "" : typeof last.content === "string" ?
      last.content :
      last.content.map((p) => (p.type === "text" ? p.text : `[${p.type}]`)).join(" ")
    const decision = yield* samplingDecision(ui, request, text)
    yield* ui.record({
      server: request.server,
      request: "sampling",
      message: clip(text, 400),
      answer: decision.action,
      by: ui.allowSampling() ? "mode" : ui.ask === undefined ? "no-terminal" : "user",
      askedAt
    })
    return decision
  })

const samplingDecision = (ui: McpUi, request: SamplingRequest, text: string): Effect.Effect<SamplingDecision> =>
  Effect.gen(function*() {
    yield* ui.print(
      `? MCP server ${stripControl(request.server)} asks the model (${request.messages.length} message(s)${
        request.maxTokens === undefined ? "" : `, up to ${request.maxTokens} tokens`
      }): ${clip(text, 200)}`
    )
    if (ui.allowSampling()) return { action: "approve" }
    const ask = ui.ask
    if (ask === undefined) return { action: "deny", reason: "no terminal to ask the user on" }
    while (true) {
      const line = yield* ask("  let the model answer? [y]es / [n]o ")
      if (line === undefined) return { action: "deny", reason: "no answer from the user" }
      const word = stripControl(line).trim().toLowerCase()
      if (word === "y" || word === "yes") return { action: "approve" }
      if (word === "n" || word === "no") return { action: "deny", reason: "the user said no" }
    }
  })

/** The layers the MCP client gets from the CLI: elicitation and sampling on the terminal, with the session's model. */
export const mcpUiLayers = (ui: McpUi, model: Model["Service"]) =>
  Effect.map(Effect.promise(() => import("@agentloop/mcp")), (mcp) =>
    Layer.mergeAll(
      mcp.elicitationLayer(askElicitation(ui)),
      Layer.succeed(
        mcp.Sampling,
        mcp.makeModelSampling(model, {
          ask: askSampling(ui),
          onUsage: (usage) => Effect.sync(() => ui.addUsage(usage))
        })
      )
    ))

/**
 * The text of `/server:prompt args` (an MCP server's prompt, filled in): `args` as `key=value`
 * words, or, for a prompt with one argument, the whole text as it. The prompt's messages become
 * one user turn (an assistant message of the prompt marked as such; images left out, said so).
 */
export const mcpPromptText = (
  context: Context.Context<never>,
  spec: string,
  args: string
): Effect.Effect<string, CliError> =>
  Effect.gen(function*() {
    const mcp = yield* Effect.promise(() => import("@agentloop/mcp"))
    const tools = Context.getOption(context as Context.Context<McpToolsService>, mcp.McpTools)
    if (Option.isNone(tools)) {
      return yield* Effect.fail(new CliError("no MCP servers in this session (--mcp, mcpServers)"))
    }
    const [server, name] = [spec.slice(0, spec.indexOf(":")), spec.slice(spec.indexOf(":") + 1)]
    const provided = <A, E>(effect: Effect.Effect<A, E, McpToolsService>) =>
      Effect.provideService(effect, mcp.McpTools, tools.value)
    const prompts = yield* provided(mcp.listMcpPrompts(server)).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    const prompt = prompts.find((p) => p.name === name)
    if (prompt === undefined) {
      return yield* Effect.fail(
        new CliError(
          `MCP server ${server} has no prompt ${name} (it has: ${prompts.map((p) => p.name).join(", ") || "none"})`
        )
      )
    }
    const values: Record<string, string> = {}
    const words = args.trim().length === 0 ? [] : args.trim().split(/\s+/)
    if (words.every((w) => w.includes("="))) {
      for (const w of words) values[w.slice(0, w.indexOf("="))] = w.slice(w.indexOf("=") + 1)
    } else if (prompt.arguments.length === 1) {
      values[prompt.arguments[0]!.name] = args.trim()
    } else {
      return yield* Effect.fail(
        new CliError(`/${spec} takes key=value arguments: ${prompt.arguments.map((a) => a.name).join(", ")}`)
      )
    }
    const messages = yield* provided(mcp.getMcpPrompt(server, name, values)).pipe(
      Effect.mapError((e) => new CliError(e.message))
    )
    let images = 0
    const parts = messages.map((m) => {
      const text = typeof m.content === "string" ?
        m.content :
        m.content.flatMap((c) => {
          if (c.type === "text") return [c.text]
          if (c.type === "image") images++
          return []
        }).join("\n")
      return m.role === "assistant" ? `(the prompt's assistant message)\n${text}` : text
    })
    if (images > 0) parts.push(`(${images} image(s) of the prompt left out)`)
    return parts.join("\n\n")
  })

/**
 * The OAuth side of one HTTP server: an `OAuthClientProvider` for the SDK's `auth()` backed by the
 * `McpTokenStore`, and the `fetch` the server's transport uses, which adds the bearer token to the
 * server's own requests and authorizes when the server asks:
 *
 * - `401`: authorize (refresh the token, or a new authorization through `McpAuthorization`), then
 *   send the request again;
 * - `403` with `insufficient_scope`: step up (a new authorization with the scopes the server asks
 *   for, added to those asked before), then send it again. The same challenge right after a step
 *   up is not answered again (no authorization loop): the `403` goes back to the caller.
 *
 * Scope selection (SEP-835): the scope of the server's challenge, else the protected resource's
 * `scopes_supported`, else the configured `scope`, else none; `offline_access` is added when the
 * authorization server lists it (SEP-2207), so a refresh token can be had. A token past its
 * `expires_in` is refreshed before the request.
 *
 * Everything secret (tokens, client secret, private key, PKCE verifier) is known to `redact`.
 */
import { createPrivateKeyJwtAuth } from "@modelcontextprotocol/sdk/client/auth-extensions.js"
import { auth, discoverOAuthServerInfo, extractWWWAuthenticateParams } from "@modelcontextprotocol/sdk/client/auth.js"
import type { OAuthClientProvider, OAuthDiscoveryState } from "@modelcontextprotocol/sdk/client/auth.js"
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens
} from "@modelcontextprotocol/sdk/shared/auth.js"
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js"
import { Clock, Effect, Exit } from "effect"
import { randomBytes } from "node:crypto"
import { readFile } from "node:fs/promises"
import { McpAuthorization, McpTokenStore } from "../Auth.ts"
import type { McpAuthKey, StoredAuth } from "../Auth.ts"
import type { HttpServerConfig } from "../Config.ts"
import { McpAuthError } from "../Errors.ts"

/** An `McpAuthError` thrown through the SDK (which only passes on what `fetch` throws). */
export class AuthFailure extends Error {
  readonly error: McpAuthError
  constructor(error: McpAuthError) {
    super(error.message)
    this.error = error
  }
}

export interface OAuthSession {
  /** The `fetch` of the server's transport. */
  readonly fetch: FetchLike
  /** The secrets this session knows now (tokens, client secret, …). */
  readonly secrets: () => ReadonlyArray<string>
  /** `text` with every secret replaced by `<redacted>`. */
  readonly redact: (text: string) => string
  /** The `McpAuthError` a failure of `fetch` carries, or the failure itself. */
  readonly cause: (error: unknown) => unknown
}

export interface OAuthOptions {
  readonly clientName: string
  readonly clientMetadataUrl?: string | undefined
}

const REFRESH_MARGIN_MS = 30_000

const scopesOf = (scope: string | undefined): Array<string> => (scope ?? "").split(" ").filter((s) => s.length > 0)

const union = (...scopes: ReadonlyArray<string | undefined>): string | undefined => {
  const all = [...new Set(scopes.flatMap(scopesOf))]
  return all.length === 0 ? undefined : all.join(" ")
}

/** The token request of a JWT-bearer grant (RFC 7523) presenting `assertion`. */
const jwtBearerGrant = (assertion: string, scope: string | undefined) =>
  new URLSearchParams({
    grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer",
    assertion,
    ...(scope === undefined ? {} : { scope })
  })

const messageOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

export const makeOAuth = (
  server: HttpServerConfig,
  options: OAuthOptions
): Effect.Effect<OAuthSession> =>
  Effect.gen(function*() {
    const store = yield* McpTokenStore
    const authorization = yield* McpAuthorization
    const clock = yield* Clock.Clock
    const key: McpAuthKey = { server: server.name, url: server.url }
    const config = server.oauth === false ? {} : server.oauth ?? {}
    const serverUrl = new URL(server.url)
    const crossApp = config.crossAppAccess
    // no user in the loop: the client's own credentials, or an enterprise ID token (SEP-990)
    const workload = config.workloadIdentity
    const clientCredentials = config.grant === "client_credentials" || crossApp !== undefined ||
      workload !== undefined
    const configured: OAuthClientInformationMixed | undefined = config.clientId === undefined ? undefined : {
      client_id: config.clientId,
      ...(config.clientSecret === undefined ? {} : { client_secret: config.clientSecret })
    }
    let stored: StoredAuth = (yield* store.load(key)) ?? { server: key.server, url: key.url }
    let discovery: OAuthDiscoveryState | undefined
    let redirect: string | undefined
    let state: string | undefined
    let verifier: string | undefined
    let pending: URL | undefined
    // the identity assertion grant of the last exchange (SEP-990)
    let assertion: string | undefined

    const secrets = (): Array<string> => {
      const tokens = stored.tokens as OAuthTokens | undefined
      const client = stored.client as { client_secret?: unknown } | undefined
      return [
        tokens?.access_token,
        tokens?.refresh_token,
        tokens?.id_token,
        typeof client?.client_secret === "string" ? client.client_secret : undefined,
        config.clientSecret,
        config.privateKey,
        crossApp?.idToken,
        workload !== undefined && "token" in workload ? workload.token : undefined,
        assertion,
        verifier
      ].filter((s): s is string => typeof s === "string" && s.length >= 4)
    }
    const redact = (text: string): string =>
      secrets().sort((a, b) => b.length - a.length).reduce((t, s) => t.split(s).join("<redacted>"), text)

    const persist = (next: StoredAuth) =>
      Effect.runPromise(Effect.andThen(Effect.sync(() => void (stored = next)), store.save(key, next))).catch(
        (error: unknown) => {
          throw error instanceof McpAuthError ? new AuthFailure(error) : error
        }
      )

    /**
     * SEP-990: the ID token exchanged at the identity provider (RFC 8693) for an ID-JAG naming this
     * server's authorization server (audience) and resource, then the JWT-bearer grant (RFC 7523)
     * that presents it.
     */
    const jwtBearerRequest = async (idp: NonNullable<typeof crossApp>, scope: string | undefined) => {
      const audience = discovery?.authorizationServerMetadata?.issuer ??
        (discovery?.authorizationServerUrl === undefined ? undefined : String(discovery.authorizationServerUrl))
      if (audience === undefined) throw new Error("no authorization server found for the identity assertion grant")
      const resource = discovery?.resourceMetadata?.resource ?? server.url
      const response = await fetch(idp.tokenEndpoint, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: new URLSearchParams({
          grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
          requested_token_type: "urn:ietf:params:oauth:token-type:id-jag",
          subject_token: idp.idToken,
          subject_token_type: "urn:ietf:params:oauth:token-type:id_token",
          audience,
          resource,
          ...(idp.clientId === undefined ? {} : { client_id: idp.clientId }),
          ...(scope === undefined ? {} : { scope })
        })
      })
      const body = await response.json().catch(() => undefined) as Record<string, unknown> | undefined
      if (!response.ok || typeof body?.["access_token"] !== "string") {
        const reason = typeof body?.["error_description"] === "string" ?
          body["error_description"] :
          typeof body?.["error"] === "string" ?
          body["error"] :
          `HTTP ${response.status}`
        throw new Error(`the identity provider refused the token exchange (${reason})`)
      }
      assertion = body["access_token"]
      return jwtBearerGrant(assertion, scope)
    }

    /** SEP-1933: the workload's own identity token presented in a JWT-bearer grant. */
    const workloadRequest = async (identity: NonNullable<typeof workload>, scope: string | undefined) => {
      assertion = "token" in identity ? identity.token : (await readFile(identity.tokenFile, "utf8")).trim()
      if (assertion.length === 0) throw new Error("the workload identity token file is empty")
      return jwtBearerGrant(assertion, scope)
    }

    const metadataUrl = config.clientMetadataUrl ?? options.clientMetadataUrl
    const provider: OAuthClientProvider = {
      get redirectUrl() {
        return clientCredentials ? undefined : redirect ?? "http://127.0.0.1/callback"
      },
      ...(metadataUrl === undefined ? {} : { clientMetadataUrl: metadataUrl }),
      get clientMetadata(): OAuthClientMetadata {
        return clientCredentials ?
          {
            client_name: options.clientName,
            redirect_uris: [],
            grant_types: ["client_credentials"],
            ...(config.scope === undefined ? {} : { scope: config.scope })
          } :
          {
            client_name: options.clientName,
            redirect_uris: [redirect ?? "http://127.0.0.1/callback"],
            grant_types: ["authorization_code", "refresh_token"],
            response_types: ["code"],
            ...(config.scope === undefined ? {} : { scope: config.scope })
          }
      },
      state: () => (state = randomBytes(24).toString("base64url")),
      clientInformation: () =>
        configured === undefined ?
          stored.client as OAuthClientInformationMixed | undefined :
          // pre-registered credentials, bound to the authorization server they were first used with
          {
            ...configured,
            ...(typeof stored.client?.["issuer"] === "string" ? { issuer: stored.client["issuer"] } : {})
          },
      saveClientInformation: (client) =>
        persist({
          ...stored,
          client: configured === undefined ? { ...client } : { issuer: (client as { issuer?: string }).issuer }
        }),
      tokens: () => stored.tokens as OAuthTokens | undefined,
      saveTokens: (tokens) =>
        persist({ ...stored, tokens: { ...tokens }, obtainedAt: clock.currentTimeMillisUnsafe() }),
      redirectToAuthorization: (url) => {
        pending = url
      },
      saveCodeVerifier: (v) => {
        verifier = v
      },
      codeVerifier: () => {
        if (verifier === undefined) throw new Error("no PKCE code verifier for this authorization")
        return verifier
      },
      invalidateCredentials: (scope) => {
        if (scope === "verifier") verifier = undefined
        if (scope === "discovery" || scope === "all") discovery = undefined
        if (scope === "verifier" || scope === "discovery") return
        const { tokens: _t, obtainedAt: _o, client, ...rest } = stored
        return persist(scope === "tokens" ? { ...rest, ...(client === undefined ? {} : { client }) } : rest)
      },
      discoveryState: () => discovery,
      saveDiscoveryState: (s) => {
        discovery = s
      },
      ...(crossApp !== undefined ?
        { prepareTokenRequest: (scope?: string) => jwtBearerRequest(crossApp, scope) } :
        workload !== undefined ?
        { prepareTokenRequest: (scope?: string) => workloadRequest(workload, scope) } :
        clientCredentials ?
        {
          prepareTokenRequest: (scope?: string) =>
            new URLSearchParams({ grant_type: "client_credentials", ...(scope === undefined ? {} : { scope }) })
        } :
        {}),
      ...(config.privateKey !== undefined && config.clientId !== undefined ?
        {
          addClientAuthentication: createPrivateKeyJwtAuth({
            issuer: config.clientId,
            subject: config.clientId,
            privateKey: config.privateKey,
            alg: config.signingAlgorithm ?? "ES256"
          })
        } :
        {})
    }

    const failure = (what: string) => (error: unknown) =>
      error instanceof AuthFailure ? error.error : new McpAuthError({
        server: server.name,
        message: redact(`MCP server "${server.name}": ${what}: ${messageOf(error)}`)
      })

    const base: FetchLike = (input, init) => fetch(input, init)
    const runAuth = (
      args: { authorizationCode?: string; scope?: string | undefined; resourceMetadataUrl?: URL | undefined }
    ) =>
      Effect.tryPromise({
        try: () =>
          auth(provider, {
            serverUrl,
            fetchFn: base,
            ...(args.authorizationCode === undefined ? {} : { authorizationCode: args.authorizationCode }),
            ...(args.scope === undefined ? {} : { scope: args.scope }),
            ...(args.resourceMetadataUrl === undefined ? {} : { resourceMetadataUrl: args.resourceMetadataUrl })
          }),
        catch: failure("could not authorize")
      })

    /** The scope to ask for (SEP-835, SEP-2207), from a fresh discovery. */
    const chooseScope = (challenge: string | undefined, resourceMetadataUrl: URL | undefined) =>
      Effect.gen(function*() {
        const info = yield* Effect.tryPromise({
          try: () =>
            discoverOAuthServerInfo(serverUrl, {
              fetchFn: base,
              ...(resourceMetadataUrl === undefined ? {} : { resourceMetadataUrl })
            }),
          catch: failure("could not discover its authorization server")
        })
        discovery = {
          ...info,
          ...(resourceMetadataUrl === undefined ? {} : { resourceMetadataUrl: resourceMetadataUrl.href })
        }
        const chosen = challenge ?? info.resourceMetadata?.scopes_supported?.join(" ") ?? config.scope
        const offline = !clientCredentials && chosen !== undefined &&
          (info.authorizationServerMetadata?.scopes_supported ?? []).includes("offline_access")
        return offline ? union(chosen, "offline_access") : chosen
      })

    let requestedScope: string | undefined

    const authorize = (request: {
      readonly scope: string | undefined
      readonly resourceMetadataUrl: URL | undefined
      readonly stepUp: boolean
    }): Effect.Effect<void, McpAuthError> =>
      Effect.gen(function*() {
        if (clientCredentials) {
          yield* runAuth({ scope: request.scope ?? config.scope, resourceMetadataUrl: request.resourceMetadataUrl })
          return
        }
        if (request.stepUp) yield* Effect.promise(async () => provider.invalidateCredentials?.("tokens"))
        const scope = yield* chooseScope(
          request.stepUp ? union(requestedScope, request.scope) : request.scope,
          request.resourceMetadataUrl
        )
        const scoped = Effect.gen(function*() {
          const session = yield* authorization.start(key)
          redirect = session.redirectUrl
          // a registration made for another redirect URL cannot be used with this one
          const registered = stored.client?.["redirect_uris"]
          if (configured === undefined && Array.isArray(registered) && !registered.includes(redirect)) {
            const { client: _client, ...rest } = stored
            yield* Effect.promise(() => persist(rest))
          }
          pending = undefined
          const result = yield* runAuth({ scope, resourceMetadataUrl: request.resourceMetadataUrl })
          if (result === "AUTHORIZED") return
          requestedScope = scope
          const url = pending as URL | undefined
          if (url === undefined) return yield* failure("could not authorize")("no authorization URL")
          const callback = yield* session.complete(url)
          if (callback.state !== state) {
            return yield* new McpAuthError({
              server: server.name,
              message: `MCP server "${server.name}": the authorization answer does not belong to this request ` +
                "(state mismatch)"
            })
          }
          yield* runAuth({ authorizationCode: callback.code, scope, resourceMetadataUrl: request.resourceMetadataUrl })
        })
        yield* Effect.scoped(scoped)
      })

    // one authorization at a time; a request that waited finds the token the other one got
    let queue: Promise<void> = Promise.resolve()
    const authorizeOnce = (
      request: Parameters<typeof authorize>[0] & { readonly sentWith: string | undefined }
    ): Promise<void> => {
      const next = queue.then(async () => {
        const current = (stored.tokens as OAuthTokens | undefined)?.access_token
        if (!request.stepUp && current !== undefined && current !== request.sentWith) return
        const exit = await Effect.runPromiseExit(authorize(request))
        if (Exit.isFailure(exit)) {
          const error = exit.cause.reasons.find((r) => r._tag === "Fail")?.error
          throw error === undefined
            ? new AuthFailure(failure("could not authorize")("interrupted"))
            : new AuthFailure(error)
        }
      })
      queue = next.catch(() => undefined)
      return next
    }

    const expired = (): boolean => {
      const tokens = stored.tokens as OAuthTokens | undefined
      if (tokens?.refresh_token === undefined || tokens.expires_in === undefined || stored.obtainedAt === undefined) {
        return false
      }
      return stored.obtainedAt + tokens.expires_in * 1000 - REFRESH_MARGIN_MS < clock.currentTimeMillisUnsafe()
    }

    let lastStepUp: string | undefined

    const authorizedFetch: FetchLike = async (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input))
      // the token is only ever sent to the server it was issued for
      if (url.origin !== serverUrl.origin) return base(input, init)
      if (expired()) {
        await authorizeOnce({
          scope: undefined,
          resourceMetadataUrl: undefined,
          stepUp: false,
          sentWith: (stored.tokens as OAuthTokens | undefined)?.access_token
        })
      }
      const send = () => {
        const headers = new Headers(init?.headers)
        const token = (stored.tokens as OAuthTokens | undefined)?.access_token
        if (token !== undefined) headers.set("Authorization", `Bearer ${token}`)
        return { token, response: base(input, { ...init, headers }) }
      }
      let sent = send()
      let response = await sent.response
      let answered401 = false
      for (let round = 0; round < 2; round++) {
        const challenge = extractWWWAuthenticateParams(response)
        if (response.status === 401 && !answered401) {
          answered401 = true
          await response.body?.cancel()
          await authorizeOnce({
            scope: challenge.scope,
            resourceMetadataUrl: challenge.resourceMetadataUrl,
            stepUp: false,
            sentWith: sent.token
          })
        } else if (response.status === 403 && challenge.error === "insufficient_scope") {
          const header = response.headers.get("www-authenticate") ?? ""
          if (header === lastStepUp) break
          lastStepUp = header
          await response.body?.cancel()
          await authorizeOnce({
            scope: challenge.scope,
            resourceMetadataUrl: challenge.resourceMetadataUrl,
            stepUp: true,
            sentWith: sent.token
          })
        } else {
          break
        }
        sent = send()
        response = await sent.response
      }
      if (response.ok) lastStepUp = undefined
      return response
    }

    return {
      fetch: authorizedFetch,
      secrets,
      redact,
      cause: (error) => (error instanceof AuthFailure ? error.error : error)
    }
  })

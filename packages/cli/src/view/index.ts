/**
 * The session viewer behind `agentloop view`: a session file read into a timeline, rendered as a
 * self-contained page and served on 127.0.0.1.
 *
 * @since 0.1.0
 */
export * from "./Page.ts"
export * from "./SessionFile.ts"
export * from "./Timeline.ts"
export * from "./Viewer.ts"

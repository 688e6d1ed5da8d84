/**
 * @agentloop/durable
 *
 * @since 0.1.0
 */
export {}

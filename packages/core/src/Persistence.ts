/**
 * Saving and loading transcripts as JSONL (placeholder: being written).
 *
 * @since 0.1.0
 */
export {}

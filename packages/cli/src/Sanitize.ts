/**
 * Text from a model or a tool is untrusted: before it reaches the terminal, control sequences are
 * removed (OSC, e.g. OSC 52 which writes the clipboard; CSI, e.g. `ESC[2J` which clears the screen;
 * DCS/APC/PM/SOS strings; the 8-bit C1 forms) and so are the other control characters except
 * newline and tab. A carriage return is dropped (a lone one would let text overwrite the line it
 * is on). The CLI's own colours are added after this, so they are kept.
 *
 * @since 0.1.0
 */

// ESC ] ... (BEL | ESC \) ; ESC P|X|^|_ ... ESC \ ; the 8-bit forms ; CSI ESC [ ... final ; other ESC x.
// An unterminated string sequence (cut at the end of a streamed chunk) is removed up to the end.
const SEQUENCES = new RegExp(
  [
    "(?:\\u001b\\]|\\u009d)[^\\u0007\\u001b\\u009c]*(?:\\u0007|\\u001b\\\\|\\u009c|$)", // OSC
    "(?:\\u001b[PX^_]|[\\u0090\\u0098\\u009e\\u009f])[^\\u001b\\u009c]*(?:\\u001b\\\\|\\u009c|$)", // DCS SOS PM APC
    "(?:\\u001b\\[|\\u009b)[\\u0030-\\u003f]*[\\u0020-\\u002f]*[\\u0040-\\u007e]?", // CSI
    "\\u001b[\\u0020-\\u002f]*[\\u0030-\\u007e]?" // other escapes (and a lone ESC)
  ].join("|"),
  "g"
)
// C0 controls but tab and newline, DEL, and the C1 range
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g

/**
 * `text` without terminal control sequences and control characters (newline and tab kept).
 *
 * @since 0.1.0
 * @category sanitizing
 */
export const stripControl = (text: string): string => text.replace(SEQUENCES, "").replace(CONTROLS, "")

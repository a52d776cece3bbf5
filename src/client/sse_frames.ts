/**
 * Splits buffered SSE text into its complete frames (each without its blank-line
 * terminator) and the incomplete rest. One scan from the start: a buffer that
 * holds many frames is not re-sliced once per frame.
 */
export function splitSseFrames(buf: string): { frames: string[]; rest: string } {
  const frames: string[] = [];
  const end = /\r?\n\r?\n/g;
  let from = 0;
  for (let m = end.exec(buf); m !== null; m = end.exec(buf)) {
    frames.push(buf.slice(from, m.index));
    from = m.index + m[0].length;
  }
  return { frames, rest: from === 0 ? buf : buf.slice(from) };
}

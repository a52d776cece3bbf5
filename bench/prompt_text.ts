/** The bench's prompt text: this repository's own source, what coding agents send. */
import { ROOT } from "./processes.ts";

let sourceText: string | undefined;
/** Deterministic prompt text of `chars` characters: the project's own source, repeated. */
export function promptText(chars: number): string {
  if (!sourceText) {
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const e of [...Deno.readDirSync(dir)].sort((a, b) => a.name.localeCompare(b.name))) {
        const p = `${dir}/${e.name}`;
        if (e.isDirectory) walk(p);
        else if (e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) {
          files.push(Deno.readTextFileSync(p));
        }
      }
    };
    walk(`${ROOT}src`);
    sourceText = files.join("\n");
  }
  let s = "";
  while (s.length < chars) s += sourceText;
  return s.slice(0, chars);
}

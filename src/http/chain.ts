/**
 * Layers around a handler, composed once at start-up (as Hono's `compose`,
 * without a `next` closure per request): each layer's `enter` runs in order
 * before the handler and may answer in its place; then every layer's `leave`
 * runs, innermost first, on the answer or on the response `render` made of
 * whatever was thrown. Per-request state is the one object the caller passes.
 */

export interface Layer<S> {
  /** Before the handler; a response returned here is the answer (later layers and the handler do not run). */
  enter?(s: S): Response | undefined;
  /** After the answer exists, whatever happened; errors are already rendered. */
  leave?(s: S, res: Response): void;
}

export type Inner<S> = (s: S) => Promise<Response> | Response;
export type Render<S> = (s: S, error: unknown) => Response;

export function compose<S>(
  layers: readonly Layer<S>[],
  inner: Inner<S>,
  render: Render<S>,
): (s: S) => Promise<Response> {
  const enters = layers.filter((l) => l.enter !== undefined);
  const leaves = layers.filter((l) => l.leave !== undefined).reverse();
  return async (s) => {
    let res: Response | undefined;
    try {
      for (let i = 0; i < enters.length && res === undefined; i++) res = enters[i].enter!(s);
      res ??= await inner(s);
    } catch (e) {
      res = render(s, e);
    }
    for (let i = 0; i < leaves.length; i++) leaves[i].leave!(s, res);
    return res;
  };
}

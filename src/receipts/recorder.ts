/**
 * One request's receipt, from its id to its durable commit. It owns the
 * event log: the pipeline, failover (through `routing/failover.ts`'s
 * `AttemptLog`, which it implements) and the stream report what happened by
 * name, and only this class turns that into events — hashes and metadata,
 * never bodies. Whoever creates it names where it will be signed and
 * committed; `close` is the single exit: it writes the closing events, has
 * the receipt service sign it and commits it together with the writes the
 * caller names (the usage settlement) in one group commit.
 */
import type { AttemptFailureKind, AttemptLog, Candidate } from "../routing/mod.ts";
import type { KvWrite } from "../store/mod.ts";

import type { ReceiptEvent } from "../aci/mod.ts";
export type { ReceiptEvent };

export interface ReceiptDraft {
  receiptId: string;
  endpoint: string;
  method: string;
  model: string | null;
  chatId: string | null;
  events: ReceiptEvent[];
  /** Digest of the API key that made the request: receipts are only served to it. */
  ownerDigest: string | null;
}

/** What `close` needs of the receipt service (receipts/service.ts). */
export interface ReceiptSigner {
  finalize(draft: ReceiptDraft): KvWrite[];
  finalizeRefusal(draft: ReceiptDraft): { receiptId: string; writes: KvWrite[] };
}

/**
 * Where a closed receipt is committed. The group committer: its writes share
 * a KV commit with other requests' queued writes, and may ride an admission
 * commit that has room (`admission/admission.ts`, wired as `piggyback` in
 * `app/assemble.ts`); either way `write` resolves only once they are durable.
 */
export interface ReceiptCommit {
  write(ops: KvWrite[]): Promise<void>;
}

/** How the answer ended, for `close`. */
export type ReceiptEnd =
  | {
    /** An answer was relayed (whole or streamed). */
    kind: "answer";
    /** Hash of the answer as the upstream sent it, and as the client got it. */
    receivedHash: string;
    returnedHash: string;
    /** A stream cut short: `stream.upstream_failed` / `stream.client_disconnected`. */
    cut?: "upstream_failed" | "client_disconnected";
    /** The response id the client holds, when there is one. */
    chatId: string | null;
  }
  | {
    /** A refusal after authentication (an error answer). */
    kind: "refusal";
    /** The error's kind (`request.refused`, when nothing was forwarded). */
    reason: string;
    /** Hash of the error body returned. */
    returnedHash: string;
  };

export class ReceiptRecorder implements AttemptLog {
  readonly draft: ReceiptDraft;
  /** The received body's hash, which `forwarded` compares the sent bytes with. */
  #receivedHash: string | null = null;
  #forwarded = false;
  #forwardedHash: string | null = null;
  #servedModel: string | undefined;
  #closed = false;
  #servedId: string;
  readonly #signer: ReceiptSigner | null;
  readonly #commit: ReceiptCommit | null;

  /**
   * `signer` and `commit` are where `close` signs and commits; a receipt built
   * without them (tests, the bench floor) can record events but not close.
   */
  constructor(
    receiptId: string,
    endpoint: string,
    method: string,
    signer: ReceiptSigner | null = null,
    commit: ReceiptCommit | null = null,
  ) {
    this.#signer = signer;
    this.#commit = commit;
    this.draft = {
      receiptId,
      endpoint,
      method,
      model: null,
      chatId: null,
      events: [],
      ownerDigest: null,
    };
    this.#servedId = receiptId;
  }

  get id(): string {
    return this.draft.receiptId;
  }

  /**
   * Appends an event as is. The gateway uses the named steps below; this is for
   * tests and the bench floor, which build receipts of a given shape.
   */
  event(e: ReceiptEvent): void {
    this.draft.events.push(e);
  }

  /** The requested model (bounded: it is client input, stored before validation). */
  setModel(model: string): void {
    this.draft.model = model.length <= 256 ? model : model.slice(0, 256);
  }

  setOwner(digest: string): void {
    this.draft.ownerDigest = digest;
  }

  /** `request.received`: the body's hash, or null when it was refused unread (413, unreadable). */
  received(bodyHash: string | null): void {
    if (bodyHash === null) {
      this.draft.events.push({ type: "request.received", body_hash: null, body_read: false });
      return;
    }
    this.#receivedHash = bodyHash;
    this.draft.events.push({ type: "request.received", body_hash: bodyHash });
  }

  /** `middleware.forwarded`: admitted, handed to routing unchanged. */
  admitted(): void {
    this.draft.events.push({ type: "middleware.forwarded", body_hash: this.#receivedHash });
  }

  // AttemptLog (routing/failover.ts): one upstream attempt at a time.

  selected(c: Candidate, attempt: number, modelId: string, required: boolean): void {
    this.draft.events.push({ type: "route.selected", target_route_id: c.routeId, attempt });
    const v = c.verification;
    if (!v) return;
    if (v.verified) {
      this.draft.events.push({
        type: "upstream.verified",
        model_id: modelId,
        result: "verified",
        required,
        session_id: v.sessionId,
        tee_attested: v.teeAttested,
        attempt,
      });
    } else {
      this.draft.events.push({
        type: "upstream.verified",
        model_id: modelId,
        result: "failed",
        required,
        reason: v.reason,
        upstream_name: c.provider.name,
        attempt,
      });
    }
  }

  /**
   * The upstream's usage was not billed as reported: `invalid` fields were not
   * non-negative safe integers (the estimate stood in), `clamped` ones exceeded
   * what the gateway let the upstream do. `billed` is what was settled.
   */
  usageBounded(
    billed: { prompt_tokens: number; completion_tokens: number },
    invalid: string[],
    clamped: string[],
  ): void {
    this.draft.events.push({
      type: "usage.bounded",
      prompt_tokens: billed.prompt_tokens,
      completion_tokens: billed.completion_tokens,
      invalid,
      clamped,
    });
  }

  forwarded(bodyHash: string): void {
    this.#forwarded = true;
    this.#forwardedHash = bodyHash;
    this.draft.events.push({ type: "request.forwarded", body_hash: bodyHash });
    if (bodyHash !== this.#receivedHash) {
      this.draft.events.push({ type: "transparency.request_modified" });
    }
  }

  /** `cache.salted`: the body for this route carries the key's prefix-cache salt (its digest only). */
  cacheSalted(c: Candidate, digest: string): void {
    this.draft.events.push({
      type: "cache.salted",
      target_route_id: c.routeId,
      salt_digest: digest,
    });
  }

  /** The canonical model the requested id resolved to (named in `route.served`). */
  servedModel(id: string): void {
    this.#servedModel = id;
  }

  served(c: Candidate, attempt: number): void {
    this.draft.events.push({
      type: "route.served",
      target_route_id: c.routeId,
      attempt,
      provider: c.provider.name,
      ...(this.#servedModel === undefined ? {} : { model_id: this.#servedModel }),
    });
  }

  failed(c: Candidate, attempt: number, why: number | AttemptFailureKind): void {
    this.draft.events.push(
      typeof why === "number"
        ? { type: "upstream.attempt_failed", target_route_id: c.routeId, attempt, status: why }
        : { type: "upstream.attempt_failed", target_route_id: c.routeId, attempt, reason: why },
    );
  }

  /** The hash of the bytes last forwarded upstream (the served attempt's), or null. */
  get forwardedHash(): string | null {
    return this.#forwardedHash;
  }

  /** Has the prompt left the gateway (any `request.forwarded`)? */
  get forwardedAny(): boolean {
    return this.#forwarded;
  }

  /** Whether there is a request to bind (a `request.received`, even of a body refused unread). */
  get started(): boolean {
    return this.draft.events.length > 0;
  }

  /** Whether `close` was called (whatever its commit's fate: a receipt is closed once). */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * The receipt id the client may look up: its own, or once a refusal past its
   * key's budget was closed, the shared receipt that counts it.
   */
  get servedId(): string {
    return this.#servedId;
  }

  /**
   * The single exit: appends the closing events, signs, and commits the receipt
   * with `alongside` (writes that must be durable with it: the usage settlement)
   * in one commit. Resolves once both are durable; rejects when the commit fails
   * (then no receipt exists to promise).
   */
  close(end: ReceiptEnd, alongside: readonly KvWrite[]): Promise<void> {
    const signer = this.#signer;
    const commit = this.#commit;
    if (signer === null || commit === null) throw new Error("receipt has no signer or commit");
    if (this.#closed) throw new Error("receipt already closed");
    this.#closed = true;
    const events = this.draft.events;
    let writes: KvWrite[];
    if (end.kind === "answer") {
      events.push({ type: "response.received", body_hash: end.receivedHash });
      if (end.cut !== undefined) events.push({ type: `stream.${end.cut}` });
      if (end.returnedHash !== end.receivedHash) {
        events.push({ type: "transparency.response_modified" });
      }
      events.push({ type: "response.returned", body_hash: end.returnedHash });
      const chatId = end.chatId;
      if (typeof chatId === "string" && chatId.length > 0 && chatId.length <= 256) {
        this.draft.chatId = chatId;
      }
      writes = signer.finalize(this.draft);
    } else {
      if (!this.#forwarded) events.push({ type: "request.refused", reason: end.reason });
      events.push({ type: "response.returned", body_hash: end.returnedHash });
      if (this.#forwarded) {
        writes = signer.finalize(this.draft);
      } else {
        // Refusals cost the store a bounded amount per key (receipts/refusals.ts).
        const refused = signer.finalizeRefusal(this.draft);
        this.#servedId = refused.receiptId;
        writes = refused.writes;
      }
    }
    for (const op of alongside) writes.push(op);
    return commit.write(writes);
  }
}

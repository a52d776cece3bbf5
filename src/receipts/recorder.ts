/**
 * Collects one request's receipt events as the request moves through the
 * gateway. Holds hashes and metadata only, never bodies. The signed document
 * is produced by the receipt service when the response is finished.
 */
export type ReceiptEvent = {
  type: string;
  [field: string]: string | number | boolean | null | string[];
};

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

export class ReceiptRecorder {
  readonly draft: ReceiptDraft;

  constructor(receiptId: string, endpoint: string, method: string) {
    this.draft = {
      receiptId,
      endpoint,
      method,
      model: null,
      chatId: null,
      events: [],
      ownerDigest: null,
    };
  }

  get id(): string {
    return this.draft.receiptId;
  }

  event(e: ReceiptEvent): void {
    this.draft.events.push(e);
  }

  /** The requested model (bounded: it is client input, stored before validation). */
  setModel(model: string): void {
    this.draft.model = model.length <= 256 ? model : model.slice(0, 256);
  }

  setChatId(id: string | null): void {
    if (typeof id === "string" && id.length > 0 && id.length <= 256) this.draft.chatId = id;
  }

  setOwner(digest: string): void {
    this.draft.ownerDigest = digest;
  }

  /** Has the prompt left the gateway (any `request.forwarded`)? */
  get forwarded(): boolean {
    return this.draft.events.some((e) => e.type === "request.forwarded");
  }
}

/**
 * The model catalogs (chat and embeddings) derived once from configuration:
 * lookup by id or alias, the public model objects, and the `zdr` / `tee`
 * filters. Pure: no I/O.
 */
import { badParam, GatewayError } from "../http/mod.ts";
import type {
  EmbeddingModelConfig,
  GatewayConfig,
  ModelConfig,
  ProviderConfig,
} from "../config/mod.ts";
import { FALLBACK_TOKENIZER, type TokenizerName } from "../tokens/mod.ts";

export interface ChatModel {
  /** The id the client used (the canonical id or an alias). */
  id: string;
  config: ModelConfig;
  isTee: boolean;
  zdr: boolean;
  /** Request parameters some route's upstream refuses (routes[].unsupported_parameters): not advertised. */
  refusedParameters: string[];
  /** Which of max_tokens / max_completion_tokens this model accepts. */
  tokenParam: "max_tokens" | "max_completion_tokens";
  /** The encoding its tokens are counted with (catalog `tokenizer`, else the fallback). */
  tokenizer: TokenizerName;
}

export interface EmbeddingModel {
  id: string;
  config: EmbeddingModelConfig;
  isTee: boolean;
  zdr: boolean;
  tokenizer: TokenizerName;
}

export interface CatalogFilter {
  zdr: boolean;
  tee: boolean;
}

export class Catalog {
  readonly providers: Map<string, ProviderConfig>;
  #chat = new Map<string, ChatModel>();
  #embeddings = new Map<string, EmbeddingModel>();
  #chatObjects: Record<string, unknown>[] = [];
  #embeddingObjects: Record<string, unknown>[] = [];

  constructor(config: GatewayConfig) {
    this.providers = new Map(config.providers.map((p) => [p.name, p]));
    for (const m of config.models) {
      const confidential = this.#confidentialProviders(m.routes);
      const zdr = m.routes.some((r) => this.providers.get(r.provider)?.zdr === true);
      const tokenParam = m.supported_parameters.includes("max_completion_tokens")
        ? "max_completion_tokens"
        : "max_tokens";
      const refusedParameters = [
        ...new Set(m.routes.flatMap((r) => r.unsupported_parameters ?? [])),
      ];
      for (const id of [m.id, ...m.aliases]) {
        const entry: ChatModel = {
          id,
          config: m,
          refusedParameters,
          isTee: confidential.length > 0,
          zdr,
          tokenParam,
          tokenizer: m.tokenizer ?? FALLBACK_TOKENIZER,
        };
        this.#chat.set(id, entry);
        this.#chatObjects.push(modelObject(entry, confidential));
      }
    }
    for (const m of config.embedding_models) {
      const confidential = this.#confidentialProviders(m.routes);
      const zdr = m.routes.some((r) => this.providers.get(r.provider)?.zdr === true);
      const entry: EmbeddingModel = {
        id: m.id,
        config: m,
        isTee: confidential.length > 0,
        zdr,
        tokenizer: m.tokenizer ?? FALLBACK_TOKENIZER,
      };
      this.#embeddings.set(m.id, entry);
      this.#embeddingObjects.push(embeddingObject(entry, confidential));
    }
  }

  chatModel(id: string): ChatModel {
    const m = this.#chat.get(id);
    if (!m) {
      if (this.#embeddings.has(id)) {
        throw badParam("model", `model ${quote(id)} is an embedding model; use /v1/embeddings`);
      }
      throw new GatewayError(
        "model_not_found",
        `model ${quote(id)} does not exist; see GET /v1/models`,
        {
          param: "model",
        },
      );
    }
    return m;
  }

  /** The canonical id a model id or alias resolves to (the id itself when unknown). */
  resolvedId(id: string): string {
    return this.#chat.get(id)?.config.id ?? id;
  }

  embeddingModel(id: string): EmbeddingModel {
    const m = this.#embeddings.get(id);
    if (!m) {
      throw new GatewayError(
        "model_not_found",
        `embedding model ${quote(id)} does not exist; see GET /v1/embeddings/models`,
        { param: "model" },
      );
    }
    return m;
  }

  /**
   * The chat models. With `verifiedNow` (the request path's view of the
   * confidential upstreams), `is_tee` and the `tee` filter count only
   * upstreams with a current verified session: a model served only by
   * unverified confidential upstreams is not listed as TEE.
   */
  listChat(
    f: CatalogFilter,
    verifiedNow?: (provider: string) => boolean,
  ): Record<string, unknown>[] {
    return teeNow(this.#chatObjects, verifiedNow).filter((o) => {
      const m = this.#chat.get(o.id as string)!;
      return (!f.zdr || m.zdr) && (!f.tee || o.is_tee === true);
    });
  }

  listEmbeddings(
    f: CatalogFilter,
    verifiedNow?: (provider: string) => boolean,
  ): Record<string, unknown>[] {
    return teeNow(this.#embeddingObjects, verifiedNow).filter((o) => {
      const m = this.#embeddings.get(o.id as string)!;
      return (!f.zdr || m.zdr) && (!f.tee || o.is_tee === true);
    });
  }

  /** One chat model object by id or alias (for `GET /v1/models/<provider>/<model>`). */
  chatObject(id: string): Record<string, unknown> | undefined {
    return this.#chatObjects.find((o) => o.id === id);
  }

  /** Confidential vendors for the legacy `GET /v1/models/<vendor>` listing. */
  vendorModels(vendor: string): Record<string, unknown>[] | undefined {
    const names = [...this.providers.values()]
      .filter((p) => p.confidential && (p.vendor ?? p.name) === vendor)
      .map((p) => p.name);
    if (names.length === 0) return undefined;
    return this.#chatObjects.filter((o) =>
      (o.providers as string[]).some((p) => names.includes(p))
    );
  }

  #confidentialProviders(routes: { provider: string }[]): string[] {
    return [
      ...new Set(routes.map((r) => r.provider).filter((p) => this.providers.get(p)?.confidential)),
    ];
  }
}

/** Model objects with `is_tee` recomputed from the upstreams verified right now. */
function teeNow(
  objects: Record<string, unknown>[],
  verifiedNow: ((provider: string) => boolean) | undefined,
): Record<string, unknown>[] {
  if (!verifiedNow) return objects;
  return objects.map((o) => {
    const tee = (o.providers as string[]).some(verifiedNow);
    return tee === o.is_tee ? o : { ...o, is_tee: tee };
  });
}

function modelObject(m: ChatModel, confidential: string[]): Record<string, unknown> {
  const c = m.config;
  const pricing: Record<string, string> = {
    prompt: decimal(c.pricing.prompt),
    completion: decimal(c.pricing.completion),
  };
  if (c.pricing.input_cache_read !== undefined) {
    pricing.input_cache_read = decimal(c.pricing.input_cache_read);
  }
  return {
    id: m.id,
    object: "model",
    name: c.name,
    is_tee: m.isTee,
    created: c.created,
    owned_by: m.id.split("/")[0],
    context_length: c.context_length,
    max_output_length: c.max_output_length,
    input_modalities: c.input_modalities,
    output_modalities: c.output_modalities,
    pricing,
    // Only what every route can do: a parameter one upstream refuses is not advertised.
    supported_parameters: c.supported_parameters.filter((p) => !m.refusedParameters.includes(p)),
    supported_features: c.supported_features,
    providers: confidential,
  };
}

function embeddingObject(m: EmbeddingModel, confidential: string[]): Record<string, unknown> {
  const c = m.config;
  return {
    id: m.id,
    object: "model",
    name: c.name,
    is_tee: m.isTee,
    created: c.created,
    owned_by: m.id.split("/")[0],
    input_modalities: c.input_modalities,
    default_dimensions: c.default_dimensions,
    dimensions_range: c.dimensions_range ?? null,
    max_input_tokens: c.max_input_tokens,
    pricing: { prompt: decimal(c.pricing.prompt) },
    providers: confidential,
  };
}

/** Prices as plain decimal strings (never `1.5e-7`), as catalog clients expect. */
export function decimal(n: number): string {
  if (n === 0) return "0";
  const s = n.toFixed(20).replace(/0+$/, "").replace(/\.$/, "");
  return s;
}

/** Quote a client-supplied identifier for an error message, bounded. */
export function quote(s: string): string {
  return JSON.stringify(s.length > 100 ? s.slice(0, 100) + "…" : s);
}

/**
 * `zdr` / `tee` query filters: absent, or exactly `true`. Anything else (including
 * `false` and a repeated parameter) is 400 with the spec's message.
 */
export function parseCatalogFilter(params: URLSearchParams): CatalogFilter {
  const one = (name: "zdr" | "tee"): boolean => {
    const all = params.getAll(name);
    if (all.length === 0) return false;
    if (all.length === 1 && all[0] === "true") return true;
    throw badParam(name, `invalid value for '${name}': the only accepted value is 'true'`);
  };
  return { zdr: one("zdr"), tee: one("tee") };
}

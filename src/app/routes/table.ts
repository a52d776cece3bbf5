/**
 * The route table: every endpoint the gateway serves, one row each (row.ts
 * says what a row holds). The router (app.ts), the OpenAPI document
 * (`GET /openapi.json`, below) and the service capabilities
 * (`SERVICE_CAPABILITIES`) are built from it and from nothing else.
 */
import { openApiDocument } from "../../operator/mod.ts";
import { ADMIN_ROUTES } from "./admin.ts";
import { INFERENCE_ROUTES } from "./inference.ts";
import { PUBLIC_ROUTES } from "./public.ts";
import { capabilitiesOf, operationsOf, type RouteRow } from "./row.ts";

/** The version of the HTTP API described at /openapi.json. */
export const API_VERSION = "1.0.0";

/**
 * The table of `rows` plus `GET /openapi.json`, which serves the document of
 * that same table (built on first request, then served as is).
 */
export function routeTable(rows: readonly RouteRow[]): readonly RouteRow[] {
  let openapi: string | undefined;
  const table: RouteRow[] = [...rows, {
    method: "GET",
    path: "/openapi.json",
    handler: () => {
      openapi ??= JSON.stringify(openApiDocument(API_VERSION, operationsOf(table)));
      return new Response(openapi, {
        headers: { "content-type": "application/json", "cache-control": "public, max-age=300" },
      });
    },
    envelope: "openai",
    auth: "none",
    doc: { summary: "This document", tag: "operations", errors: [] },
  }];
  return table;
}

export const ROUTES: readonly RouteRow[] = routeTable([
  ...INFERENCE_ROUTES,
  ...PUBLIC_ROUTES,
  ...ADMIN_ROUTES,
]);

/** What the gateway declares it serves (in every report's `service_capabilities`). */
export const SERVICE_CAPABILITIES = capabilitiesOf(ROUTES);

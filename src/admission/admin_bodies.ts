/**
 * The request bodies of the admin API's key operations (zod): validated by
 * handlers/admin.ts and described by the API document (operator/openapi.ts).
 */
import { z } from "zod";
import { TIERS } from "../keys/mod.ts";

const credits = z.string().regex(/^\d+(\.\d{1,9})?$/, "a decimal amount of credits");
const limit = z.number().int().positive();
const tier = z.enum(TIERS);

export const CreateKeyBody = z.strictObject({
  tier,
  name: z.string().max(200).optional(),
  credits: credits.optional(),
  rpm: limit.optional(),
  tpm: limit.optional(),
});
export const CreditBody = z.strictObject({ amount: credits });
export const UpdateKeyBody = z.strictObject({
  tier: tier.optional(),
  rpm: limit.nullable().optional(),
  tpm: limit.nullable().optional(),
});

/**
 * The ACI `source_provenance` a report carries: how the measured artifact
 * connects to the source. The build (`enclave/manifest.ts`) produces it; the
 * reports only consume it, so the shape is defined here, beside them.
 */

/** How the measured artifact connects to the source (the `image_provenance` value). */
export interface ImageProvenance {
  manifest_format: string;
  kind: "binary" | "bundle" | "source-only";
  binary_sha256: string | null;
  binary_sha384: string | null;
  /** The bundle (`deno bundle` output) and the Deno executable running it, for `kind: bundle`. */
  bundle_sha256: string | null;
  runtime_sha256: string | null;
  /** The command line (with permissions) that starts the artifact. */
  run: string[] | null;
  source_digest: string;
  source_commit: string | null;
  source_dirty: boolean | null;
  deno_version: string;
  deno_lock_sha256: string | null;
  attestation_url: string | null;
}

/** The ACI `attestation.source_provenance` object. */
export interface SourceProvenance {
  repo_url: string | null;
  repo_commit: string | null;
  image_digest: string | null;
  image_provenance: ImageProvenance;
}

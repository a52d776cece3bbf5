/**
 * `GET /verify`: a page where a person checks a receipt in their browser,
 * and `GET /verify/app.js`, its script (built from the project's verify
 * library by enclave/build_verify_page.ts; see src/verify/browser/). The
 * page states what trusting a page served by the gateway itself means, and
 * how to run the same checks offline. Strict CSP: scripts from this origin
 * only, requests to this origin only.
 */
import { VERIFY_PAGE_SCRIPT } from "../verify/mod.ts";
import { sha256Hex } from "../aci/mod.ts";

const SCRIPT_SHA256 = sha256Hex(VERIFY_PAGE_SCRIPT);

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "connect-src 'self'",
  "style-src 'unsafe-inline'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Verify a receipt</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#1b1f24}
h1{font-size:1.5rem}h2{font-size:1.1rem;margin-top:1.6rem}
textarea{width:100%;min-height:4.5rem;font:12px ui-monospace,monospace}
input[type=text],input[type=password]{width:100%;font:13px ui-monospace,monospace}
.drop{border:2px dashed #9aa4b2;border-radius:6px;padding:.5rem;margin:.4rem 0}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:.8rem}
button{font-size:1rem;padding:.45rem 1.4rem;margin:.8rem 0}
#checks{list-style:none;padding:0;font:13px ui-monospace,monospace}
#checks li{padding:.2rem .4rem;margin:.15rem 0;border-radius:4px}
.pass{background:#e3f6e8}.fail{background:#fde4e4}.unknown{background:#eef0f3}.dev{background:#fff1c7}
#verdict{font-weight:600;padding:.4rem}
.chain{display:flex;align-items:center;gap:.3rem;margin:1rem 0;flex-wrap:wrap}
.node{border:2px solid #56606b;border-radius:8px;padding:.4rem .7rem;min-width:9rem;text-align:center}
.node.pass{border-color:#1a7f37}.node.fail{border-color:#cf222e}.node.dev{border-color:#bf8700}
#checkpoint{font:12px ui-monospace,monospace;background:#f6f8fa;padding:.5rem;white-space:pre-wrap}
.node .sub{display:block;font:11px ui-monospace,monospace;color:#57606a}
.arrow{font-size:1.3rem;color:#57606a}
.note{background:#fff8c5;border-left:4px solid #d4a72c;padding:.5rem .8rem}
code{font:13px ui-monospace,monospace}
</style>
</head>
<body data-state="loading">
<h1>Verify a receipt</h1>
<p>Every response of this gateway carries an <code>x-receipt-id</code>: a receipt signed inside the
gateway's TEE that binds the exact request and response bytes to an attested keyset. This page runs
the same checks as <code>deno task verify</code>, here in your browser: it fetches the attestation
report with a fresh random nonce, checks the report, then the receipt's keyset digest, its Ed25519
signature (over its JCS form), the hashes of the bodies you give, and the upstream session it names.</p>

<div class="note">
<p><strong>What trusting this page means.</strong> This page and its script are served by the
gateway they check. A gateway that is not what its attestation says could serve a page that
reports success regardless. The script is part of the gateway's measured source (SHA-256
<code id="script-sha256">${SCRIPT_SHA256}</code>, built from <code>src/verify/</code>), so it is
only as trustworthy as the attestation you already rely on; and this page cannot check the
hardware quote's signature chain (that needs Intel/AMD collateral). For a check that does not
depend on the gateway at all, run it offline on your own machine:</p>
<pre><code>npx -y deno@2.9.6 task verify --receipt receipt.json --report https://GATEWAY/v1/aci/attestation \\
  --request request.json --response response.bin [--require-verified-upstream]</code></pre>
<p>(<code>--report</code> given a URL fetches it with a fresh nonce; a saved report file works
too, with <code>--nonce</code> and the nonce you fetched it with. Add <code>--allow-dev</code> only
for a development gateway.)</p>
</div>

<h2>1. The receipt</h2>
<div class="grid">
<div><label>Receipt id <input type="text" id="receipt-id" placeholder="rcpt-…"></label></div>
<div><label>Your API key (sent only to this gateway, to fetch your receipt and its session)
<input type="password" id="api-key" autocomplete="off"></label></div>
</div>
<div class="drop" data-drop="receipt-file">or paste the receipt JSON, or drop its file here
<textarea id="receipt" placeholder='{"api_version":"aci/1", …}'></textarea>
<input type="file" id="receipt-file"></div>

<h2>2. The bodies (exact bytes: files are safer than pasting)</h2>
<div class="grid">
<div class="drop" data-drop="request-file">Request body <input type="file" id="request-file">
<textarea id="request" placeholder="the JSON you sent"></textarea></div>
<div class="drop" data-drop="response-file">Response body (for a stream, the whole raw stream)
<input type="file" id="response-file"><textarea id="response" placeholder="what you received"></textarea></div>
</div>
<label><input type="checkbox" id="require-verified"> require a verified (attested) upstream</label><br>
<label><input type="checkbox" id="allow-dev"> accept development (non-hardware) evidence</label>
<br><button id="verify" type="button">Verify</button>

<h2>Chain</h2>
<div class="chain">
<div class="node unknown" id="node-report">attestation report<span class="sub">not checked</span></div>
<span class="arrow">→</span>
<div class="node unknown" id="node-keyset">keyset<span class="sub">not checked</span></div>
<span class="arrow">→</span>
<div class="node unknown" id="node-receipt">receipt<span class="sub">not checked</span></div>
<span class="arrow">→</span>
<div class="node unknown" id="node-session">upstream session<span class="sub">not checked</span></div>
<span class="arrow">→</span>
<div class="node unknown" id="node-log">transparency log<span class="sub">not checked</span></div>
</div>
<div id="verdict"></div>
<ul id="checks"></ul>
<h2>Checkpoint used</h2>
<pre id="checkpoint">(none yet: give the receipt id and your key)</pre>
<script type="module" src="/verify/app.js"></script>
</body>
</html>
`;

const headers = (type: string) => ({
  "content-type": type,
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache",
});

export function verifyPage(): Response {
  return new Response(HTML, { headers: headers("text/html; charset=utf-8") });
}

export function verifyScript(): Response {
  return new Response(VERIFY_PAGE_SCRIPT, {
    headers: { ...headers("text/javascript; charset=utf-8"), etag: `"${SCRIPT_SHA256}"` },
  });
}

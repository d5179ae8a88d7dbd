// An MCP host signing a person in: the official TypeScript SDK client (1.x) with an OAuth
// provider for the development client of the local authorization server. Run as
//   node oauth_host.mjs '<plan JSON>'   with plan {"url", "clientId", "redirectUrl", "steps"}
// The SDK meets the edge's 401, reads its resource metadata and the authorization server's, and
// asks for an authorization: this script prints {"authorize": URL} on a line and reads the
// redirect the person's browser would reach (with the code) from stdin. Then it finishes the
// flow, connects with the token and prints {"steps": [...]}, as sdk_client.mjs does.
import { createInterface } from "node:readline";

import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(process.env.NEMO_OAUTH_HOST_PLAN);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
let saved;
let verifier;
const provider = {
  get redirectUrl() {
    return plan.redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "nemo tests (TypeScript SDK)",
      redirect_uris: [plan.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  // Pre-registered: the development client, so no dynamic registration happens.
  clientInformation: () => ({ client_id: plan.clientId }),
  tokens: () => saved,
  saveTokens: (tokens) => {
    saved = tokens;
  },
  redirectToAuthorization: (url) => {
    process.stdout.write(`${JSON.stringify({ authorize: url.toString() })}\n`);
  },
  saveCodeVerifier: (value) => {
    verifier = value;
  },
  codeVerifier: () => verifier,
};

async function connect() {
  const client = new Client({ name: "nemo-tests-oauth-host", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(plan.url), { authProvider: provider });
  await client.connect(transport);
  return client;
}

let client;
try {
  client = await connect();
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
  const { value: callback } = await lines.next();
  const transport = new StreamableHTTPClientTransport(new URL(plan.url), { authProvider: provider });
  await transport.finishAuth(new URL(callback).searchParams.get("code"));
  client = await connect();
}
const steps = [];
for (const step of plan.steps) {
  try {
    steps.push({ result: await client.callTool({ name: step.name, arguments: step.arguments }) });
  } catch (error) {
    steps.push({ thrown: { name: error?.constructor?.name, message: String(error?.message) } });
  }
}
process.stdout.write(`${JSON.stringify({ steps, token: saved?.access_token })}\n`);
await client.close();
process.exit(0);

// Drives the MCP edge with an official TypeScript SDK client. Reads a plan on stdin:
//   {"sdk": "v1" | "v2", "negotiation": "legacy" | "auto", "url": "...", "headers": {...},
//    "steps": [{"op": "list", "params": {...}} | {"op": "call", "name": "...", "arguments": {...}}]}
// and prints one JSON object: the negotiated protocol version and, per step, what the client
// returned ({"result": ...}) or threw ({"thrown": {"name", "code", "message"}}). The tests judge
// the outcome; this script only reports it.

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function connect(plan) {
  const info = { name: "nemo-toolplane-tests", version: "1.0.0" };
  const options = { requestInit: { headers: plan.headers } };
  const url = new URL(plan.url);
  if (plan.sdk === "v1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import(
      "@modelcontextprotocol/sdk/client/streamableHttp.js"
    );
    const client = new Client(info);
    const transport = new StreamableHTTPClientTransport(url, options);
    await client.connect(transport);
    return { client, version: () => transport.protocolVersion };
  }
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  const client = new Client(info, { versionNegotiation: { mode: plan.negotiation ?? "legacy" } });
  await client.connect(new StreamableHTTPClientTransport(url, options));
  return { client, version: () => client.getNegotiatedProtocolVersion() };
}

function thrown(error) {
  return { name: error?.constructor?.name, code: error?.code, message: String(error?.message) };
}

async function run(client, step) {
  try {
    if (step.op === "list") return { result: await client.listTools(step.params) };
    if (step.op === "call") {
      return { result: await client.callTool({ name: step.name, arguments: step.arguments }) };
    }
    return { thrown: { name: "PlanError", message: `unknown op ${step.op}` } };
  } catch (error) {
    return { thrown: thrown(error) };
  }
}

const plan = JSON.parse(await readStdin());
const { client, version } = await connect(plan);
const steps = [];
for (const step of plan.steps) steps.push(await run(client, step));
process.stdout.write(JSON.stringify({ protocolVersion: version(), steps }));
await client.close();

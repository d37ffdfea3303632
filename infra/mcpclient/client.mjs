// The official MCP TypeScript SDK as a client of the service's /api/mcp,
// for infra/local's TestOfficialMCPClient. Two modes:
//
//   node client.mjs oauth <mcp-url>   the SDK's own OAuth client: discovery
//       (401 + WWW-Authenticate, protected resource and authorization
//       server metadata), dynamic registration, PKCE. It prints
//       "AUTHORIZE <url>" where a browser would open, reads the code the
//       redirect carried from stdin (the test drives the pages over HTTP),
//       finishes the flow and lists the tools.
//   node client.mjs token <mcp-url>   a script with a personal access token
//       (MCP_TOKEN): lists the tools and calls the first with
//       {"text": "from node"}.
//
// Every result is printed as one line "RESULT <json>"; errors exit 1.
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const [mode, url] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

class MemoryProvider {
  constructor() {
    this.info = undefined;
    this.saved = undefined;
    this.verifier = undefined;
  }
  get redirectUrl() { return 'http://127.0.0.1:33418/callback'; }
  get clientMetadata() {
    return {
      client_name: 'MCP TypeScript SDK (test)',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this.info; }
  saveClientInformation(info) { this.info = info; }
  tokens() { return this.saved; }
  saveTokens(tokens) { this.saved = tokens; }
  redirectToAuthorization(authorizationUrl) { console.log('AUTHORIZE ' + authorizationUrl.toString()); }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
}

async function connect(transport) {
  const client = new Client({ name: 'workflowchat-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

async function main() {
  if (mode === 'oauth') {
    const provider = new MemoryProvider();
    let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    try {
      await connect(transport);
      throw new Error('connected without authorization');
    } catch (e) {
      if (!(e instanceof UnauthorizedError)) throw e;
    }
    const { value: code } = await lines.next();
    await transport.finishAuth(code.trim());
    transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    const client = await connect(transport);
    const tools = await client.listTools();
    console.log('RESULT ' + JSON.stringify({ tools: tools.tools.map((t) => t.name), tokenType: provider.saved.token_type, refresh: !!provider.saved.refresh_token }));
    await client.close();
  } else if (mode === 'token') {
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: 'Bearer ' + process.env.MCP_TOKEN } },
    });
    const client = await connect(transport);
    const tools = await client.listTools();
    const call = await client.callTool({ name: tools.tools[0].name, arguments: { text: 'from node' } });
    console.log('RESULT ' + JSON.stringify({ tools: tools.tools.map((t) => t.name), structured: call.structuredContent, isError: !!call.isError }));
    await client.close();
  } else {
    throw new Error('usage: node client.mjs oauth|token <mcp-url>');
  }
  process.exit(0);
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});

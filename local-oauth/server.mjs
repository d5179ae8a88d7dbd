// Nemo's local OpenID provider: oidc-provider (OpenID Certified) configured as the platform's
// authorization server is configured in production, for `make run` and the tests.
//
//   node server.mjs --issuer http://127.0.0.1:50055 --state-dir DIR --accounts FILE
//                   --dev-password PASSWORD --dev-client-id ID --dev-redirect-uri URI
//                   --tool-scope SCOPE [--tool-scope SCOPE ...]
//                   [--resource URL ...] [--opaque-resource URL ...] [--clients FILE]
//
// The launcher (nemo_devtools.oauth_server) names the tool scopes, the tool plane's, and the
// development client's redirect, so that they are written down in one place. --clients names a
// JSON list of further registered clients (client metadata as RFC 7591 writes it), for example
// the console, a confidential client with its secret and redirect URI.
//
// Authorization code with PKCE (S256, required of every client), resource indicators (RFC 8707)
// that issue JWT access tokens (RFC 9068) whose `aud` is the resource asked for (opaque ones for
// the resources named by --opaque-resource, for resource servers that introspect), dynamic client
// registration (RFC 7591), client ID metadata documents (draft-02), refresh tokens, token
// introspection (RFC 7662), revocation, RP-initiated logout. The signing key and cookie keys are
// made on first start and kept in the state directory, with clients, grants and refresh tokens,
// so a restart invalidates nothing.
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { Provider, errors } from 'oidc-provider';

import { interactions } from './interactions.mjs';
import { fileStore } from './store.mjs';

// Resource servers on this machine need no listing: in development they all run here.
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const ACCESS_TOKEN_SECONDS = 3600;
const DAY_SECONDS = 24 * 3600;

const { values: args } = parseArgs({
  options: {
    issuer: { type: 'string' },
    'state-dir': { type: 'string' },
    accounts: { type: 'string' },
    'dev-password': { type: 'string' },
    'dev-client-id': { type: 'string' },
    'dev-redirect-uri': { type: 'string' },
    'tool-scope': { type: 'string', multiple: true, default: [] },
    resource: { type: 'string', multiple: true, default: [] },
    'opaque-resource': { type: 'string', multiple: true, default: [] },
    clients: { type: 'string' },
  },
  strict: true,
});
const required = [
  'issuer',
  'state-dir',
  'accounts',
  'dev-password',
  'dev-client-id',
  'dev-redirect-uri',
];
for (const name of required) {
  if (!args[name]) {
    console.error(`local-oauth: --${name} is required`);
    process.exit(2);
  }
}
if (args['tool-scope'].length === 0) {
  console.error('local-oauth: --tool-scope is required (each scope the tools ask for)');
  process.exit(2);
}
// The scopes the tool plane's tools ask for; every resource offers them all.
const TOOL_SCOPES = args['tool-scope'];

function keptSecret(path, make) {
  if (!existsSync(path)) writeFileSync(path, JSON.stringify(make()), { mode: 0o600 });
  return JSON.parse(readFileSync(path, 'utf8'));
}

function signingKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}

const stateDir = args['state-dir'];
mkdirSync(stateDir, { recursive: true, mode: 0o700 });
const jwks = keptSecret(join(stateDir, 'jwks.json'), () => ({ keys: [signingKey()] }));
const cookieKeys = keptSecret(join(stateDir, 'cookie-keys.json'), () => [
  randomBytes(32).toString('base64url'),
]);
const accounts = JSON.parse(readFileSync(args.accounts, 'utf8'));
const accountIds = new Set(accounts.map((account) => account.id));
const opaqueResources = new Set(args['opaque-resource']);
const listedResources = new Set([...args.resource, ...opaqueResources]);
const registeredClients = args.clients ? JSON.parse(readFileSync(args.clients, 'utf8')) : [];

const provider = new Provider(args.issuer, {
  adapter: fileStore(join(stateDir, 'store.json')),
  jwks,
  cookies: { keys: cookieKeys },
  clients: [
    {
      client_id: args['dev-client-id'],
      client_name: 'Nemo learning agent (development)',
      application_type: 'native', // RFC 8252: a loopback redirect on any port
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: [args['dev-redirect-uri']],
    },
    ...registeredClients,
  ],
  async findAccount(ctx, sub) {
    if (!accountIds.has(sub)) return undefined;
    return { accountId: sub, claims: async () => ({ sub }) };
  },
  scopes: ['openid', 'offline_access', ...TOOL_SCOPES],
  claims: { openid: ['sub'] },
  responseTypes: ['code'],
  ttl: {
    Interaction: 3600,
    Session: 14 * DAY_SECONDS,
    Grant: 14 * DAY_SECONDS,
    AuthorizationCode: 60,
    AccessToken: ACCESS_TOKEN_SECONDS,
    IdToken: ACCESS_TOKEN_SECONDS,
    RefreshToken: 14 * DAY_SECONDS,
  },
  pkce: { required: () => true },
  // MCP hosts rarely ask for offline_access; every client allowed the grant gets one.
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    clientIdMetadataDocument: { enabled: true, ack: 'draft-02' },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      async getResourceServerInfo(ctx, resource) {
        if (!listedResources.has(resource) && !LOOPBACK_HOSTS.has(new URL(resource).hostname)) {
          throw new errors.InvalidTarget(`${resource} is not a resource of this server`);
        }
        return {
          scope: TOOL_SCOPES.join(' '),
          audience: resource,
          accessTokenFormat: opaqueResources.has(resource) ? 'opaque' : 'jwt',
          accessTokenTTL: ACCESS_TOKEN_SECONDS,
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
});

// OAuth 2.1 (section 3.2.2.1): a request without a scope gets a predefined one. The default is
// `openid` alone, so such a token reaches no tool: tools need the scopes asked for by name.
provider.use(async (ctx, next) => {
  if (ctx.method === 'GET' && ctx.path === '/auth' && ctx.query.scope === undefined) {
    ctx.query = { ...ctx.query, scope: 'openid' };
  }
  await next();
});
provider.use(interactions(provider, accounts, args['dev-password']));
provider.on('server_error', (ctx, error) => console.error('local-oauth: server error', error));

const { hostname, port } = new URL(args.issuer);
const server = provider.listen(Number(port), hostname.replace(/^\[|\]$/gu, ''), () => {
  console.log(JSON.stringify({ message: 'listening', issuer: args.issuer }));
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}

// The development sign-in and consent pages: plain server-rendered HTML, no scripts.
//
// Their contract, which `nemo dev oauth-token` and the tests' headless client follow:
//   GET  /interaction/<uid>          the sign-in page (prompt "login") or the consent page
//   POST /interaction/<uid>/login    form fields `user` (a seeded user id) and `password`
//   POST /interaction/<uid>/confirm  consent to what the page lists
//   POST /interaction/<uid>/abort    refuse (the client gets error=access_denied)
// A refused sign-in answers 401 with the page again and the reason in its role="alert" element.
import { createHash, timingSafeEqual } from 'node:crypto';

import { errors } from 'oidc-provider';

const FORM_LIMIT_BYTES = 16 * 1024;
const ROUTE = /^\/interaction\/([\w-]+)(?:\/(login|confirm|abort))?$/u;

const escape = (value) =>
  String(value).replace(
    /[&<>"']/gu,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c],
  );

const digest = (value) => createHash('sha256').update(String(value)).digest();

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 34rem; margin: 2rem auto;">
<p style="background: #fde68a; padding: .5rem;"><strong>Development sign-in.</strong>
Nemo's local authorization server for <code>make run</code> and the tests; production uses the
platform's OpenID provider.</p>
<h1>${escape(title)}</h1>
${body}
</body></html>`;
}

function signInPage(uid, accounts, clientName, error) {
  const options = accounts
    .map((a) => `<option value="${escape(a.id)}">${escape(a.id)} (${escape(a.role)})</option>`)
    .join('');
  const alert = error ? `<p role="alert" style="color: #b91c1c;">${escape(error)}</p>` : '';
  return page(
    'Sign in',
    `${alert}<p><strong>${escape(clientName)}</strong> asks you to sign in.</p>
<form method="post" action="/interaction/${escape(uid)}/login" autocomplete="off">
<label>Seeded user <select name="user">${options}</select></label><br><br>
<label>Development password <input type="password" name="password"></label><br><br>
<button type="submit">Sign in</button></form>
<form method="post" action="/interaction/${escape(uid)}/abort"><button>Cancel</button></form>`,
  );
}

function consentPage(uid, accountId, clientName, details) {
  const scopes = [
    ...(details.missingOIDCScope ?? []),
    ...Object.values(details.missingResourceScopes ?? {}).flat(),
  ];
  const resources = Object.keys(details.missingResourceScopes ?? {});
  const items = (values) => values.map((v) => `<li><code>${escape(v)}</code></li>`).join('');
  return page(
    'Allow access',
    `<p>Signed in as <strong>${escape(accountId)}</strong>.</p>
<p><strong>${escape(clientName)}</strong> asks to act for you with these scopes:</p>
<ul>${items(scopes)}</ul>
${resources.length ? `<p>at</p><ul>${items(resources)}</ul>` : ''}
<form method="post" action="/interaction/${escape(uid)}/confirm"><button>Allow</button></form>
<form method="post" action="/interaction/${escape(uid)}/abort"><button>Deny</button></form>`,
  );
}

async function readForm(ctx) {
  if (!ctx.is('application/x-www-form-urlencoded')) {
    ctx.throw(415, 'expected a form (application/x-www-form-urlencoded)');
  }
  const chunks = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += chunk.length;
    if (size > FORM_LIMIT_BYTES) ctx.throw(413, 'form too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

async function confirm(provider, ctx, details) {
  const {
    prompt,
    params,
    session: { accountId },
  } = details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId, clientId: params.client_id });
  if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(prompt.details.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scopes.join(' '));
  }
  const grantId = await grant.save();
  return { consent: details.grantId ? {} : { grantId } };
}

// Koa middleware serving the interaction routes; `accounts` are the users who may sign in.
export function interactions(provider, accounts, password) {
  const byId = new Map(accounts.map((account) => [account.id, account]));
  const expected = digest(password);

  return async (ctx, next) => {
    const match = ROUTE.exec(ctx.path);
    if (!match) return next();
    ctx.set('cache-control', 'no-store');
    const [, uid, action] = match;
    try {
      const details = await provider.interactionDetails(ctx.req, ctx.res);
      if (details.uid !== uid) ctx.throw(400, 'interaction mismatch');
      const client = await provider.Client.find(details.params.client_id);
      const clientName = client?.clientName ?? details.params.client_id;
      const method = action ? 'POST' : 'GET';
      if (ctx.method !== method) ctx.throw(405, `use ${method}`);

      if (!action) {
        ctx.type = 'html';
        ctx.body =
          details.prompt.name === 'login'
            ? signInPage(uid, accounts, clientName)
            : consentPage(uid, details.session.accountId, clientName, details.prompt.details);
        return undefined;
      }
      if (action === 'abort') {
        const result = { error: 'access_denied', error_description: 'the user refused' };
        return provider.interactionFinished(ctx.req, ctx.res, result);
      }
      if (action === 'login') {
        if (details.prompt.name !== 'login') ctx.throw(400, 'this interaction asks for consent');
        const form = await readForm(ctx);
        const user = form.get('user') ?? '';
        const refusal = !byId.has(user)
          ? `unknown user: ${user}`
          : !timingSafeEqual(digest(form.get('password') ?? ''), expected)
            ? 'wrong development password'
            : undefined;
        if (refusal) {
          ctx.status = 401;
          ctx.type = 'html';
          ctx.body = signInPage(uid, accounts, clientName, refusal);
          return undefined;
        }
        return provider.interactionFinished(ctx.req, ctx.res, { login: { accountId: user } });
      }
      if (details.prompt.name !== 'consent') ctx.throw(400, 'this interaction asks for sign-in');
      const result = await confirm(provider, ctx, details);
      return provider.interactionFinished(ctx.req, ctx.res, result, {
        mergeWithLastSubmission: true,
      });
    } catch (error) {
      if (!(error instanceof errors.SessionNotFound)) throw error;
      ctx.status = 400;
      ctx.type = 'html';
      ctx.body = page('Sign-in expired', '<p role="alert">Start again from the application.</p>');
      return undefined;
    }
  };
}

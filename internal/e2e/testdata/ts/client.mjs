// One MCP client run for the end-to-end tests, with the official TypeScript
// SDK: v1 (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client).
// The Go test passes one JSON argument and reads one JSON line per event on
// stdout:
//   {"sdk":"v1","url":"http://127.0.0.1:8080/mcp","token":"...","scenario":"call","tool":"whoami"}
// scenarios:
//   call      connect with the bearer token, call the tool: {"ok":true,"text":...}
//   discover  connect through an OAuth provider holding the token (if any):
//             the SDK's discovery (401) or step-up (403 insufficient_scope)
//             ends in the authorization redirect, reported as
//             {"ok":false,"error":...,"authorizationURL":...}
//   elicit    declare URL elicitation, call the tool; on
//             UrlElicitationRequiredError report {"event":"elicitation",...},
//             wait for a line on stdin, call again and report the result.
//   list      page through tools/list (at most 20 pages), following each
//             nextCursor: {"ok":true,"pages":[{"tools":[...],"nextCursor":...}]};
//             with v2, "all" is what the SDK's own paging (listTools())
//             collected.
//   complete  declare URL elicitation, call the tool; on
//             UrlElicitationRequiredError report {"event":"elicitation",...},
//             wait (at most 10s) for notifications/elicitation/complete of
//             that elicitation on the session's stream, report
//             {"event":"completed","elicitationId":...}, call again and
//             report the result. No stdin: only the notification moves on.
//   dpop      (v2) call the tool with a DPoP-bound token: the SDK's withDpop
//             sends "Authorization: DPoP <token>" and a fresh proof signed
//             with args.dpopKey (a private P-256 JWK, its thumbprint in
//             args.jkt) on every request: {"ok":true,"text":...}
//   skills    (v2) the skills extension's host side (SkillsClient): list the
//             skills, get args.get by its SKILL.md URI and read the
//             directory args.directory, one line each:
//             {"op":"list","ok":true,"uris":[...]},
//             {"op":"get","ok":true,"description":...}, {"op":"directory",
//             "ok":true,"uris":[...]}, or the op with the error.
// With args.sampling (v2), the client speaks 2026-07-28 (pinned), declares
// sampling and answers every sampling request with args.sampling as what
// its model wrote.
// Errors are reported as {"ok":false,"error":<class>,"code":...,"message":...}.
import { createInterface } from 'node:readline';

const args = JSON.parse(process.argv[2]);

async function load(sdk) {
    if (sdk === 'v2') {
        const m = await import('@modelcontextprotocol/client');
        return {
            Client: m.Client, Transport: m.StreamableHTTPClientTransport, UrlElicitationRequiredError: m.UrlElicitationRequiredError,
            onElicitationComplete: (client, fn) => client.setNotificationHandler('notifications/elicitation/complete', fn),
            listPage: (client, params) => client.request({ method: 'tools/list', params }),
            // v2's listTools() without a cursor follows every page itself.
            listAll: async (client) => (await client.listTools()).tools,
        };
    }
    const c = await import('@modelcontextprotocol/sdk/client/index.js');
    const t = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const types = await import('@modelcontextprotocol/sdk/types.js');
    return {
        Client: c.Client, Transport: t.StreamableHTTPClientTransport, UrlElicitationRequiredError: types.UrlElicitationRequiredError,
        onElicitationComplete: (client, fn) => client.setNotificationHandler(types.ElicitationCompleteNotificationSchema, fn),
        listPage: (client, params) => client.request({ method: 'tools/list', params }, types.ListToolsResultSchema),
    };
}

function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

function describe(err) {
    return {
        ok: false,
        error: err?.constructor?.name ?? String(err),
        code: err?.code,
        message: String(err?.message ?? err),
        data: err?.data,
    };
}

// provider is an OAuth client that has the token (or none) and stops at the
// authorization redirect, recording where the SDK's discovery sent it.
function provider(token, seen) {
    return {
        get redirectUrl() { return 'http://127.0.0.1:1/callback'; },
        get clientMetadata() {
            return { client_name: 'e2e', redirect_uris: ['http://127.0.0.1:1/callback'], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'none' };
        },
        clientInformation() { return { client_id: 'e2e-client' }; },
        saveClientInformation() {},
        tokens() { return token ? { access_token: token, token_type: 'Bearer' } : undefined; },
        saveTokens() {},
        redirectToAuthorization(url) { seen.authorizationURL = url.toString(); },
        saveCodeVerifier(v) { seen.verifier = v; },
        codeVerifier() { return seen.verifier ?? 'verifier'; },
    };
}

// dpopFetch is fetch wrapped by the v2 SDK's withDpop, signing proofs
// with the key the Go test bound the token to.
async function dpopFetch(privateJwk, thumbprint, token) {
    const m = await import('@modelcontextprotocol/client');
    const alg = { name: 'ECDSA', namedCurve: 'P-256' };
    const { d, ...publicJwk } = privateJwk;
    const privateKey = await crypto.subtle.importKey('jwk', privateJwk, alg, false, ['sign']);
    const publicKey = await crypto.subtle.importKey('jwk', publicJwk, alg, true, ['verify']);
    const session = await m.DpopSession.create({ keyPair: { privateKey, publicKey, publicJwk, thumbprint, alg: 'ES256' } });
    return m.withDpop(session, () => token)(fetch);
}

// skills runs the skills scenario on a connected v2 client; each operation
// reports its own result, so that one refusal does not hide the others.
async function skills(client) {
    const { SkillsClient } = await import('@modelcontextprotocol/client/ext/skills');
    const host = new SkillsClient(client);
    const op = async (name, fn) => {
        try {
            emit({ op: name, ok: true, ...(await fn()) });
        } catch (err) {
            emit({ op: name, ...describe(err) });
        }
    };
    await op('list', async () => ({ uris: (await host.list()).skills.map((s) => s.uri) }));
    await op('get', async () => ({ description: (await host.get(args.get)).skill.frontmatter.description }));
    await op('directory', async () => ({ uris: (await host.readDirectory(args.directory)).resources.map((r) => r.uri) }));
}

async function main() {
    const sdk = await load(args.sdk);
    const url = new URL(args.url);
    const seen = {};
    const options = {};
    if (args.scenario === 'discover') {
        options.authProvider = provider(args.token, seen);
    } else if (args.scenario === 'dpop') {
        options.fetch = await dpopFetch(args.dpopKey, args.jkt, args.token);
    } else if (args.token) {
        options.requestInit = { headers: { Authorization: 'Bearer ' + args.token } };
    }
    const elicits = args.scenario === 'elicit' || args.scenario === 'complete';
    const capabilities = elicits ? { elicitation: { url: {} } } : {};
    const clientOptions = { capabilities };
    if (args.sampling !== undefined) {
        capabilities.sampling = {};
        clientOptions.versionNegotiation = { mode: { pin: '2026-07-28' } };
    }
    const client = new sdk.Client({ name: 'extauthz-e2e', version: '1.0.0' }, clientOptions);
    if (args.sampling !== undefined) {
        client.setRequestHandler('sampling/createMessage', async () => ({
            role: 'assistant', content: { type: 'text', text: args.sampling }, model: 'e2e-model',
        }));
    }
    // The completions the session's stream delivered, by elicitation id.
    const completed = new Map();
    const waiting = new Map();
    if (args.scenario === 'complete') {
        sdk.onElicitationComplete(client, (n) => {
            const id = n.params?.elicitationId;
            completed.set(id, true);
            waiting.get(id)?.();
        });
    }
    const completion = (id) => new Promise((resolve, reject) => {
        if (completed.has(id)) {
            resolve();
            return;
        }
        const timer = setTimeout(() => reject(new Error('no notifications/elicitation/complete for ' + id)), 10000);
        waiting.set(id, () => { clearTimeout(timer); resolve(); });
    });
    const transport = new sdk.Transport(url, options);
    const call = async () => {
        const res = await client.callTool({ name: args.tool, arguments: args.arguments ?? {} });
        const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
        return { ok: !res.isError, isError: !!res.isError, text };
    };
    try {
        await client.connect(transport);
        if (args.scenario === 'discover') {
            emit({ ok: true, connected: true });
            return;
        }
        if (args.scenario === 'skills') {
            await skills(client);
            return;
        }
        if (args.scenario === 'list') {
            const pages = [];
            let cursor;
            for (let i = 0; i < 20; i++) {
                const res = await sdk.listPage(client, cursor === undefined ? {} : { cursor });
                pages.push({ tools: res.tools.map((t) => t.name), nextCursor: res.nextCursor });
                cursor = res.nextCursor;
                if (cursor === undefined) {
                    break;
                }
            }
            const all = sdk.listAll ? (await sdk.listAll(client)).map((t) => t.name) : undefined;
            emit({ ok: true, pages, all });
            return;
        }
        if (!elicits) {
            emit(await call());
            return;
        }
        let elicitations;
        try {
            emit(await call());
            return;
        } catch (err) {
            if (!(err instanceof sdk.UrlElicitationRequiredError)) {
                throw err;
            }
            elicitations = err.elicitations ?? err.data?.elicitations;
            emit({ event: 'elicitation', error: err.constructor.name, code: err.code, elicitations });
        }
        if (args.scenario === 'complete') {
            const id = elicitations?.[0]?.elicitationId;
            await completion(id);
            emit({ event: 'completed', elicitationId: id });
        } else {
            const lines = createInterface({ input: process.stdin });
            for await (const _ of lines) {
                break;
            }
            lines.close();
        }
        emit(await call());
    } catch (err) {
        emit({ ...describe(err), authorizationURL: seen.authorizationURL });
    } finally {
        await client.close().catch(() => {});
    }
}

main().then(() => process.exit(0), (err) => {
    emit(describe(err));
    process.exit(1);
});

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
// Errors are reported as {"ok":false,"error":<class>,"code":...,"message":...}.
import { createInterface } from 'node:readline';

const args = JSON.parse(process.argv[2]);

async function load(sdk) {
    if (sdk === 'v2') {
        const m = await import('@modelcontextprotocol/client');
        return { Client: m.Client, Transport: m.StreamableHTTPClientTransport, UrlElicitationRequiredError: m.UrlElicitationRequiredError };
    }
    const c = await import('@modelcontextprotocol/sdk/client/index.js');
    const t = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const types = await import('@modelcontextprotocol/sdk/types.js');
    return { Client: c.Client, Transport: t.StreamableHTTPClientTransport, UrlElicitationRequiredError: types.UrlElicitationRequiredError };
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

async function main() {
    const sdk = await load(args.sdk);
    const url = new URL(args.url);
    const seen = {};
    const options = {};
    if (args.scenario === 'discover') {
        options.authProvider = provider(args.token, seen);
    } else if (args.token) {
        options.requestInit = { headers: { Authorization: 'Bearer ' + args.token } };
    }
    const capabilities = args.scenario === 'elicit' ? { elicitation: { url: {} } } : {};
    const client = new sdk.Client({ name: 'extauthz-e2e', version: '1.0.0' }, { capabilities });
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
        if (args.scenario !== 'elicit') {
            emit(await call());
            return;
        }
        try {
            emit(await call());
            return;
        } catch (err) {
            if (!(err instanceof sdk.UrlElicitationRequiredError)) {
                throw err;
            }
            emit({ event: 'elicitation', error: err.constructor.name, code: err.code, elicitations: err.elicitations ?? err.data?.elicitations });
        }
        const lines = createInterface({ input: process.stdin });
        for await (const _ of lines) {
            break;
        }
        lines.close();
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

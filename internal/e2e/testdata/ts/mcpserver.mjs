// An MCP server for the end-to-end tests, built with the official
// TypeScript SDK v2 (@modelcontextprotocol/server's createMcpHandler,
// served over node:http by @modelcontextprotocol/node's toNodeHandler),
// which speaks 2026-07-28 and the eras before it, and checks a 2026-07-28
// request's Mcp-Method and Mcp-Name against its body itself. The Go test
// passes one JSON argument, {}; the server listens on 127.0.0.1 at a port
// of its own, prints {"port":N}, and for every tool call prints
// {"event":"call","tool":...}, so that the test knows what reached it; it
// stops when its stdin ends. Tools:
//   whoami       answers the JSON observation of the Go test peers
//                (testpeers.Observation): the identity and lineage headers
//                the request arrived with, whether an Authorization header
//                did (never its value)
//   delete_file  answers "deleted"
//   summarize    asks the client's model for a summary (2026-07-28's
//                multi round-trip requests: an input_required result with
//                a sampling/createMessage input request); given it in the
//                retry's inputResponses, prints {"event":"sampled","text":...}
//                and answers "sampled: <text>"
//   resume       answers a call without requestState with an input_required
//                result holding a fresh one (and no input requests: come
//                back later), and a retry with one with "resumed <state>",
//                printing {"event":"resumed","state":...}: as the SDK serves
//                a requestState without a codec, whoever sends it back
// and the skills extension (SEP-2640) with the SDK's own skill catalog:
// skill://hello/SKILL.md, and skill://internal/deploy/SKILL.md with its
// key.txt (skills/list, skills/get, resources/directory/read, and
// resources/read of their files).
import { createServer } from 'node:http';
import { emit, serve } from './peer.mjs';

const observed = [
    'X-User-Id', 'X-Session-Id', 'X-Root-Context-Id', 'X-Parent-Context-Id', 'X-Lineage-Depth', 'X-Actor-Chain',
];

function observation(headers) {
    const seen = {};
    for (const name of observed) {
        const v = headers?.get(name);
        if (v !== null && v !== undefined) {
            seen[name] = [v];
        }
    }
    return JSON.stringify({ peer: 'mcp-ts-v2', headers: seen, authorization: headers?.has('authorization') ?? false });
}

const { McpServer, createMcpHandler, inputRequired, inputResponse } = await import('@modelcontextprotocol/server');
const { toNodeHandler } = await import('@modelcontextprotocol/node');
const { SkillCatalog, memorySkillFiles } = await import('@modelcontextprotocol/server/ext/skills');

const skills = await SkillCatalog.load(memorySkillFiles({
    'hello/SKILL.md': '---\nname: hello\ndescription: Says hello.\n---\nSay hello.\n',
    'internal/deploy/SKILL.md': '---\nname: deploy\ndescription: Deploys with the production key.\n---\nUse key.txt.\n',
    'internal/deploy/key.txt': 'not-a-real-key\n',
}));

// One factory for both eras: 2026-07-28 requests are served statelessly,
// earlier ones by the handler's stateless legacy fallback.
const handler = toNodeHandler(createMcpHandler(() => {
    const server = new McpServer({ name: 'mcp-ts-v2', version: '1.0.0' });
    server.registerTool('whoami', { description: 'Reports the identity and lineage headers this request arrived with.' }, async (ctx) => {
        emit({ event: 'call', tool: 'whoami' });
        return { content: [{ type: 'text', text: observation(ctx?.http?.req?.headers) }] };
    });
    server.registerTool('delete_file', { description: 'Pretends to delete a file.' }, async () => {
        emit({ event: 'call', tool: 'delete_file' });
        return { content: [{ type: 'text', text: 'deleted' }] };
    });
    server.registerTool('summarize', { description: "Summarizes with the client's model." }, async (ctx) => {
        emit({ event: 'call', tool: 'summarize' });
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'summary');
        if (answer.kind !== 'sampling') {
            return inputRequired({
                inputRequests: {
                    summary: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'Summarize.' } }], maxTokens: 50 }),
                },
            });
        }
        emit({ event: 'sampled', text: answer.result.content.text });
        return { content: [{ type: 'text', text: 'sampled: ' + answer.result.content.text }] };
    });
    server.registerTool('resume', { description: 'Resumes the round its requestState names.' }, async (ctx) => {
        const state = ctx.mcpReq.requestState();
        if (state === undefined) {
            return inputRequired({ requestState: 'round-' + Math.random().toString(36).slice(2) });
        }
        emit({ event: 'resumed', state });
        return { content: [{ type: 'text', text: 'resumed ' + state }] };
    });
    skills.attach(server);
    return server;
}));
const httpServer = createServer((req, res) => handler(req, res));
serve(httpServer);

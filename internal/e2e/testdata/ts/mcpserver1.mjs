// An MCP server for the end-to-end tests, built with the official
// TypeScript SDK v1 (@modelcontextprotocol/sdk, 2025-11-25 and earlier),
// stateless over node:http. The Go test passes one JSON argument, {}; the
// server listens on 127.0.0.1 at a port of its own, prints {"port":N}, and
// for every tool call prints {"event":"call","tool":...,"task":...}: task
// is the task the SDK hands the handler as the call's own (extra.taskId),
// which it takes from the request's _meta
// io.modelcontextprotocol/related-task, and under which it would queue the
// answer and set the task's status, looking the task up nowhere without a
// session. It stops when its stdin ends. Tool: whoami, answering "ok".
import { createServer } from 'node:http';
import { emit, serve } from './peer.mjs';

const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');

const httpServer = createServer(async (req, res) => {
    // Stateless: a server and a transport per request.
    const server = new McpServer({ name: 'mcp-ts-v1', version: '1.0.0' });
    server.registerTool('whoami', { description: 'Answers ok.' }, async (extra) => {
        emit({ event: 'call', tool: 'whoami', task: extra?.taskId ?? '' });
        return { content: [{ type: 'text', text: 'ok' }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
        transport.close();
        server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
});
serve(httpServer);

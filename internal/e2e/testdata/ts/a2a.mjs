// An A2A agent and an A2A client for the end-to-end tests, both built with
// the official A2A JavaScript SDK (@a2a-js/sdk, protocol v1.0, JSON-RPC
// binding). The Go test passes one JSON argument:
//
//   {"mode":"agent"}
//     Serves the agent on 127.0.0.1 at a port of its own, printing
//     {"port":N}; then reads lines on stdin, each the base URL clients
//     reach it at (the proxy in front, which starts once the port is
//     known), puts it in the agent card and prints {"ready":true}. The
//     card is at /.well-known/agent-card.json, JSON-RPC at /a2a. Every
//     message is answered with one text part: the JSON observation of the
//     Go test peers (testpeers.Observation) of the request that carried
//     it: the identity and lineage headers that arrived, whether an
//     Authorization header did (never its value), the tenant the SDK
//     served the call for (its call context's tenant); and prints
//     {"event":"message"} for each, so that the test knows what reached it.
//
//     A message whose text is "make a task" is answered with a completed
//     task instead, whose operations (GetTask, CancelTask) the SDK's
//     request handler serves from its task store.
//
//   {"mode":"client","url":"http://127.0.0.1:8080","token":"...",
//    "scenario":"message","contextId":"ctx-1","headers":{"X-User-Id":"mallory"},
//    "tenant":"acme"}
//     Reads the agent card at url and, with the bearer token and the extra
//     headers on every request, runs the scenario (its messages sent for
//     args.tenant, when given):
//       message  send one message (SendMessage): {"ok":true,"text":...}
//                with the agent's reply
//       task     send "make a task": {"ok":true,"taskId":...}
//       get      GetTask of args.taskId: {"ok":true,"taskId":...}
//       cancel   CancelTask of args.taskId: {"ok":true,"taskId":...}
//       continue send a message in args.taskId: {"ok":true,"taskId":...}
//       list     ListTasks, filtered by args.listContext when given:
//                {"ok":true,"all":[task ids]}
//     A failure prints {"ok":false,"error":<class>,"code":...,"message":...,
//     "data":...}: for a JSON-RPC error answer, its code and data.
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';

const args = JSON.parse(process.argv[2]);

// observed are the headers the agent reports, as testpeers.ObservedHeaders
// names them.
const observed = [
    'X-User-Id', 'X-Session-Id', 'X-Root-Context-Id', 'X-Parent-Context-Id', 'X-Lineage-Depth', 'X-Actor-Chain',
    'X-Kagent-Root-Context-Id', 'X-Kagent-Parent-Context-Id', 'X-Extauthz-Dry-Run', 'X-Extauthz-Tools',
];

function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

function observation(contextId, tenant, headers) {
    const seen = {};
    for (const name of observed) {
        const v = headers[name.toLowerCase()];
        if (v !== undefined) {
            seen[name] = Array.isArray(v) ? v : [v];
        }
    }
    return JSON.stringify({ peer: 'agent-js', contextId, tenant, headers: seen, authorization: headers.authorization !== undefined });
}

async function agent() {
    const { default: express } = await import('express');
    const { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, Role, TaskState } = await import('@a2a-js/sdk');
    const { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } = await import('@a2a-js/sdk/server');
    const { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } = await import('@a2a-js/sdk/server/express');
    const card = {
        name: 'agent-js', description: 'Reports the identity and lineage it was called with.', version: '1.0.0',
        supportedInterfaces: [
            { url: '', protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION },
            { url: '', protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION },
        ],
        capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
        securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text'], defaultOutputModes: ['text'],
        skills: [{ id: 'whoami', name: 'whoami', description: 'Who am I?', tags: ['test'], examples: [], inputModes: ['text'], outputModes: ['text'], securityRequirements: [] }],
        documentationUrl: '', signatures: [],
    };
    const executor = {
        async execute(request, bus) {
            // The SDK's default call context keeps the request's headers.
            const headers = request.context.state.get('headers') ?? {};
            emit({ event: 'message' });
            const asked = request.userMessage.parts?.[0]?.content;
            if (asked?.$case === 'text' && asked.value === 'make a task') {
                bus.publish(AgentEvent.task({
                    id: request.taskId, contextId: request.contextId, artifacts: [], history: [request.userMessage],
                    status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: new Date().toISOString() },
                }));
                bus.finished();
                return;
            }
            bus.publish(AgentEvent.message({
                messageId: randomUUID(), role: Role.ROLE_AGENT, contextId: request.contextId,
                parts: [{ content: { $case: 'text', value: observation(request.contextId, request.context.tenant ?? '', headers) } }],
            }));
            bus.finished();
        },
        async cancelTask() {},
    };
    const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
    const app = express();
    app.use('/' + AGENT_CARD_PATH, agentCardHandler({ agentCardProvider: handler }));
    app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
    // The same agent over HTTP+JSON, its card's second interface: GET
    // /rest/tasks/{id} is GetTask.
    app.use('/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
    const server = app.listen(0, '127.0.0.1', () => emit({ port: server.address().port }));
    server.on('error', (err) => {
        emit({ ok: false, error: 'listen', message: String(err) });
        process.exit(1);
    });
    for await (const line of createInterface({ input: process.stdin })) {
        card.supportedInterfaces[0].url = line.trim() + '/a2a';
        card.supportedInterfaces[1].url = line.trim() + '/rest';
        emit({ ready: true });
    }
    server.close();
}

async function client() {
    const { Role } = await import('@a2a-js/sdk');
    const { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } = await import('@a2a-js/sdk/client');
    // fetchImpl sends the token and the extra headers on every request,
    // the card's too, as an application's authenticating fetch would.
    const fetchImpl = (input, init = {}) => {
        const headers = new Headers(init.headers);
        if (args.token) {
            headers.set('Authorization', 'Bearer ' + args.token);
        }
        for (const [name, value] of Object.entries(args.headers ?? {})) {
            headers.set(name, value);
        }
        return fetch(input, { ...init, headers });
    };
    try {
        const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
            transports: [new JsonRpcTransportFactory({ fetchImpl })],
            cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
        }));
        const client = await factory.createFromUrl(args.url);
        const send = (text, taskId = '') => client.sendMessage({
            tenant: args.tenant ?? '',
            message: { messageId: randomUUID(), role: Role.ROLE_USER, contextId: args.contextId ?? '', taskId, parts: [{ content: { $case: 'text', value: text } }] },
        });
        switch (args.scenario) {
        case 'task': {
            const task = await send('make a task');
            emit(task?.id ? { ok: true, taskId: task.id } : { ok: false, error: 'reply', message: JSON.stringify(task) });
            return;
        }
        case 'get':
            emit({ ok: true, taskId: (await client.getTask({ id: args.taskId })).id });
            return;
        case 'cancel':
            emit({ ok: true, taskId: (await client.cancelTask({ id: args.taskId })).id });
            return;
        case 'list': {
            const listed = await client.listTasks({ contextId: args.listContext ?? '', status: 0, pageSize: 50 });
            emit({ ok: true, all: (listed.tasks ?? []).map((task) => task.id) });
            return;
        }
        case 'continue':
            await send('And then?', args.taskId);
            emit({ ok: true, taskId: args.taskId });
            return;
        }
        const reply = await send('Who am I?');
        const part = reply?.parts?.[0]?.content;
        if (part?.$case !== 'text') {
            emit({ ok: false, error: 'reply', message: JSON.stringify(reply) });
            return;
        }
        emit({ ok: true, text: part.value });
    } catch (err) {
        // A JSON-RPC error answer keeps its code and data (JsonRpcTransportError).
        emit({ ok: false, error: err?.constructor?.name ?? String(err), code: err?.envelopeCode ?? err?.code, message: String(err?.message ?? err), data: err?.data });
    }
}

await (args.mode === 'agent' ? agent() : client());

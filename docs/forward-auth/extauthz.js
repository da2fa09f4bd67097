// extauthz behind nginx with njs (0.7 or later): the service sees the
// request body, so method and tool rules decide on the call the upstream
// will execute, and MCP clients that send no Mcp-Method (the TypeScript SDK
// v1, the Go SDK) can use routes with rules. See nginx-njs-server.conf.

// The headers the service owns: copied from its allow, removed otherwise.
// Both lineage presets' names are listed. A header name the configuration
// adds (claim_headers, custom lineage names) goes here too, with its js_var
// in nginx-njs-server.conf and its proxy_set_header in
// nginx-njs-upstream.conf.
var OWNED = [
    'X-User-Id', 'X-Session-Id', 'X-Root-Context-Id', 'X-Parent-Context-Id',
    'X-Kagent-Root-Context-Id', 'X-Kagent-Parent-Context-Id', 'X-Lineage-Depth',
    'X-Actor-Chain', 'X-Lineage-Token', 'X-Extauthz-Tools', 'X-Extauthz-Dry-Run', 'Authorization'
];

// The headers of a refused check's answer that go to the client.
var ANSWER_HEADERS = [
    'Content-Type', 'WWW-Authenticate', 'Retry-After', 'Cache-Control', 'Access-Control-Allow-Origin'
];

// upstreamCookie is the Cookie header the upstream gets. On a route with
// credentials.cookie the service takes the credential cookie out: its allow
// carries the rest of the header in Cookie, or lists "cookie" in
// X-Envoy-Auth-Headers-To-Remove when the credential was the only cookie.
// Anywhere else the answer says nothing of cookies and the client's pass as
// they are.
function upstreamCookie(r, reply) {
    var rest = reply.headersOut['Cookie'];
    if (rest) {
        return rest;
    }
    if (/(^|,)\s*cookie\s*(,|$)/i.test(reply.headersOut['X-Envoy-Auth-Headers-To-Remove'] || '')) {
        return '';
    }
    return r.variables.http_cookie || '';
}

function variableName(header) {
    return 'extauthz_' + header.toLowerCase().replace(/-/g, '_');
}

// authorize is the protected location's js_content handler.
function authorize(r) {
    // A body larger than client_body_buffer_size goes to a temporary file,
    // which the script cannot read (njs throws, or older versions read
    // nothing), with its length or chunked: client_body_buffer_size must
    // equal client_max_body_size. Never decide without the body.
    if (r.variables.request_body_file) {
        r.return(413);
        return;
    }
    var body = r.requestText;
    if (body === undefined && r.headersIn['Content-Length'] && r.headersIn['Content-Length'] !== '0') {
        r.return(413);
        return;
    }
    r.subrequest('/_extauthz', { method: 'POST', body: body || '' })
        .then(function (reply) {
            if (reply.status >= 200 && reply.status < 300) {
                for (var i = 0; i < OWNED.length; i++) {
                    r.variables[variableName(OWNED[i])] = reply.headersOut[OWNED[i]] || '';
                }
                r.variables.extauthz_cookie = upstreamCookie(r, reply);
                r.internalRedirect('@extauthz_upstream');
                return;
            }
            var id = reply.headersOut['X-Extauthz-Answer'];
            if (!id) {
                r.return(500);
                return;
            }
            return r.subrequest('/_extauthz_answer', { args: 'id=' + id, method: 'GET' })
                .then(function (answer) {
                    for (var j = 0; j < ANSWER_HEADERS.length; j++) {
                        var v = answer.headersOut[ANSWER_HEADERS[j]];
                        if (v) {
                            r.headersOut[ANSWER_HEADERS[j]] = v;
                        }
                    }
                    r.return(answer.status, answer.responseText || '');
                });
        })
        .catch(function (e) {
            r.error('extauthz: ' + e);
            r.return(500);
        });
}

export default { authorize };

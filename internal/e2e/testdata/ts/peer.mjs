// What the test servers of this directory share: one JSON line per event
// on stdout, and a node:http server on 127.0.0.1 at a port of its own,
// announced as {"port":N}, that stops when stdin ends (the Go test's
// startNodePeer closes it).

export function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

export function serve(httpServer) {
    httpServer.listen(0, '127.0.0.1', () => emit({ port: httpServer.address().port }));
    httpServer.on('error', (err) => {
        emit({ ok: false, error: 'listen', message: String(err) });
        process.exit(1);
    });
    process.stdin.on('end', () => process.exit(0));
    process.stdin.resume();
}

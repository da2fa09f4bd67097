package recovery

import (
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
)

// HTTP wraps h so that a handler's panic answers that request alone with
// 500, is logged with its stack and counted under name, like a gRPC call's.
// net/http would recover too, but it closes the connection, logs through
// the server's ErrorLog and counts nothing; a forward-auth proxy then sees
// a broken connection instead of an answer it denies on.
//
// http.ErrAbortHandler is net/http's way to abort a response on purpose;
// it is passed on, neither logged nor counted.
func HTTP(h http.Handler, name string, log *slog.Logger, counted func(method string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			log.Error("a request handler panicked; the request was answered with an internal error",
				"method", name, "panic", cut(v), "stack", string(debug.Stack()))
			if counted != nil {
				counted(name)
			}
			// If the handler had written its header already, this is a
			// superfluous WriteHeader that net/http logs; the status sent
			// stands and the body is cut short.
			http.Error(w, "internal error", http.StatusInternalServerError)
		}()
		h.ServeHTTP(w, r)
	})
}

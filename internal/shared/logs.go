package shared

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// RouteClientLogs sends the Redis client library's own messages (failed
// dials, reconnects) to log at debug level instead of standard error. The
// library has one logger per process, so main calls this once; the Store's
// own state changes (Redis reachable, unreachable) are logged at info and
// warn through Options.Logger regardless.
func RouteClientLogs(log *slog.Logger) {
	redis.SetLogger(clientLogger{log})
}

type clientLogger struct{ log *slog.Logger }

func (l clientLogger) Printf(ctx context.Context, format string, v ...any) {
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.DebugContext(ctx, fmt.Sprintf(format, v...), slog.String("component", "redis-client"))
	}
}

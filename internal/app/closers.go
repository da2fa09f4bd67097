package app

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
)

// closers are what the service opened, each with a name for the log: they
// are closed in reverse order of opening, and one that fails does not stop
// the others. Something already closed (a listener its server shut down)
// is not an error.
type closers struct{ list []namedCloser }

type namedCloser struct {
	name  string
	close func() error
}

// add registers close, to run before everything added earlier.
func (c *closers) add(name string, close func() error) {
	c.list = append(c.list, namedCloser{name: name, close: close})
}

// closeAll runs the closers, newest first, logging each error, and empties
// the list.
func (c *closers) closeAll(log *slog.Logger) {
	for i := len(c.list) - 1; i >= 0; i-- {
		err := c.list[i].close()
		if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("closing failed", slog.String("what", c.list[i].name), slog.Any("error", err))
		}
	}
	c.list = nil
}

package exchange

// WaitBackground waits for the background refreshes started so far.
func (e *Exchanger) WaitBackground() { e.bg.Wait() }

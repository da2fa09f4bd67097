package check

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBudgetContext checks that the lazily timed budget behaves as the
// context.WithDeadline it stands for.
func TestBudgetContext(t *testing.T) {
	type key struct{}
	past, future := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	tests := []struct {
		name     string
		deadline time.Time
		act      func(b *budget, cancelParent context.CancelFunc)
		wantErr  error
	}{
		{"deadline passed, Err before Done", past, func(*budget, context.CancelFunc) {}, context.DeadlineExceeded},
		{"deadline passed, Done first", past, func(b *budget, _ context.CancelFunc) { <-b.Done() }, context.DeadlineExceeded},
		{"released before Done", future, func(b *budget, _ context.CancelFunc) { b.release() }, context.Canceled},
		{"released after Done", future, func(b *budget, _ context.CancelFunc) { _ = b.Done(); b.release() }, context.Canceled},
		{"parent cancelled", future, func(_ *budget, cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"running", future, func(*budget, context.CancelFunc) {}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
			defer cancel()
			b := &budget{Context: parent, deadline: tc.deadline}
			defer b.release()
			tc.act(b, cancel)
			if err := b.Err(); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Err() = %v, want %v", err, tc.wantErr)
			}
			child, stop := context.WithCancel(b)
			defer stop()
			select {
			case <-b.Done():
				if tc.wantErr == nil {
					t.Fatal("Done() closed on a running budget")
				}
				<-child.Done() // a derived context follows
			default:
				if tc.wantErr != nil {
					t.Fatal("Done() open after the budget ended")
				}
			}
			if d, ok := b.Deadline(); !ok || !d.Equal(tc.deadline) {
				t.Errorf("Deadline() = %v, %v", d, ok)
			}
			if b.Value(key{}) != "v" {
				t.Error("Value() does not reach the parent")
			}
		})
	}
}

// TestBudgetUntouchedAllocatesNothing: a miss that never waits pays for
// the budget itself only.
func TestBudgetUntouchedAllocatesNothing(t *testing.T) {
	b := &budget{Context: context.Background(), deadline: time.Now().Add(time.Hour)}
	if n := testing.AllocsPerRun(100, func() {
		_, _ = b.Deadline()
		_ = b.Err()
		_ = b.Value("k")
	}); n != 0 {
		t.Errorf("an untouched budget allocates %v times", n)
	}
}

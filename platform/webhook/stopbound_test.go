package webhook_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/store"
)

// hungClaims is a store whose claims of deliveries do not answer: each
// waits for its context's end, as a call to a database that stopped
// answering does.
type hungClaims struct {
	store.Store
	entered  chan struct{} // receives when a claim waits
	inFlight atomic.Int32
}

func (h *hungClaims) ClaimDeliveries(ctx context.Context, p *store.ClaimParams) ([]*store.Delivery, error) {
	h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStopBoundedWhenClaimHangs: the delivery worker's claim does not
// answer (the database stopped answering) and the service is stopped,
// with the default timeouts, on fake time. Stop returns within StopGrace
// of it and leaves no claim in flight. Before, Stop waited for the claim
// to the end of its three calls (each bounded by the attempt timeout,
// 10 s, a second between them): 32 s.
func TestStopBoundedWhenClaimHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &hungClaims{Store: openSQLite(t, filepath.Join(t.TempDir(), "hrns.db")), entered: make(chan struct{}, 1)}
		svc := newService(st, newClock(), nil)
		svc.Start()
		<-st.entered
		synctest.Wait()
		began := time.Now()
		if err := svc.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took > webhook.StopGrace {
			t.Errorf("Stop took %v of fake time, want at most %v", took, webhook.StopGrace)
		}
		if n := st.inFlight.Load(); n != 0 {
			t.Errorf("%d claims in flight after Stop", n)
		}
	})
}

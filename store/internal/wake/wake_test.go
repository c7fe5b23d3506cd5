package wake

import "testing"

func TestHub(t *testing.T) {
	var h Hub
	a, stopA := h.Subscribe("s1")
	b, stopB := h.Subscribe("s2")
	defer stopB()
	h.Notify("s1")
	h.Notify("s1") // coalesces with the first
	select {
	case <-a:
	default:
		t.Fatal("s1's subscriber was not woken")
	}
	select {
	case <-a:
		t.Fatal("two notifications before a receive must coalesce")
	case <-b:
		t.Fatal("s2's subscriber was woken by s1")
	default:
	}
	h.NotifyAll()
	<-a
	<-b
	stopA()
	stopA() // harmless
	h.Notify("s1")
	select {
	case <-a:
		t.Fatal("an ended subscription was woken")
	default:
	}
	if len(h.subs) != 1 {
		t.Errorf("%d topics kept, want 1", len(h.subs))
	}
}

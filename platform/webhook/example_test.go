package webhook_test

import (
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/platform/webhook"
)

// ExampleSign signs a delivery as hrns serve does: the test vector of the
// Standard Webhooks libraries, so receivers built on them verify it.
func ExampleSign() {
	sig, err := webhook.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	fmt.Println(sig, err)
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= <nil>
}

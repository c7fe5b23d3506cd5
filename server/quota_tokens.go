package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/hrns-dev/hrns/platform/quota"
)

// tokenQuota answers GET /api/v2/quota/tokens: the key's token quota and
// its use in the current window (the reference's TokenQuotaStatus).
func (s *Server) tokenQuota(w http.ResponseWriter, r *http.Request, owner string) error {
	q, err := s.m.TokenQuota(r.Context(), owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, q)
	return nil
}

// writeTokenQuotaError answers a request refused by the token quota: 429,
// as the concurrent-session quota does, with Retry-After at the end of
// the window and "Hrns-Quota: tokens", so that clients do not retry it
// as they retry a full concurrent-session quota.
func writeTokenQuotaError(w http.ResponseWriter, err error) {
	w.Header().Set("Hrns-Quota", "tokens")
	qe, ok := errors.AsType[*quota.Error](err)
	if !ok {
		writeError(w, http.StatusTooManyRequests, err.Error())
		return
	}
	wait := math.Ceil(time.Until(qe.WindowEnd).Seconds())
	w.Header().Set("Retry-After", strconv.FormatFloat(min(max(wait, 1), 31*24*3600), 'f', 0, 64))
	writeError(w, http.StatusTooManyRequests, qe.Error())
}

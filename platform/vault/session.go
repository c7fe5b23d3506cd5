package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
)

// SessionTools returns the [session.VaultToolsFunc] of the service, for
// [session.Options.Vaults]: a session whose agent's environments name
// vaults gets the one_time_code tool of those vaults ([Service.Tools]),
// and a request naming a vault its owner does not have, or one that
// cannot be used (see [Service.Health]), is refused.
func (s *Service) SessionTools() session.VaultToolsFunc {
	return func(ctx context.Context, p *session.VaultParams) (*loop.Toolset, error) {
		if p.Session == "" {
			for _, id := range p.Vaults {
				problem, err := s.Health(ctx, p.Owner, id)
				switch {
				case errors.Is(err, ErrNotFound):
					return nil, fmt.Errorf("%w: vault %s not found", session.ErrVaultRefused, id)
				case errors.Is(err, ErrNotConfigured):
					return nil, fmt.Errorf("%w: %v", session.ErrVaultRefused, err)
				case err != nil:
					return nil, err
				case problem != "":
					return nil, fmt.Errorf("%w: vault %s cannot be used: %s", session.ErrVaultRefused, id, problem)
				}
			}
		}
		return s.Tools(p.Owner, p.Vaults), nil
	}
}

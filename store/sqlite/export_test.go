package sqlite

// RecoverClaimSQL is the statement of RecoverClaim, for its plan.
const RecoverClaimSQL = recoverClaimSQL

// The statements that read what a claim of deliveries or schedule runs
// took, for their plans.
const (
	DeliveriesClaimedSQL = deliveriesClaimedSQL
	RunsClaimedSQL       = runsClaimedSQL
)

// The statements of Claim, for their plans.
const (
	ClaimOwnersSQL = claimOwnersSQL
	ClaimWakeSQL   = claimWakeSQL
	ClaimBusySQL   = claimBusySQL
	ClaimOwnSQL    = claimOwnSQL
)

// SlowUpdates makes every UpdateSession of st read the session before
// updating it, as before the update in one statement.
func SlowUpdates(st *Store) { st.slowUpdates = true }

// OneHook sets the function called with whether the update in one
// statement made each UpdateSession's update.
func OneHook(st *Store, f func(applied bool)) { st.oneHook = f }

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

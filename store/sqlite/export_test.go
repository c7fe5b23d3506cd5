package sqlite

// RecoverClaimSQL is the statement of RecoverClaim, for its plan.
const RecoverClaimSQL = recoverClaimSQL

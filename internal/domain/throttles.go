package domain

// Names of the mail throttles (docs/decisions/throttles.md): the `throttle`
// member of a 429 otp_rate_limited or rate_limit_exceeded says which budget
// was spent.
const (
	ThrottlePerEmail     = "per_email"     // sign-in codes to one email (CONTRACT.md: 5 an hour)
	ThrottlePerClient    = "per_client"    // sign-in codes for one client address
	ThrottlePerAccount   = "per_account"   // invitations from, or test notifications of, one account
	ThrottlePerOrg       = "per_org"       // invitations from one team
	ThrottlePerRecipient = "per_recipient" // invitations to one address
	ThrottleGlobal       = "global"        // the whole deployment's, on every replica
)
